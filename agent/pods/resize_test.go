package pods

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAdmitResize(t *testing.T) {
	cpu := func(req, lim string) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(req), corev1.ResourceMemory: resource.MustParse("64Mi")}}
		if lim != "" {
			r.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(lim), corev1.ResourceMemory: resource.MustParse("64Mi")}
		}
		return r
	}
	pod := func(r corev1.ResourceRequirements) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: r}}}}
	}
	allocatable := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("110")}
	other := pod(cpu("1", ""))
	was := func(r corev1.ResourceRequirements) func(corev1.Container) corev1.ResourceRequirements {
		return func(corev1.Container) corev1.ResourceRequirements { return r }
	}
	for _, c := range []struct {
		name       string
		pod        *corev1.Pod
		allocated  corev1.ResourceRequirements
		staticCPUs bool
		want       *Rejection
	}{
		{"fits beside the other", pod(cpu("1", "")), cpu("250m", ""), false, nil},
		{"waits for the other to shrink or go", pod(cpu("1500m", "")), cpu("250m", ""), false,
			&Rejection{Reason: "Deferred", Message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"}},
		{"more than the node: waits too, the scheduler decides", pod(cpu("3", "")), cpu("250m", ""), false,
			&Rejection{Reason: "Deferred", Message: "Node didn't have enough resource: cpu, requested: 3000, used: 1000, capacity: 2000"}},
		{"a Guaranteed pod's CPU under the static policy", pod(cpu("1", "1")), cpu("500m", "500m"), true,
			&Rejection{Reason: "Infeasible", Message: `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`}},
		{"no CPU change under the static policy", pod(cpu("1", "1")), cpu("1", "1"), true, nil},
		{"a Burstable pod's CPU under the static policy", pod(cpu("1", "")), cpu("500m", ""), true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := AdmitResize(c.pod, was(c.allocated), []*corev1.Pod{other}, allocatable, c.staticCPUs)
			if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
				t.Errorf("AdmitResize = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestResizeFirst orders waiting resizes as upstream's pod-resize-retry-deferred-test-2 expects
// them taken on: a resize that frees resources first, then the high-priority pod, then the
// Guaranteed one, then the longest waiting.
func TestResizeFirst(t *testing.T) {
	t0 := time.Now()
	pod := func(name string, priority int32, guaranteed bool) *corev1.Pod {
		r := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
		if guaranteed {
			r.Requests[corev1.ResourceMemory] = resource.MustParse("100Mi")
			r.Limits = r.Requests.DeepCopy()
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Priority: &priority,
			Containers: []corev1.Container{{Name: "c", Resources: r}}}}
	}
	waiting := []resizeCandidate{
		{pod: pod("pod5", 0, false), increasing: true, since: t0.Add(3 * time.Second)},
		{pod: pod("pod4", 0, false), increasing: true, since: t0},
		{pod: pod("pod3", 0, true), increasing: true, since: t0.Add(time.Second)},
		{pod: pod("pod2", 1000, false), increasing: true, since: t0.Add(2 * time.Second)},
		{pod: pod("shrinking", 0, false), increasing: false, since: t0.Add(4 * time.Second)},
	}
	slices.SortStableFunc(waiting, resizeFirst)
	var got []string
	for _, c := range waiting {
		got = append(got, c.pod.Name)
	}
	if want := []string{"shrinking", "pod2", "pod3", "pod4", "pod5"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}
