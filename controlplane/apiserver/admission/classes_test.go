package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/ptr"
)

// testClasses serves the system priority classes plus the given extra ones, a RuntimeClass
// "kata" with overhead and scheduling, and the given StorageClasses.
func testClasses(extra ...any) Classes {
	pcs := []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 2000001000},
		{ObjectMeta: metav1.ObjectMeta{Name: "system-cluster-critical"}, Value: 2000000000},
	}
	var scs []*storagev1.StorageClass
	for _, e := range extra {
		switch o := e.(type) {
		case *schedulingv1.PriorityClass:
			pcs = append(pcs, o)
		case *storagev1.StorageClass:
			scs = append(scs, o)
		}
	}
	return Classes{
		PriorityClass: func(_ context.Context, name string) (*schedulingv1.PriorityClass, error) {
			for _, pc := range pcs {
				if pc.Name == name {
					return pc, nil
				}
			}
			return nil, apierrors.NewNotFound(schedulingv1.Resource("priorityclasses"), name)
		},
		PriorityClasses: func(context.Context) ([]*schedulingv1.PriorityClass, error) { return pcs, nil },
		RuntimeClass: func(_ context.Context, name string) (*nodev1.RuntimeClass, error) {
			if name != "kata" {
				return nil, apierrors.NewNotFound(nodev1.Resource("runtimeclasses"), name)
			}
			return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata",
				Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
				Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "kata"},
					Tolerations: []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists}}}}, nil
		},
		StorageClasses: func(context.Context) ([]*storagev1.StorageClass, error) { return scs, nil },
	}
}

func TestPriorityFromClasses(t *testing.T) {
	never := corev1.PreemptNever
	low := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10, GlobalDefault: true, PreemptionPolicy: &never}
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	classes := testClasses(low, high)

	p := newPod()
	if err := mutate(t, Priority{Classes: classes}, podCreate(p)); err != nil {
		t.Fatal(err)
	}
	if p.Spec.PriorityClassName != "low" || *p.Spec.Priority != 10 || *p.Spec.PreemptionPolicy != corev1.PreemptNever {
		t.Errorf("global default: class %q priority %d policy %s", p.Spec.PriorityClassName, *p.Spec.Priority, *p.Spec.PreemptionPolicy)
	}
	p = newPod()
	p.Spec.PriorityClassName = "high"
	if err := mutate(t, Priority{Classes: classes}, podCreate(p)); err != nil {
		t.Fatal(err)
	}
	if *p.Spec.Priority != 1000 || *p.Spec.PreemptionPolicy != corev1.PreemptLowerPriority {
		t.Errorf("high: priority %d policy %s", *p.Spec.Priority, *p.Spec.PreemptionPolicy)
	}
	p = newPod()
	p.Spec.PriorityClassName = "high"
	p.Spec.PreemptionPolicy = &never
	if err := mutate(t, Priority{Classes: classes}, podCreate(p)); err == nil || !strings.Contains(err.Error(), "the string value of PreemptionPolicy (Never) must not be provided") {
		t.Errorf("mismatching policy: %v", err)
	}

	// A second global default is refused with upstream's words; the default itself may be updated.
	pcGVR := schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")
	pcGVK := schedulingv1.SchemeGroupVersion.WithKind("PriorityClass")
	second := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "second"}, Value: 5, GlobalDefault: true}
	err := Priority{Classes: classes}.Validate(context.Background(), attrs(second, pcGVK, "", "second", pcGVR, "", admission.Create), nil)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PriorityClass low is already marked as default. Only one default can exist") {
		t.Errorf("second default: %v", err)
	}
	if err := (Priority{Classes: classes}).Validate(context.Background(), attrs(low, pcGVK, "", "low", pcGVR, "", admission.Update), nil); err != nil {
		t.Errorf("updating the default: %v", err)
	}
}

func TestRuntimeClass(t *testing.T) {
	rc := RuntimeClass{Classes: testClasses()}
	p := newPod()
	p.Spec.RuntimeClassName = ptr.To("kata")
	a := podCreate(p)
	if err := rc.Admit(context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	if err := rc.Validate(context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	if q := p.Spec.Overhead[corev1.ResourceCPU]; q.String() != "250m" || p.Spec.NodeSelector["sandbox"] != "kata" || len(p.Spec.Tolerations) != 1 {
		t.Errorf("kata pod: overhead %v selector %v tolerations %v", p.Spec.Overhead, p.Spec.NodeSelector, p.Spec.Tolerations)
	}

	missing := newPod()
	missing.Spec.RuntimeClassName = ptr.To("gone")
	if err := rc.Admit(context.Background(), podCreate(missing), nil); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `pod rejected: RuntimeClass "gone" not found`) {
		t.Errorf("missing class: %v", err)
	}
	wrong := newPod()
	wrong.Spec.RuntimeClassName = ptr.To("kata")
	wrong.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if err := rc.Admit(context.Background(), podCreate(wrong), nil); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "Overhead doesn't match") {
		t.Errorf("wrong overhead: %v", err)
	}
	conflict := newPod()
	conflict.Spec.RuntimeClassName = ptr.To("kata")
	conflict.Spec.NodeSelector = map[string]string{"sandbox": "gvisor"}
	if err := rc.Admit(context.Background(), podCreate(conflict), nil); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "conflict: runtimeClass.scheduling.nodeSelector[sandbox]") {
		t.Errorf("selector conflict: %v", err)
	}
}

func TestDefaultStorageClass(t *testing.T) {
	old := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: metav1.NewTime(time.Unix(100, 0)),
		Annotations: map[string]string{IsDefaultStorageClassAnnotation: "true"}}}
	newer := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "newer", CreationTimestamp: metav1.NewTime(time.Unix(200, 0)),
		Annotations: map[string]string{IsDefaultStorageClassAnnotation: "true"}}}
	plain := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "plain", CreationTimestamp: metav1.NewTime(time.Unix(300, 0))}}
	gvr := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}
	claim := func(class *string) (*corev1.PersistentVolumeClaim, admission.Attributes) {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class}}
		return c, attrs(c, gvk, "default", "data", gvr, "", admission.Create)
	}
	for _, tc := range []struct {
		name    string
		classes []any
		class   *string
		want    *string
	}{
		{"newest default wins", []any{old, newer, plain}, nil, ptr.To("newer")},
		{"no default leaves it unset", []any{plain}, nil, nil},
		{"explicit class kept", []any{old}, ptr.To("plain"), ptr.To("plain")},
		{"explicit empty class kept", []any{old}, ptr.To(""), ptr.To("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, a := claim(tc.class)
			if err := (DefaultStorageClass{Classes: testClasses(tc.classes...)}).Admit(context.Background(), a, nil); err != nil {
				t.Fatal(err)
			}
			if (c.Spec.StorageClassName == nil) != (tc.want == nil) || (tc.want != nil && *c.Spec.StorageClassName != *tc.want) {
				t.Errorf("class = %v, want %v", ptr.Deref(c.Spec.StorageClassName, "<nil>"), ptr.Deref(tc.want, "<nil>"))
			}
		})
	}
}
