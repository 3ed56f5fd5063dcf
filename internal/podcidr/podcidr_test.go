package podcidr

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestAll(t *testing.T) {
	for _, c := range []struct {
		spec corev1.NodeSpec
		want []string
	}{
		{corev1.NodeSpec{}, nil},
		{corev1.NodeSpec{PodCIDR: "10.244.1.0/24"}, []string{"10.244.1.0/24"}},
		{corev1.NodeSpec{PodCIDR: "fd00:10:244:1::/64", PodCIDRs: []string{"fd00:10:244:1::/64", "10.244.1.0/24"}}, []string{"fd00:10:244:1::/64", "10.244.1.0/24"}},
		{corev1.NodeSpec{PodCIDR: "10.244.2.0/24", PodCIDRs: []string{"10.244.2.0/24", "fd00:10:244:2::/64"}}, []string{"10.244.2.0/24", "fd00:10:244:2::/64"}},
	} {
		if got := All(&corev1.Node{Spec: c.spec}); !slices.Equal(got, c.want) {
			t.Errorf("All(%+v) = %q, want %q", c.spec, got, c.want)
		}
	}
}
