package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// KwokAnnotation is the annotation kwok is told to manage nodes by
// (--manage-nodes-with-annotation-selector); real nodes never carry it.
const KwokAnnotation = "kwok.x-k8s.io/node"

// Parallel runs f(0..n-1) on workers goroutines and returns the first error.
func Parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
		return err
	}
	return nil
}

// NodeName is the name of simulated node i.
func NodeName(i int) string { return fmt.Sprintf("kwok-node-%05d", i) }

// CreateNodes creates n Node objects for kwok to run: the annotation it manages them by, the
// labels a real node has, three zones, and no taint (the load's pods select them by label).
func CreateNodes(ctx context.Context, c kubernetes.Interface, n int) error {
	return Parallel(n, 16, func(i int) error {
		name := NodeName(i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokAnnotation: "fake"},
			Labels: map[string]string{
				"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
				"topology.kubernetes.io/zone": fmt.Sprint("zone-", i%3),
			},
		}}
		_, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		return err
	})
}

// podTemplate is the pods of one workload: one container that mounts the workload's ConfigMap
// and Secret, small requests (ClusterLoader2's load pods ask for 1m CPU and 10 MB), and a
// selector for kwok's nodes.
func podTemplate(w Workload) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": w.Name, LoadLabel: "true"}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"type": "kwok"},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("10M")}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "config", MountPath: "/config"}, {Name: "secret", MountPath: "/secret"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: w.Name}}}},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: w.Name}}},
			},
		},
	}
}

func loadMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{LoadLabel: "true"}}
}

// CreateLoad makes the plan's objects: namespaces first, then per workload its ConfigMap,
// Secret, Service and controller, workers at a time.
func CreateLoad(ctx context.Context, c kubernetes.Interface, p Plan, workers int) error {
	for _, ns := range p.Namespaces {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{LoadLabel: "true"}}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	// Pods are refused until their namespace's default ServiceAccount exists (the
	// ServiceAccount admission plugin); a controller would retry, but its back-off would
	// show up as start-up latency of the harness's own making.
	for _, ns := range p.Namespaces {
		for {
			_, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			if err == nil {
				break
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("namespace %s has no default ServiceAccount: %w", ns, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return Parallel(len(p.Workloads), workers, func(i int) error {
		return createWorkload(ctx, c, p.Workloads[i])
	})
}

func createWorkload(ctx context.Context, c kubernetes.Interface, w Workload) error {
	ignoreExists := func(err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if _, err := c.CoreV1().ConfigMaps(w.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: loadMeta(w.Namespace, w.Name),
		Data: map[string]string{"config": "workload " + w.Name}}, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return err
	}
	if _, err := c.CoreV1().Secrets(w.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: loadMeta(w.Namespace, w.Name),
		Data: map[string][]byte{"token": []byte("secret of " + w.Name)}}, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return err
	}
	if w.Service {
		svc := &corev1.Service{ObjectMeta: loadMeta(w.Namespace, w.Name), Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": w.Name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}}
		if w.Kind == StatefulSet {
			svc.Spec.ClusterIP = corev1.ClusterIPNone
		}
		if _, err := c.CoreV1().Services(w.Namespace).Create(ctx, svc, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return err
		}
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.Name}}
	var err error
	switch w.Kind {
	case StatefulSet:
		_, err = c.AppsV1().StatefulSets(w.Namespace).Create(ctx, &appsv1.StatefulSet{ObjectMeta: loadMeta(w.Namespace, w.Name),
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(w.Replicas)), Selector: selector, ServiceName: w.Name,
				PodManagementPolicy: appsv1.ParallelPodManagement, Template: podTemplate(w)}}, metav1.CreateOptions{})
	default:
		_, err = c.AppsV1().Deployments(w.Namespace).Create(ctx, &appsv1.Deployment{ObjectMeta: loadMeta(w.Namespace, w.Name),
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(w.Replicas)), Selector: selector, Template: podTemplate(w)}},
			metav1.CreateOptions{})
	}
	return ignoreExists(err)
}

// Churner applies churn steps at a steady rate.
type Churner struct {
	Client kubernetes.Interface
	Plan   Plan
	// replicas is each Deployment's count as the churn has set it.
	replicas map[int]int
	rolls    int
}

// Apply makes one step's API call(s): a scale is one PATCH of the Deployment's scale, a
// rolling update one PATCH of its template, a pod deletion one LIST of the workload's pods
// (namespace scope) and one DELETE.
func (ch *Churner) Apply(ctx context.Context, s Step) error {
	if ch.replicas == nil {
		ch.replicas = map[int]int{}
	}
	w := ch.Plan.Workloads[s.Workload]
	deployments := ch.Client.AppsV1().Deployments(w.Namespace)
	switch s.Action {
	case ScaleUp, ScaleDown:
		n, ok := ch.replicas[s.Workload]
		if !ok {
			n = w.Replicas
		}
		n += s.Delta
		ch.replicas[s.Workload] = n
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		_, err := deployments.Patch(ctx, w.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "scale")
		return err
	case RollingUpdate:
		ch.rolls++
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"scale.skiff.sh/revision":"%d"}}}}}`, ch.rolls)
		_, err := deployments.Patch(ctx, w.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	default:
		pods, err := ch.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + w.Name})
		if err != nil || len(pods.Items) == 0 {
			return err
		}
		p := pods.Items[rand.IntN(len(pods.Items))]
		err = ch.Client.CoreV1().Pods(w.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return err
	}
}

// Run applies steps at perSecond until they run out or stop closes (a call under way
// finishes); it returns the number applied and the first error.
func (ch *Churner) Run(ctx context.Context, stop <-chan struct{}, steps []Step, perSecond float64) (int, error) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / perSecond))
	defer tick.Stop()
	for i, s := range steps {
		select {
		case <-stop:
			return i, nil
		case <-ctx.Done():
			return i, ctx.Err()
		case <-tick.C:
		}
		if err := ch.Apply(ctx, s); err != nil {
			return i, fmt.Errorf("churn step %d (%v on %s): %w", i, s.Action, ch.Plan.Workloads[s.Workload].Name, err)
		}
	}
	return len(steps), nil
}

// Reader makes the reads upstream's SLOs cover while the churn runs, as a client of the
// cluster would: every second one pod by name, every 5 s one namespace's pods, every 30 s
// every pod of the cluster.
func Reader(ctx context.Context, stop <-chan struct{}, c kubernetes.Interface, p Plan, pods *PodTracker) error {
	second := time.NewTicker(time.Second)
	defer second.Stop()
	for i := 1; ; i++ {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-second.C:
		}
		var err error
		opts := metav1.ListOptions{LabelSelector: LoadLabel}
		switch {
		case i%30 == 0:
			_, err = c.CoreV1().Pods("").List(ctx, opts)
		case i%5 == 0:
			_, err = c.CoreV1().Pods(p.Namespaces[i%len(p.Namespaces)]).List(ctx, opts)
		default:
			if ns, name := pods.AnyRunning(); name != "" {
				_, err = c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					err = nil
				}
			}
		}
		if err != nil {
			return err
		}
	}
}
