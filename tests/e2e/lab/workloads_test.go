package lab

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

const statefulSetManifest = `apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 3
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - name: c
        image: localhost/skiff/netutil:1
        readinessProbe: {httpGet: {path: /hostname, port: 8080}, periodSeconds: 1}
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 64Mi}}
`

// statefulSet runs a StatefulSet of 3 with a local-path volume each, with the real kubectl:
// pods come up in order, each claim is provisioned on its pod's node and bound, the data a
// pod writes survives the pod's deletion (it comes back on the same node, to the same
// directory), and a template change rolls out with a revision `kubectl rollout` shows.
func (l *lab) statefulSet() {
	t := l.t
	l.apply(statefulSetManifest)
	l.kubectl("rollout", "status", "statefulset/db", "--timeout=3m")
	pods := map[int]*corev1.Pod{}
	for i := 0; i < 3; i++ {
		p, err := l.client.CoreV1().Pods("default").Get(l.ctx, fmt.Sprintf("db-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods[i] = p
		if i > 0 && p.CreationTimestamp.Before(&pods[i-1].CreationTimestamp) {
			t.Errorf("db-%d was created before db-%d (OrderedReady)", i, i-1)
		}
		pvc, err := l.client.CoreV1().PersistentVolumeClaims("default").Get(l.ctx, fmt.Sprintf("data-db-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pvc.Status.Phase != corev1.ClaimBound || *pvc.Spec.StorageClassName != "local-path" {
			t.Fatalf("claim %s: %s, class %v", pvc.Name, pvc.Status.Phase, *pvc.Spec.StorageClassName)
		}
		pv, err := l.client.CoreV1().PersistentVolumes().Get(l.ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pinned := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0]
		if pinned != p.Spec.NodeName || pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, "/") {
			t.Errorf("volume %s pinned to %s at %+v; its pod is on %s", pv.Name, pinned, pv.Spec.HostPath, p.Spec.NodeName)
		}
		l.kubectl("exec", p.Name, "--", "netutil", "write", "/data/id", p.Name)
	}
	out := l.kubectl("get", "pvc")
	for i := 0; i < 3; i++ {
		if !strings.Contains(out, fmt.Sprintf("data-db-%d", i)) || !strings.Contains(out, "Bound") || !strings.Contains(out, "local-path") {
			t.Errorf("kubectl get pvc:\n%s", out)
		}
	}

	// A deleted pod comes back with its name, on its volume's node, with its data.
	old := pods[1]
	l.kubectl("delete", "pod", "db-1")
	framework.Eventually(t, 2*time.Minute, "db-1 back and Ready", func() (bool, string) {
		p, err := l.client.CoreV1().Pods("default").Get(l.ctx, "db-1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.UID != old.UID && isReady(p), string(p.Status.Phase)
	})
	back, _ := l.client.CoreV1().Pods("default").Get(l.ctx, "db-1", metav1.GetOptions{})
	if back.Spec.NodeName != old.Spec.NodeName {
		t.Errorf("db-1 came back on %s, its volume is on %s", back.Spec.NodeName, old.Spec.NodeName)
	}
	if got := l.kubectl("exec", "db-1", "--", "netutil", "cat", "/data/id"); got != "db-1" {
		t.Errorf("db-1's data after the pod was deleted: %q", got)
	}

	// A template change rolls out; kubectl rollout shows both revisions and undoes it.
	l.kubectl("patch", "statefulset", "db", "-p", `{"spec":{"template":{"metadata":{"annotations":{"rev":"2"}}}}}`)
	l.kubectl("rollout", "status", "statefulset/db", "--timeout=3m")
	if out := l.kubectl("rollout", "history", "statefulset/db"); !strings.Contains(out, "1 ") || !strings.Contains(out, "2 ") {
		t.Errorf("rollout history:\n%s", out)
	}
	for i := 0; i < 3; i++ {
		if got := l.kubectl("exec", fmt.Sprintf("db-%d", i), "--", "netutil", "cat", "/data/id"); got != fmt.Sprintf("db-%d", i) {
			t.Errorf("db-%d's data after the rolling update: %q", i, got)
		}
	}
	l.kubectl("rollout", "undo", "statefulset/db")
	l.kubectl("rollout", "status", "statefulset/db", "--timeout=3m")
	if got := l.kubectl("get", "pod", "db-0", "-o", "jsonpath={.metadata.annotations.rev}"); got != "" {
		t.Errorf("after rollout undo db-0 still has rev=%q", got)
	}

	// Deleting the set keeps the claims (Retain); deleting a claim deletes its volume.
	l.kubectl("delete", "statefulset", "db")
	l.kubectl("delete", "service", "db")
	claim, _ := l.client.CoreV1().PersistentVolumeClaims("default").Get(l.ctx, "data-db-0", metav1.GetOptions{})
	l.kubectl("delete", "pvc", "data-db-0", "data-db-1", "data-db-2", "--wait=true")
	framework.Eventually(t, time.Minute, "the claims' volumes deleted", func() (bool, string) {
		_, err := l.client.CoreV1().PersistentVolumes().Get(l.ctx, claim.Spec.VolumeName, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), fmt.Sprint(err)
	})
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// preemption fills a node with a low-priority pod and then asks for the same room with a
// high-priority one: the scheduler evicts the low one (DisruptionTarget, a Preempted event)
// and the high one runs there.
func (l *lab) preemption() {
	t := l.t
	node := l.name + "-node2"
	n, err := l.client.CoreV1().Nodes().Get(l.ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cpu := n.Status.Allocatable[corev1.ResourceCPU]
	want := resource.NewMilliQuantity(cpu.MilliValue()*6/10, resource.DecimalSI)
	l.apply(`apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-low}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-high}
value: 1000
`)
	podOf := func(name, class string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			PriorityClassName: class, NodeSelector: map[string]string{corev1.LabelHostname: node},
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *want}}}}}}
	}
	low, err := l.client.CoreV1().Pods("default").Create(l.ctx, podOf("low", "e2e-low"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "low Running", func() (bool, string) {
		p, err := l.client.CoreV1().Pods("default").Get(l.ctx, "low", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, fmt.Sprint(err)
	})
	if _, err := l.client.CoreV1().Pods("default").Create(l.ctx, podOf("high", "e2e-high"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "high Running on "+node, func() (bool, string) {
		p, err := l.client.CoreV1().Pods("default").Get(l.ctx, "high", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node, fmt.Sprintf("%s on %q", p.Status.Phase, p.Spec.NodeName)
	})
	if p, err := l.client.CoreV1().Pods("default").Get(l.ctx, "low", metav1.GetOptions{}); err == nil && p.UID == low.UID {
		t.Errorf("the low-priority pod is still there: %s", p.Status.Phase)
	}
	events := l.kubectl("get", "events", "--field-selector", "involvedObject.name=low,involvedObject.uid="+string(types.UID(low.UID)))
	if !strings.Contains(events, "Preempted") {
		t.Errorf("no Preempted event for the low pod:\n%s", events)
	}
	l.kubectl("delete", "pod", "high", "--wait=false")
	l.kubectl("delete", "priorityclass", "e2e-low", "e2e-high")
}
