package quota

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func podWith(requests, limits corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}}}}
}

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestPodUsage(t *testing.T) {
	u, err := PodUsage(podWith(rl("cpu", "250m", "memory", "64Mi"), rl("cpu", "1")), clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[corev1.ResourceName]string{"pods": "1", "count/pods": "1", "cpu": "250m", "requests.cpu": "250m",
		"memory": "64Mi", "requests.memory": "64Mi", "limits.cpu": "1"} {
		if q := u[name]; q.String() != want {
			t.Errorf("%s = %s, want %s", name, q.String(), want)
		}
	}
	done := podWith(rl("cpu", "1"), nil)
	done.Status.Phase = corev1.PodSucceeded
	if u, _ := PodUsage(done, clock.RealClock{}); len(u) != 1 || u["count/pods"] == (resource.Quantity{}) {
		t.Errorf("a finished pod charges %v, want only its object count", u)
	}
	stuck := podWith(rl("cpu", "1"), nil)
	stuck.DeletionTimestamp, stuck.DeletionGracePeriodSeconds = &metav1.Time{Time: time.Unix(1000, 0)}, ptr.To[int64](30)
	if u, _ := PodUsage(stuck, testclock.NewFakeClock(time.Unix(1100, 0))); len(u) != 1 {
		t.Errorf("a pod stuck terminating past its grace charges %v", u)
	}
	if u, _ := PodUsage(stuck, testclock.NewFakeClock(time.Unix(1010, 0))); len(u) == 1 {
		t.Error("a pod within its grace stopped being charged")
	}
}

func TestPodUsageExtendedResources(t *testing.T) {
	u, err := PodUsage(podWith(rl("example.com/dongle", "2", "hugepages-2Mi", "4Mi", "kubernetes.io/other", "1"), rl("example.com/dongle", "2")), clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[corev1.ResourceName]string{"requests.example.com/dongle": "2", "hugepages-2Mi": "4Mi", "requests.hugepages-2Mi": "4Mi"} {
		if q := u[name]; q.String() != want {
			t.Errorf("%s = %s, want %s (%v)", name, q.String(), want, u)
		}
	}
	for _, name := range []corev1.ResourceName{"example.com/dongle", "limits.example.com/dongle", "requests.kubernetes.io/other"} {
		if _, ok := u[name]; ok {
			t.Errorf("%s charged: only requests of an extended resource are quotaed", name)
		}
	}
	e := newPodEvaluator(nil, clock.RealClock{})
	got := e.MatchingResources([]corev1.ResourceName{"requests.example.com/dongle", "example.com/dongle", "requests.hugepages-1Gi", "cpu", "services"})
	if want := []corev1.ResourceName{"requests.example.com/dongle", "requests.hugepages-1Gi", "cpu"}; !reflect.DeepEqual(got, want) {
		t.Errorf("matching %v, want %v", got, want)
	}
}

func TestPodScopesAndConstraints(t *testing.T) {
	e := newPodEvaluator(nil, clock.RealClock{})
	best := podWith(nil, nil)
	burst := podWith(rl("cpu", "1"), nil)
	deadline := podWith(nil, nil)
	deadline.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
	classed := podWith(nil, nil)
	classed.Spec.PriorityClassName = "high"
	scope := func(name corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: name, Operator: op, Values: values}
	}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		scope corev1.ScopedResourceSelectorRequirement
		want  bool
	}{
		{"best effort", best, scope(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists), true},
		{"burstable is not best effort", burst, scope(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists), false},
		{"not best effort", burst, scope(corev1.ResourceQuotaScopeNotBestEffort, corev1.ScopeSelectorOpExists), true},
		{"terminating", deadline, scope(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpExists), true},
		{"not terminating", best, scope(corev1.ResourceQuotaScopeNotTerminating, corev1.ScopeSelectorOpExists), true},
		{"priority class in", classed, scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high", "low"), true},
		{"priority class not in", classed, scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "high"), false},
		{"no priority class", best, scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpExists), false},
	} {
		got, err := e.MatchingScopes(tc.pod, []corev1.ScopedResourceSelectorRequirement{tc.scope})
		if err != nil {
			t.Fatal(err)
		}
		if (len(got) == 1) != tc.want {
			t.Errorf("%s: matched %v, want %v", tc.name, got, tc.want)
		}
	}
	err := e.Constraints([]corev1.ResourceName{"requests.cpu", "limits.memory", "pods"}, podWith(rl("cpu", "1"), nil))
	if err == nil || err.Error() != "must specify limits.memory for: c" {
		t.Errorf("constraints: %v", err)
	}
	if err := e.Constraints([]corev1.ResourceName{"pods"}, best); err != nil {
		t.Errorf("a count needs no requests: %v", err)
	}
}

func TestServiceAndClaimUsage(t *testing.T) {
	lb := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}, {Port: 443}}}}
	u, _ := ServiceUsage(lb)
	if q := u[corev1.ResourceServicesNodePorts]; q.Value() != 2 || u[corev1.ResourceServicesLoadBalancers] == (resource.Quantity{}) {
		t.Errorf("load balancer usage %v", u)
	}
	u, _ = ServiceUsage(&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}})
	if _, ok := u[corev1.ResourceServicesNodePorts]; ok {
		t.Errorf("ClusterIP usage charges node ports: %v", u)
	}
	pvc := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("fast"),
		Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "5Gi")}}}
	u, _ = ClaimUsage(pvc)
	for name, want := range map[corev1.ResourceName]string{"persistentvolumeclaims": "1", "requests.storage": "5Gi",
		"fast.storageclass.storage.k8s.io/requests.storage": "5Gi", "fast.storageclass.storage.k8s.io/persistentvolumeclaims": "1"} {
		if q := u[name]; q.String() != want {
			t.Errorf("%s = %s, want %s", name, q.String(), want)
		}
	}
	e := newClaimEvaluator(nil)
	if got := e.MatchingResources([]corev1.ResourceName{"fast.storageclass.storage.k8s.io/requests.storage", "pods", "requests.storage"}); len(got) != 2 {
		t.Errorf("claim resources %v", got)
	}
	for _, ev := range Evaluators(nil, clock.RealClock{}) {
		if ev.GroupResource().Resource == "" || strings.Contains(ev.GroupResource().String(), " ") {
			t.Errorf("evaluator for %v", ev.GroupResource())
		}
	}
}
