package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func quantities(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestLimitRanger(t *testing.T) {
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "default"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Default: quantities("cpu", "500m"), DefaultRequest: quantities("cpu", "100m"),
			Max: quantities("cpu", "1"), Min: quantities("cpu", "50m"), MaxLimitRequestRatio: quantities("cpu", "10")},
		{Type: corev1.LimitTypePersistentVolumeClaim, Max: quantities("storage", "2Gi")},
	}}}
	l := LimitRanger{List: func(context.Context, string) ([]*corev1.LimitRange, error) { return []*corev1.LimitRange{lr}, nil }}
	ctx := context.Background()

	p := newPod()
	a := podCreate(p)
	if err := l.Admit(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Validate(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0].Resources
	if r, lim := c.Requests[corev1.ResourceCPU], c.Limits[corev1.ResourceCPU]; r.String() != "100m" || lim.String() != "500m" {
		t.Errorf("defaults: requests %v limits %v", c.Requests, c.Limits)
	}
	if got := p.Annotations[LimitRangerAnnotation]; !strings.HasPrefix(got, "LimitRanger plugin set: cpu request for container a; cpu limit for container a;") ||
		!strings.Contains(got, "cpu request for init container init") {
		t.Errorf("annotation %q", got)
	}

	for _, tc := range []struct {
		name     string
		req, lim corev1.ResourceList
		want     string
	}{
		{"over max", quantities("cpu", "100m"), quantities("cpu", "2"), "maximum cpu usage per Container is 1, but limit is 2"},
		{"under min", quantities("cpu", "10m"), quantities("cpu", "50m"), "minimum cpu usage per Container is 50m, but request is 10m"},
		{"ratio", quantities("cpu", "60m"), quantities("cpu", "1"), "cpu max limit to request ratio per Container is 10, but provided ratio is 16.666667"},
	} {
		p := newPod()
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].Resources = corev1.ResourceRequirements{Requests: tc.req, Limits: tc.lim}
		}
		p.Spec.InitContainers = nil
		err := l.Validate(ctx, podCreate(p), nil)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want Forbidden with %q", tc.name, err, tc.want)
		}
	}

	gvk, gvr := corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	big := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: quantities("storage", "5Gi")}}}
	if err := l.Validate(ctx, attrs(big, gvk, "default", "big", gvr, "", "CREATE"), nil); err == nil ||
		!strings.Contains(err.Error(), "maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi") {
		t.Errorf("claim over max: %v", err)
	}
}
