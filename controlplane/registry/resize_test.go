package registry

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func resizable(cpu string) *corev1.Pod {
	// Guaranteed: cpu and memory requests equal to their limits.
	q, mem := apiresource.MustParse(cpu), apiresource.MustParse("64Mi")
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Generation: 3, ResourceVersion: "7"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q, corev1.ResourceMemory: mem},
				Limits: corev1.ResourceList{corev1.ResourceCPU: q, corev1.ResourceMemory: mem}}}}}}
}

// pods/resize changes the containers' resources and nothing else, bumps the generation, and
// refuses a change of QoS class.
func TestResizeStrategy(t *testing.T) {
	s := resizeStrategy{newStrategy(true, true)}
	old := resizable("100m")
	upd := resizable("200m")
	upd.Spec.Containers[0].Image = "sneaked-in"
	upd.Labels = map[string]string{"sneaked": "in"}
	upd.ResourceVersion = "7"
	s.PrepareForUpdate(context.Background(), upd, old)
	if got := upd.Spec.Containers[0].Resources.Limits.Cpu().String(); got != "200m" {
		t.Errorf("cpu limit %s, want 200m", got)
	}
	if upd.Spec.Containers[0].Image != "x" || upd.Labels != nil || upd.Generation != 4 {
		t.Errorf("resize changed more than resources: image %q labels %v generation %d", upd.Spec.Containers[0].Image, upd.Labels, upd.Generation)
	}
	if errs := s.ValidateUpdate(context.Background(), upd, old); len(errs) != 0 {
		t.Errorf("a Guaranteed pod staying Guaranteed: %v", errs)
	}
	burstable := resizable("200m")
	delete(burstable.Spec.Containers[0].Resources.Limits, corev1.ResourceCPU)
	s.PrepareForUpdate(context.Background(), burstable, old)
	if errs := s.ValidateUpdate(context.Background(), burstable, old); len(errs) == 0 {
		t.Error("a resize that changes the QoS class was accepted")
	}
	same := resizable("100m")
	s.PrepareForUpdate(context.Background(), same, old)
	if same.Generation != 3 {
		t.Errorf("an empty resize bumped the generation to %d", same.Generation)
	}
}

// pods/ephemeralcontainers takes only the ephemeral containers.
func TestEphemeralContainersStrategy(t *testing.T) {
	s := ephemeralContainersStrategy{newStrategy(true, true)}
	old := resizable("100m")
	upd := resizable("500m")
	upd.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}}}
	s.PrepareForUpdate(context.Background(), upd, old)
	if len(upd.Spec.EphemeralContainers) != 1 || upd.Spec.Containers[0].Resources.Limits.Cpu().String() != "100m" || upd.Generation != 4 {
		t.Errorf("ephemeral %v, cpu %s, generation %d", upd.Spec.EphemeralContainers, upd.Spec.Containers[0].Resources.Limits.Cpu(), upd.Generation)
	}
}
