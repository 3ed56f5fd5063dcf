package scheduler

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

func testNode(name, cpu string, labels ...string) *corev1.Node {
	l := map[string]string{corev1.LabelHostname: name}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
		}},
	}
}

func testPod(name, cpu string, priority int32, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			SchedulerName: DefaultSchedulerName,
			Priority:      ptr.To(priority),
			Containers: []corev1.Container{{Name: "c", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func boundTo(node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeName = node; p.Status.Phase = corev1.PodRunning }
}

func withClaim(volume, claim string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

// cluster is a scheduler running against a fake API server.
type cluster struct {
	client   *fake.Clientset
	recorder *record.FakeRecorder
	cancel   context.CancelFunc
	done     chan struct{}

	mu     sync.Mutex
	events []string
}

// startCluster runs a scheduler over objs. The fake API server does not implement
// pods/binding, so a reactor does what the real one does: set spec.nodeName.
func startCluster(t *testing.T, objs ...runtime.Object) *cluster {
	t.Helper()
	client := fake.NewClientset(objs...)
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		create := action.(k8stesting.CreateAction)
		if create.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := create.GetObject().(*corev1.Binding)
		obj, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		p := obj.(*corev1.Pod).DeepCopy()
		p.Spec.NodeName = b.Target.Name
		return true, b, client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p, b.Namespace)
	})
	s := New(client, Options{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	rec := record.NewFakeRecorder(100)
	s.recorder = rec
	ctx, cancel := context.WithCancel(context.Background())
	c := &cluster{client: client, recorder: rec, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		s.Run(ctx)
	}()
	t.Cleanup(c.stop)
	return c
}

func (c *cluster) stop() {
	c.cancel()
	<-c.done
}

// drainEvents collects what the recorder got so far.
func (c *cluster) drainEvents() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		select {
		case e := <-c.recorder.Events:
			c.events = append(c.events, e)
		default:
			return append([]string(nil), c.events...)
		}
	}
}

func (c *cluster) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := c.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// actionIndex finds the first action matching verb, resource, subresource and name.
func actionIndex(actions []k8stesting.Action, verb, res, sub, name string) int {
	for i, a := range actions {
		if a.GetVerb() != verb || a.GetResource().Resource != res || a.GetSubresource() != sub {
			continue
		}
		var n string
		switch a := a.(type) {
		case k8stesting.PatchAction:
			n = a.GetName()
		case k8stesting.DeleteAction:
			n = a.GetName()
		case k8stesting.CreateAction:
			if m, err := metaName(a.GetObject()); err == nil {
				n = m
			}
		}
		if n == name {
			return i
		}
	}
	return -1
}

func metaName(obj runtime.Object) (string, error) {
	if b, ok := obj.(*corev1.Binding); ok {
		return b.Name, nil
	}
	return "", nil
}

func patchOf(actions []k8stesting.Action, i int) string {
	return string(actions[i].(k8stesting.PatchAction).GetPatch())
}

func TestPreemptionEvictsLowerPriorityPod(t *testing.T) {
	c := startCluster(t,
		testNode("n1", "2"),
		testPod("low", "2", 1, boundTo("n1")),
		testPod("high", "2", 1000),
	)
	eventually(t, "the preemptor to be bound", func() bool {
		p := c.pod(t, "high")
		return p != nil && p.Spec.NodeName == "n1"
	})
	if c.pod(t, "low") != nil {
		t.Fatal("victim still exists")
	}
	actions := c.client.Actions()
	nominate := -1
	for i, a := range actions {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" && a.(k8stesting.PatchAction).GetName() == "high" &&
			strings.Contains(patchOf(actions, i), `"nominatedNodeName":"n1"`) {
			nominate = i
			break
		}
	}
	condition := actionIndex(actions, "patch", "pods", "status", "low")
	del := actionIndex(actions, "delete", "pods", "", "low")
	bind := actionIndex(actions, "create", "pods", "binding", "high")
	if nominate < 0 || condition < 0 || del < 0 || bind < 0 || !(nominate < condition && condition < del && del < bind) {
		t.Fatalf("want nominate < condition < delete < bind, got %d %d %d %d", nominate, condition, del, bind)
	}
	patch := patchOf(actions, condition)
	for _, want := range []string{`"type":"DisruptionTarget"`, `"status":"True"`, `"reason":"PreemptionByScheduler"`,
		`"message":"default-scheduler: preempting to accommodate a higher priority pod"`} {
		if !strings.Contains(patch, want) {
			t.Errorf("victim status patch %s lacks %s", patch, want)
		}
	}
	if d := actions[del].(k8stesting.DeleteAction).GetDeleteOptions(); d.GracePeriodSeconds != nil {
		t.Errorf("victim deleted with grace period %d, want the default", *d.GracePeriodSeconds)
	}
	eventually(t, "the Preempted event", func() bool {
		for _, e := range c.drainEvents() {
			if e == "Normal Preempted Preempted by pod uid-high on node n1" {
				return true
			}
		}
		return false
	})
	var failed string
	for _, e := range c.drainEvents() {
		if strings.HasPrefix(e, "Warning FailedScheduling") {
			failed = e
		}
	}
	if want := "Warning FailedScheduling 0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node n1, preempting 1 victims"; failed != want {
		t.Errorf("event %q\n want %q", failed, want)
	}
}

func TestNoPreemptionOfEqualPriorityOrWithPolicyNever(t *testing.T) {
	never := func(p *corev1.Pod) { p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever) }
	c := startCluster(t,
		testNode("n1", "2"),
		testNode("n2", "2"),
		testPod("low", "2", 1, boundTo("n1")),
		testPod("equal", "2", 1000, boundTo("n2")),
		testPod("never", "2", 1000, never),
		testPod("peer", "2", 1000, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "n2"} }),
	)
	msg := func(name string) string {
		if p := c.pod(t, name); p != nil {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled {
					return cond.Message
				}
			}
		}
		return ""
	}
	eventually(t, "both pods to be reported unschedulable", func() bool { return msg("never") != "" && msg("peer") != "" })
	if got, want := msg("never"), "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."; got != want {
		t.Errorf("never: %q\n want %q", got, want)
	}
	if got, want := msg("peer"), "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector. "+
		"preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."; got != want {
		t.Errorf("peer: %q\n want %q", got, want)
	}
	for _, a := range c.client.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("unexpected %s", a)
		}
	}
	if p := c.pod(t, "never"); p.Status.NominatedNodeName != "" {
		t.Errorf("never nominated to %s", p.Status.NominatedNodeName)
	}
}

func wffcClass(name string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "skiff.sh/local",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
}

func claim(name, class, volume string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
	if class != "" {
		pvc.Spec.StorageClassName = ptr.To(class)
	}
	return pvc
}

func TestWaitForFirstConsumerClaimGetsSelectedNodeBeforeBinding(t *testing.T) {
	c := startCluster(t,
		testNode("n1", "2"),
		wffcClass("local"),
		claim("data", "local", ""),
		testPod("app", "1", 0, withClaim("v", "data")),
	)
	eventually(t, "the pod to be bound", func() bool {
		p := c.pod(t, "app")
		return p != nil && p.Spec.NodeName == "n1"
	})
	pvc, err := c.client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pvc.Annotations["volume.kubernetes.io/selected-node"]; got != "n1" {
		t.Errorf("selected-node %q, want n1", got)
	}
	actions := c.client.Actions()
	annotate := actionIndex(actions, "patch", "persistentvolumeclaims", "", "data")
	bind := actionIndex(actions, "create", "pods", "binding", "app")
	if annotate < 0 || bind < 0 || annotate > bind {
		t.Fatalf("annotation at %d, binding at %d", annotate, bind)
	}
}

func TestClaimAlreadySelectingTheNodeIsNotPatched(t *testing.T) {
	pvc := claim("data", "local", "")
	pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "n2"}
	c := startCluster(t,
		testNode("n1", "2"), testNode("n2", "2"),
		wffcClass("local"), pvc,
		testPod("app", "1", 0, withClaim("v", "data")),
	)
	eventually(t, "the pod to be bound", func() bool {
		p := c.pod(t, "app")
		return p != nil && p.Spec.NodeName != ""
	})
	if got := c.pod(t, "app").Spec.NodeName; got != "n2" {
		t.Errorf("bound to %s, want the selected node n2", got)
	}
	if i := actionIndex(c.client.Actions(), "patch", "persistentvolumeclaims", "", "data"); i >= 0 {
		t.Errorf("claim patched: %s", patchOf(c.client.Actions(), i))
	}
}

func TestBoundVolumeNodeAffinity(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n2"}}},
		}}}},
	}}
	c := startCluster(t,
		testNode("n1", "2"), testNode("n2", "2"), testNode("n3", "2"),
		pv, claim("data", "", "pv1"),
		testPod("app", "1", 0, withClaim("v", "data")),
	)
	eventually(t, "the pod to be bound", func() bool {
		p := c.pod(t, "app")
		return p != nil && p.Spec.NodeName != ""
	})
	if got := c.pod(t, "app").Spec.NodeName; got != "n2" {
		t.Errorf("bound to %s, want n2 where the volume is", got)
	}
}

// A pod waiting for its claim is retried when the claim appears.
func TestMissingClaimThenCreated(t *testing.T) {
	c := startCluster(t,
		testNode("n1", "2"),
		wffcClass("local"),
		testPod("app", "1", 0, withClaim("v", "data")),
	)
	eventually(t, "the pod to be reported unschedulable", func() bool {
		p := c.pod(t, "app")
		return p != nil && len(p.Status.Conditions) > 0
	})
	if got, want := c.pod(t, "app").Status.Conditions[0].Message,
		`0/1 nodes are available: persistentvolumeclaim "data" not found. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.`; got != want {
		t.Errorf("condition %q\n want %q", got, want)
	}
	if _, err := c.client.CoreV1().PersistentVolumeClaims("default").Create(context.Background(), claim("data", "local", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod to be bound", func() bool {
		p := c.pod(t, "app")
		return p != nil && p.Spec.NodeName == "n1"
	})
}

// The PodDisruptionBudget informer feeds preemption: the unprotected pod is the victim.
func TestPreemptionRespectsPodDisruptionBudgets(t *testing.T) {
	labelled := func(app string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Labels = map[string]string{"app": app} }
	}
	c := startCluster(t,
		testNode("n1", "2"), testNode("n2", "2"),
		// The protected pod has the lower priority: without the PDB it would be the victim.
		testPod("guarded", "2", 1, boundTo("n1"), labelled("db")),
		testPod("free", "2", 5, boundTo("n2"), labelled("web")),
		&policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0},
		},
		testPod("high", "2", 1000),
	)
	eventually(t, "the preemptor to be bound", func() bool {
		p := c.pod(t, "high")
		return p != nil && p.Spec.NodeName == "n2"
	})
	if c.pod(t, "guarded") == nil || c.pod(t, "free") != nil {
		t.Fatal("wrong victim")
	}
}
