package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
)

func TestPodResizeValidator(t *testing.T) {
	nodes := map[string]*corev1.Node{
		"n1":  {ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelOSStable: "linux"}}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
		"win": {ObjectMeta: metav1.ObjectMeta{Name: "win", Labels: map[string]string{corev1.LabelOSStable: "windows"}}},
	}
	v := PodResizeValidator{Nodes: func(_ context.Context, name string) (*corev1.Node, error) {
		if n, ok := nodes[name]; ok {
			return n, nil
		}
		return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}}
	pod := func(node, cpu string, generation int64) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Generation: generation}, Spec: corev1.PodSpec{NodeName: node,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	attrs := func(sub string, old, obj *corev1.Pod) admission.Attributes {
		gvr := corev1.SchemeGroupVersion.WithResource("pods")
		return admission.NewAttributesRecord(obj, old, schema.GroupVersionKind{}, "default", "p", gvr, sub, admission.Update, nil, false, &user.DefaultInfo{Name: "alice"})
	}
	for _, c := range []struct {
		name       string
		a          admission.Attributes
		want, kind string
	}{
		{"fits the node", attrs("resize", pod("n1", "1", 1), pod("n1", "2", 2)), "", ""},
		{"beyond the node", attrs("resize", pod("n1", "1", 1), pod("n1", "3", 2)), "node didn't have enough allocatable resources: cpu, requested: 3000, allocatable: 2000", "NodeCapacity"},
		{"not a resize", attrs("", pod("n1", "1", 1), pod("n1", "3", 2)), "", ""},
		{"unchanged spec", attrs("resize", pod("n1", "3", 2), pod("n1", "3", 2)), "", ""},
		{"unbound", attrs("resize", pod("", "1", 1), pod("", "3", 2)), "", ""},
		{"node gone", attrs("resize", pod("gone", "1", 1), pod("gone", "3", 2)), `node "gone" not found`, ""},
		{"windows", attrs("resize", pod("win", "1", 1), pod("win", "3", 2)), `pod resize is only supported on linux nodes, node "win" is "windows"`, "UnsupportedPlatform"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := v.Validate(context.Background(), c.a, nil)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want Forbidden with %q", err, c.want)
			}
			if c.kind != "" {
				st := err.(apierrors.APIStatus).Status()
				if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Type != metav1.CauseType(c.kind) {
					t.Errorf("causes %+v, want %s", st.Details, c.kind)
				}
			}
		})
	}
}
