package validation

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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

func TestNetworkPolicyPortsAndBlocks(t *testing.T) {
	mk := func(p networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: networkingv1.NetworkPolicySpec{
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: peers, Ports: []networkingv1.NetworkPolicyPort{p}}}}}
	}
	end := func(v int32) *int32 { return &v }
	num, named := intstr.FromInt32(80), intstr.FromString("serve-80")
	for _, tc := range []struct {
		name string
		np   *networkingv1.NetworkPolicy
		want string
	}{
		{"endPort without port", mk(networkingv1.NetworkPolicyPort{EndPort: end(20000)}), "must be specified when endPort is specified"},
		{"endPort with a named port", mk(networkingv1.NetworkPolicyPort{Port: &named, EndPort: end(20000)}), "may not be specified when `port` is non-numeric"},
		{"endPort below port", mk(networkingv1.NetworkPolicyPort{Port: &num, EndPort: end(79)}), "must be greater than or equal to `port`"},
		{"endPort range", mk(networkingv1.NetworkPolicyPort{Port: &num, EndPort: end(90)}), ""},
		{"bad port name", mk(networkingv1.NetworkPolicyPort{Port: ptrTo(intstr.FromString("Not_A_Name"))}), "spec.egress[0].ports[0].port"},
		{"empty peer", mk(networkingv1.NetworkPolicyPort{Port: &num}, networkingv1.NetworkPolicyPeer{}), "must specify a peer"},
		{"bad cidr", mk(networkingv1.NetworkPolicyPort{Port: &num}, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}), "must be a valid CIDR"},
		{"except outside", mk(networkingv1.NetworkPolicyPort{Port: &num}, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.1.0.0/24"}}}), "must be a strict subset of `cidr`"},
		{"except equal", mk(networkingv1.NetworkPolicyPort{Port: &num}, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.0.0/16"}}}), "must be a strict subset of `cidr`"},
		{"except inside", mk(networkingv1.NetworkPolicyPort{Port: &num}, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.1.0/24"}}}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := NetworkPolicy(tc.np).ToAggregate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("errors %v, want %q", err, tc.want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestIPAddress(t *testing.T) {
	ref := func() *networkingv1.ParentReference {
		return &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}
	}
	ip := func(name string, r *networkingv1.ParentReference) *networkingv1.IPAddress {
		return &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IPAddressSpec{ParentRef: r}}
	}
	for _, tc := range []struct {
		name string
		in   *networkingv1.IPAddress
		want string // a fragment of the error; empty means valid
	}{
		{"a Service's address", ip("10.96.0.10", ref()), ""},
		{"IPv6, any group, cluster-scoped parent, broadcast", ip("255.255.255.255", &networkingv1.ParentReference{Group: "mygroup", Resource: "myresources", Name: "bar"}), ""},
		{"link-local IPv6", ip("fe80::42:1dff:fe84:f9e2", ref()), ""},
		{"not an address", ip("web", ref()), "must be a valid IP address"},
		{"not canonical", ip("10.096.0.10", ref()), "metadata.name"},
		{"IPv6 not canonical", ip("FD00::0:1", ref()), `must be in canonical form ("fd00::1")`},
		{"no parent", ip("10.96.0.10", nil), "spec.parentRef: Required value"},
		{"no resource", ip("10.96.0.10", &networkingv1.ParentReference{Name: "x"}), "spec.parentRef.resource: Required value"},
		{"no name", ip("10.96.0.10", &networkingv1.ParentReference{Resource: "services"}), "spec.parentRef.name: Required value"},
		{"a name with a slash", ip("10.96.0.10", &networkingv1.ParentReference{Resource: "services", Name: "a/b"}), "spec.parentRef.name: Invalid value"},
		{"a bad group", ip("10.96.0.10", &networkingv1.ParentReference{Group: "Bad_Group", Resource: "services", Name: "x"}), "spec.parentRef.group: Invalid value"},
	} {
		errs := IPAddress(tc.in)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: unexpected errors %v", tc.name, errs)
		case tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want):
			t.Errorf("%s: errors %v, want one with %q", tc.name, errs, tc.want)
		}
	}
	old := ip("10.96.0.10", ref())
	old.ResourceVersion = "1"
	upd := old.DeepCopy()
	upd.Annotations = map[string]string{"updated": "true"}
	if errs := IPAddressUpdate(upd, old); len(errs) > 0 {
		t.Errorf("annotating: %v", errs)
	}
	upd.Spec.ParentRef.Name = "other"
	if errs := IPAddressUpdate(upd, old); !strings.Contains(errs.ToAggregate().Error(), "spec.parentRef: Invalid value") {
		t.Errorf("changing the parent: %v, want it immutable", errs)
	}
	upd.Spec.ParentRef = nil
	if errs := IPAddressUpdate(upd, old); len(errs) == 0 {
		t.Error("removing the parent was accepted")
	}
}
