package allocator

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func repairSvc(name string, ips ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.ServiceSpec{ClusterIPs: ips}}
	if len(ips) > 0 {
		s.Spec.ClusterIP = ips[0]
	}
	return s
}

func repairAddr(ip, svcName string) *networkingv1.IPAddress {
	namespace := "default"
	if svcName == "" {
		namespace = ""
	}
	a := NewIPAddress(mustAddr(ip), namespace, svcName)
	a.UID = types.UID("uid-" + ip)
	return a
}

// byHand is an IPAddress a user made: another parent, no managed-by label.
func byHand(ip string) *networkingv1.IPAddress {
	return &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: ip},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Group: "mygroup", Resource: "myresources", Namespace: "foo", Name: "bar"}}}
}

func names(addrs []*networkingv1.IPAddress) string {
	var out []string
	for _, a := range addrs {
		out = append(out, a.Name+"<"+a.Spec.ParentRef.Namespace+"/"+a.Spec.ParentRef.Name)
	}
	return strings.Join(out, " ")
}

func suspectList(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func TestPlanRepair(t *testing.T) {
	r, err := NewIPRange("10.96.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		services []*corev1.Service
		addrs    []*networkingv1.IPAddress
		legacy   []string
		suspects map[string]bool
		// want: created, deleted, legacy deleted, conflicts, suspects
		create, del, delLegacy, conflicts, nextSuspects string
	}{
		{name: "in step: nothing to do",
			services: []*corev1.Service{repairSvc("kubernetes", "10.96.0.1"), repairSvc("web", "10.96.0.20")},
			addrs:    []*networkingv1.IPAddress{repairAddr("10.96.0.1", "kubernetes"), repairAddr("10.96.0.20", "web")}},
		{name: "a Service from before IPAddresses: its IPAddress is made and its legacy key goes in the same pass",
			services: []*corev1.Service{repairSvc("old", "10.96.0.30")}, legacy: []string{"10.96.0.30"},
			create: "10.96.0.30<default/old", delLegacy: "10.96.0.30"},
		{name: "a legacy key whose IPAddress exists already goes",
			services: []*corev1.Service{repairSvc("web", "10.96.0.20")}, addrs: []*networkingv1.IPAddress{repairAddr("10.96.0.20", "web")},
			legacy: []string{"10.96.0.20"}, delLegacy: "10.96.0.20"},
		{name: "headless, ExternalName and out-of-range ClusterIPs need none",
			services: []*corev1.Service{repairSvc("headless", "None"), repairSvc("external"), repairSvc("elsewhere", "10.97.0.5")}},
		{name: "every address of a dual-stack Service in range",
			services: []*corev1.Service{repairSvc("dual", "10.96.0.40", "fd00::40")},
			create:   "10.96.0.40<default/dual"},
		{name: "an orphaned IPAddress of the allocator's is suspected first (a Service may be on its way)",
			addrs: []*networkingv1.IPAddress{repairAddr("10.96.0.50", "gone")}, nextSuspects: "10.96.0.50"},
		{name: "and deleted when still orphaned in the next pass",
			addrs: []*networkingv1.IPAddress{repairAddr("10.96.0.50", "gone")}, suspects: map[string]bool{"10.96.0.50": true},
			del: "10.96.0.50<default/gone"},
		{name: "a suspect that found its Service is kept",
			services: []*corev1.Service{repairSvc("late", "10.96.0.50")},
			addrs:    []*networkingv1.IPAddress{repairAddr("10.96.0.50", "late")}, suspects: map[string]bool{"10.96.0.50": true}},
		{name: "an IPAddress whose Service now holds another address is an orphan too",
			services: []*corev1.Service{repairSvc("moved", "10.96.0.61")},
			addrs:    []*networkingv1.IPAddress{repairAddr("10.96.0.60", "moved"), repairAddr("10.96.0.61", "moved")},
			suspects: map[string]bool{"10.96.0.60": true}, del: "10.96.0.60<default/moved"},
		{name: "an IPAddress made by hand stays, and a Service holding its address is a conflict",
			services: []*corev1.Service{repairSvc("clash", "10.96.0.70")}, addrs: []*networkingv1.IPAddress{byHand("10.96.0.70"), byHand("10.96.0.71")},
			suspects:  map[string]bool{"10.96.0.71": true},
			conflicts: "ClusterIP 10.96.0.70 of Service default/clash is held by IPAddress 10.96.0.70 of myresources.mygroup foo/bar"},
		{name: "a legacy key no Service holds is suspected, then removed",
			legacy: []string{"10.96.0.80", "10.96.0.81"}, suspects: map[string]bool{"legacy:10.96.0.81": true},
			delLegacy: "10.96.0.81", nextSuspects: "legacy:10.96.0.80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanRepair(tc.services, tc.addrs, tc.legacy, []Range{r}, tc.suspects)
			got := fmt.Sprintf("create=[%s] delete=[%s] legacy=[%s] conflicts=[%s] suspects=[%s]",
				names(p.Create), names(p.Delete), strings.Join(p.DeleteLegacy, " "), strings.Join(p.Conflicts, "; "), suspectList(p.Suspects))
			want := fmt.Sprintf("create=[%s] delete=[%s] legacy=[%s] conflicts=[%s] suspects=[%s]",
				tc.create, tc.del, tc.delLegacy, tc.conflicts, tc.nextSuspects)
			if got != want {
				t.Errorf("\ngot  %s\nwant %s", got, want)
			}
		})
	}
}

func TestNewIPAddress(t *testing.T) {
	a := NewIPAddress(mustAddr("fd00::a"), "ns", "svc")
	if a.Name != "fd00::a" || a.Labels[networkingv1.LabelIPAddressFamily] != "IPv6" || a.Labels[networkingv1.LabelManagedBy] != "ipallocator.k8s.io" ||
		*a.Spec.ParentRef != (networkingv1.ParentReference{Resource: "services", Namespace: "ns", Name: "svc"}) {
		t.Errorf("%+v", a)
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
