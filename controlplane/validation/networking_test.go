package validation

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestServiceCIDR(t *testing.T) {
	sc := func(name string, cidrs ...string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	}
	for _, tc := range []struct {
		name string
		in   *networkingv1.ServiceCIDR
		want string // a fragment of the error; empty means valid
	}{
		{"the default", sc("kubernetes", "10.96.0.0/12"), ""},
		{"dual-stack default", sc("kubernetes", "10.96.0.0/12", "fd00:10:96::/112"), ""},
		{"another ServiceCIDR is refused with the reason", sc("extra", "10.100.0.0/16"), "more ServiceCIDRs are not supported"},
		{"no CIDR", sc("kubernetes"), "must hold one or two CIDRs"},
		{"three CIDRs", sc("kubernetes", "10.96.0.0/12", "fd00::/112", "10.128.0.0/16"), "must hold one or two CIDRs"},
		{"not a CIDR", sc("kubernetes", "10.96.0.0"), "must be a CIDR"},
		{"host bits", sc("kubernetes", "10.96.0.1/12"), "must have no host bits set (10.96.0.0/12)"},
		{"two of a family", sc("kubernetes", "10.96.0.0/12", "10.128.0.0/16"), "one CIDR per IP family"},
	} {
		errs := ServiceCIDR(tc.in)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: unexpected errors %v", tc.name, errs)
		case tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want):
			t.Errorf("%s: errors %v, want one with %q", tc.name, errs, tc.want)
		}
	}
	old := sc("kubernetes", "10.96.0.0/12")
	old.ResourceVersion = "1"
	upd := old.DeepCopy()
	upd.Labels = map[string]string{"a": "b"}
	if errs := ServiceCIDRUpdate(upd, old); len(errs) > 0 {
		t.Errorf("a label change: %v", errs)
	}
	upd.Spec.CIDRs = []string{"10.100.0.0/16"}
	if errs := ServiceCIDRUpdate(upd, old); !strings.Contains(errs.ToAggregate().Error(), "field is immutable") {
		t.Errorf("a CIDR change: %v", errs)
	}
}
