// Package controlplane is the end-to-end suite of the scheduler and the controllers, against
// `skiff server --disable-agent` with three Node objects whose agents this test plays.
package controlplane

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

func eventually(t *testing.T, timeout time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	framework.Eventually(t, timeout, what, f)
}

func deployment(name string, replicas int32, tolerationSeconds int64) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "skiff/testserver:1",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
					Tolerations: []corev1.Toleration{
						{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(tolerationSeconds)},
						{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(tolerationSeconds)},
					},
				},
			},
		},
	}
}

// placement counts the live (not terminating) pods of app per node.
func placement(ctx context.Context, c kubernetes.Interface, ns, app string) (map[string]int, int, []corev1.Pod) {
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	out := map[string]int{}
	if err != nil {
		return out, 0, nil
	}
	live := 0
	var items []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		live++
		items = append(items, p)
		if p.Spec.NodeName != "" {
			out[p.Spec.NodeName]++
		}
	}
	return out, live, items
}

func TestSchedulerAndControllers(t *testing.T) {
	s := framework.StartServer(t, "--node-monitor-grace-period", "6s")
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	kc := framework.Kubectl(t, 33)
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := s.Run(ctx, kc, args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return out
	}

	nodes := map[string]*fakeNode{}
	for _, name := range []string{"node-1", "node-2", "node-3"} {
		nodes[name] = newFakeNode(t, c, name)
	}

	// nodeipam: every node gets its own /24 of 10.244.0.0/16.
	eventually(t, 30*time.Second, "pod CIDRs", func() (bool, string) {
		seen := map[string]bool{}
		list, _ := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range list.Items {
			if !strings.HasPrefix(n.Spec.PodCIDR, "10.244.") || !strings.HasSuffix(n.Spec.PodCIDR, "/24") || seen[n.Spec.PodCIDR] {
				return false, fmt.Sprint(n.Name, " ", n.Spec.PodCIDR)
			}
			seen[n.Spec.PodCIDR] = true
		}
		return len(seen) == 3, fmt.Sprint(seen)
	})

	// Leader election Leases exist, held by <host>_<uuid>.
	for _, name := range []string{"kube-scheduler", "kube-controller-manager"} {
		eventually(t, 30*time.Second, "lease "+name, func() (bool, string) {
			l, err := c.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil {
				return false, fmt.Sprint(err)
			}
			return strings.Contains(*l.Spec.HolderIdentity, "_") && *l.Spec.LeaseDurationSeconds == 15, *l.Spec.HolderIdentity
		})
	}

	// Health and metrics of both components over HTTPS on loopback.
	for _, addr := range []string{s.SchedulerAddr, s.ControllerManagerAddr} {
		if code, body := framework.HTTPSGet(t, "https://"+addr+"/healthz"); code != 200 || body != "ok" {
			t.Fatalf("%s/healthz: %d %q", addr, code, body)
		}
		if code, body := framework.HTTPSGet(t, "https://"+addr+"/metrics"); code != 200 || !strings.Contains(body, "# TYPE") {
			t.Fatalf("%s/metrics: %d", addr, code)
		}
	}

	// serviceaccount and root-ca-cert-publisher: every namespace has both.
	kubectl("create", "namespace", "team-a")
	eventually(t, 30*time.Second, "default service account and kube-root-ca.crt", func() (bool, string) {
		_, err1 := c.CoreV1().ServiceAccounts("team-a").Get(ctx, "default", metav1.GetOptions{})
		cm, err2 := c.CoreV1().ConfigMaps("team-a").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err1 == nil && err2 == nil && strings.Contains(cm.Data["ca.crt"], "BEGIN CERTIFICATE"), fmt.Sprint(err1, err2)
	})

	// A DaemonSet runs one pod on every node.
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agentd"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agentd"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agentd"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "d", Image: "skiff/testserver:1"}}}}}}
	if _, err := c.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "one daemon pod per node", func() (bool, string) {
		per, live, _ := placement(ctx, c, "default", "agentd")
		d, _ := c.AppsV1().DaemonSets("default").Get(ctx, "agentd", metav1.GetOptions{})
		return live == 3 && per["node-1"] == 1 && per["node-2"] == 1 && per["node-3"] == 1 && d.Status.NumberReady == 3,
			fmt.Sprint(per, " ready ", d.Status.NumberReady)
	})
	kubectl("delete", "daemonset", "agentd")

	// A Deployment of 6 spreads 2/2/2.
	if _, err := c.AppsV1().Deployments("default").Create(ctx, deployment("web", 6, 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "6 replicas spread 2/2/2", func() (bool, string) {
		per, live, _ := placement(ctx, c, "default", "web")
		return live == 6 && per["node-1"] == 2 && per["node-2"] == 2 && per["node-3"] == 2, fmt.Sprint(per)
	})
	pods, _ := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	first := pods.Items[0]
	eventually(t, 30*time.Second, "Scheduled event", func() (bool, string) {
		ev, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=Scheduled,involvedObject.name=" + first.Name})
		if err != nil || len(ev.Items) == 0 {
			return false, fmt.Sprint(err)
		}
		want := fmt.Sprintf("Successfully assigned default/%s to %s", first.Name, first.Spec.NodeName)
		return ev.Items[0].Message == want && ev.Items[0].Source.Component == "default-scheduler", ev.Items[0].Message
	})
	eventually(t, 60*time.Second, "deployment available", func() (bool, string) {
		d, err := c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 6 && d.Status.UpdatedReplicas == 6, fmt.Sprintf("%+v", d.Status)
	})

	// A pod that fits nowhere gets upstream's FailedScheduling message, preemption's part too.
	huge := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "huge"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x:1",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}}}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, huge, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "FailedScheduling for huge", func() (bool, string) {
		ev, _ := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling,involvedObject.name=huge"})
		for _, e := range ev.Items {
			if e.Message == "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod." {
				return true, ""
			}
		}
		return false, fmt.Sprint(ev.Items)
	})

	// A tainted node gets no new pods.
	kubectl("taint", "nodes", "node-3", "dedicated=infra:NoSchedule")
	if _, err := c.AppsV1().Deployments("default").Create(ctx, deployment("extra", 4, 300), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "extra avoids the tainted node", func() (bool, string) {
		per, live, _ := placement(ctx, c, "default", "extra")
		return live == 4 && per["node-1"]+per["node-2"] == 4 && per["node-3"] == 0, fmt.Sprint(per)
	})
	kubectl("taint", "nodes", "node-3", "dedicated=infra:NoSchedule-")

	// The garbage collector removes what a deleted Deployment owned.
	kubectl("delete", "deployment", "extra")
	eventually(t, 60*time.Second, "extra's ReplicaSets and pods collected", func() (bool, string) {
		_, live, _ := placement(ctx, c, "default", "extra")
		rs, _ := c.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=extra"})
		return live == 0 && len(rs.Items) == 0, fmt.Sprint(live, " pods, ", len(rs.Items), " replicasets")
	})

	// A Service's EndpointSlices follow pod readiness.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}
	if _, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sliceState := func() (ready, notReady int, port int32, err error) {
		slices, err := c.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return 0, 0, 0, err
		}
		for _, s := range slices.Items {
			for _, p := range s.Ports {
				port = *p.Port
			}
			for _, e := range s.Endpoints {
				if e.TargetRef == nil || e.NodeName == nil {
					return 0, 0, 0, fmt.Errorf("endpoint without targetRef/nodeName")
				}
				if *e.Conditions.Ready {
					ready++
				} else {
					notReady++
				}
			}
		}
		return ready, notReady, port, nil
	}
	eventually(t, 30*time.Second, "slice with 6 ready endpoints on port 8080", func() (bool, string) {
		r, nr, port, err := sliceState()
		return err == nil && r == 6 && nr == 0 && port == 8080, fmt.Sprint(r, nr, port, err)
	})
	_, _, webPods := placement(ctx, c, "default", "web")
	victim := webPods[0]
	nodes[victim.Spec.NodeName].setNotReady(victim.Name, true)
	eventually(t, 30*time.Second, "a not-ready pod's endpoint turns not ready", func() (bool, string) {
		r, nr, _, err := sliceState()
		return err == nil && r == 5 && nr == 1, fmt.Sprint(r, nr, err)
	})
	eventually(t, 30*time.Second, "legacy Endpoints follow", func() (bool, string) {
		ep, err := c.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(ep.Subsets) != 1 {
			return false, fmt.Sprint(err, ep)
		}
		return len(ep.Subsets[0].Addresses) == 5 && len(ep.Subsets[0].NotReadyAddresses) == 1, fmt.Sprint(ep.Subsets)
	})
	nodes[victim.Spec.NodeName].setNotReady(victim.Name, false)

	// A node whose Lease stops is marked Unknown and tainted; its pods (tolerationSeconds 2)
	// are evicted and replaced on the other nodes.
	nodes["node-2"].stop()
	eventually(t, 60*time.Second, "node-2 NotReady with unreachable taints", func() (bool, string) {
		n, err := c.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var ready corev1.ConditionStatus
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				ready = cond.Status
			}
		}
		var taints []string
		for _, tt := range n.Spec.Taints {
			taints = append(taints, tt.Key+":"+string(tt.Effect))
		}
		sort.Strings(taints)
		got := strings.Join(taints, ",")
		return ready == corev1.ConditionUnknown && got == "node.kubernetes.io/unreachable:NoExecute,node.kubernetes.io/unreachable:NoSchedule", string(ready) + " " + got
	})
	out := kubectl("get", "nodes")
	if !strings.Contains(out, "node-2   NotReady") {
		t.Errorf("kubectl get nodes:\n%s", out)
	}
	eventually(t, 90*time.Second, "node-2's pods evicted and replaced elsewhere", func() (bool, string) {
		per, live, _ := placement(ctx, c, "default", "web")
		return live == 6 && per["node-2"] == 0 && per["node-1"]+per["node-3"] == 6, fmt.Sprint(per)
	})
	eventually(t, 60*time.Second, "deployment available again", func() (bool, string) {
		d, _ := c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return d.Status.AvailableReplicas == 6, fmt.Sprintf("%+v", d.Status)
	})

	// Rolling update with kubectl set image, then rollout undo.
	kubectl("set", "image", "deployment/web", "web=skiff/testserver:2")
	out = kubectl("rollout", "status", "deployment/web", "--timeout=120s")
	if !strings.Contains(out, "successfully rolled out") {
		t.Fatalf("rollout status:\n%s", out)
	}
	image := func() string {
		d, _ := c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return d.Spec.Template.Spec.Containers[0].Image
	}
	if image() != "skiff/testserver:2" {
		t.Fatalf("image after set image: %s", image())
	}
	if out := kubectl("rollout", "history", "deployment/web"); !strings.Contains(out, "1 ") || !strings.Contains(out, "2 ") {
		t.Fatalf("rollout history:\n%s", out)
	}
	kubectl("rollout", "undo", "deployment/web")
	out = kubectl("rollout", "status", "deployment/web", "--timeout=120s")
	if !strings.Contains(out, "successfully rolled out") || image() != "skiff/testserver:1" {
		t.Fatalf("rollout undo: image %s\n%s", image(), out)
	}
	eventually(t, 60*time.Second, "old pods gone after undo", func() (bool, string) {
		_, live, items := placement(ctx, c, "default", "web")
		for _, p := range items {
			if p.Spec.Containers[0].Image != "skiff/testserver:1" {
				return false, p.Name
			}
		}
		return live == 6, fmt.Sprint(live)
	})

	// rollout restart replaces every pod.
	before := map[string]bool{}
	_, _, items := placement(ctx, c, "default", "web")
	for _, p := range items {
		before[p.Name] = true
	}
	kubectl("rollout", "restart", "deployment/web")
	if out := kubectl("rollout", "status", "deployment/web", "--timeout=120s"); !strings.Contains(out, "successfully rolled out") {
		t.Fatalf("rollout status after restart:\n%s", out)
	}
	eventually(t, 60*time.Second, "all pods replaced by restart", func() (bool, string) {
		_, live, items := placement(ctx, c, "default", "web")
		for _, p := range items {
			if before[p.Name] {
				return false, p.Name
			}
		}
		return live == 6, fmt.Sprint(live)
	})

	// Deleting a namespace empties it, then removes it.
	if _, err := c.AppsV1().Deployments("team-a").Create(ctx, deployment("app", 2, 300), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ConfigMaps("team-a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "team-a pods running", func() (bool, string) {
		_, live, _ := placement(ctx, c, "team-a", "app")
		return live == 2, fmt.Sprint(live)
	})
	kubectl("delete", "namespace", "team-a", "--timeout=120s")
	if _, err := c.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace team-a still there: %v", err)
	}
	if cms, _ := c.CoreV1().ConfigMaps("team-a").List(ctx, metav1.ListOptions{}); len(cms.Items) != 0 {
		t.Fatalf("%d configmaps left in deleted namespace", len(cms.Items))
	}
}
