package servicefamily

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

const (
	v4 = corev1.IPv4Protocol
	v6 = corev1.IPv6Protocol
)

var (
	single = corev1.IPFamilyPolicySingleStack
	prefer = corev1.IPFamilyPolicyPreferDualStack
	requir = corev1.IPFamilyPolicyRequireDualStack

	clusterV4   = Cluster{v4}
	clusterV6   = Cluster{v6}
	clusterDual = Cluster{v4, v6}
	clusterV6V4 = Cluster{v6, v4}
)

// svc is a ClusterIP Service with a selector; ips set clusterIP and clusterIPs.
func svc(policy *corev1.IPFamilyPolicy, families []corev1.IPFamily, ips ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": "a"},
			IPFamilyPolicy: policy, IPFamilies: families, ClusterIPs: ips}}
	if len(ips) > 0 {
		s.Spec.ClusterIP = ips[0]
	}
	return s
}

func headlessSvc(policy *corev1.IPFamilyPolicy, families []corev1.IPFamily, selector bool) *corev1.Service {
	s := svc(policy, families, corev1.ClusterIPNone)
	if !selector {
		s.Spec.Selector = nil
	}
	return s
}

// errText is errs as "field: detail" lines, for comparing with upstream's messages.
func errText(errs field.ErrorList) string {
	var lines []string
	for _, e := range errs {
		detail := e.Detail
		if detail == "" {
			detail = e.ErrorBody()
		}
		lines = append(lines, e.Field+": "+detail)
	}
	return strings.Join(lines, "\n")
}

func show(s *corev1.Service) string {
	p := "<nil>"
	if s.Spec.IPFamilyPolicy != nil {
		p = string(*s.Spec.IPFamilyPolicy)
	}
	return fmt.Sprintf("%s %v %v", p, s.Spec.IPFamilies, s.Spec.ClusterIPs)
}

func TestDecideOnCreate(t *testing.T) {
	cases := []struct {
		name    string
		cluster Cluster
		svc     *corev1.Service
		want    string // policy, families and cluster IPs after Decide
		err     string // or the errors, as "field: detail" lines
	}{
		{"nothing asked, IPv4 cluster", clusterV4, svc(nil, nil), "SingleStack [IPv4] []", ""},
		{"nothing asked, IPv6 cluster", clusterV6, svc(nil, nil), "SingleStack [IPv6] []", ""},
		{"nothing asked, dual cluster", clusterDual, svc(nil, nil), "SingleStack [IPv4] []", ""},
		{"nothing asked, IPv6-first dual cluster", clusterV6V4, svc(nil, nil), "SingleStack [IPv6] []", ""},
		{"PreferDualStack on a single-stack cluster", clusterV4, svc(&prefer, nil), "PreferDualStack [IPv4] []", ""},
		{"PreferDualStack on a dual cluster", clusterDual, svc(&prefer, nil), "PreferDualStack [IPv4 IPv6] []", ""},
		{"PreferDualStack on an IPv6-first cluster", clusterV6V4, svc(&prefer, nil), "PreferDualStack [IPv6 IPv4] []", ""},
		{"RequireDualStack on a dual cluster", clusterDual, svc(&requir, nil), "RequireDualStack [IPv4 IPv6] []", ""},
		{"RequireDualStack IPv6 first", clusterDual, svc(&requir, []corev1.IPFamily{v6}), "RequireDualStack [IPv6 IPv4] []", ""},
		{"RequireDualStack on a single-stack cluster", clusterV4, svc(&requir, nil), "",
			"spec.ipFamilyPolicy: this cluster is not configured for dual-stack services"},
		{"a family the cluster lacks", clusterV4, svc(nil, []corev1.IPFamily{v6}), "", "spec.ipFamilies[0]: not configured on this cluster"},
		{"an address of a family the cluster lacks", clusterV4, svc(nil, nil, "fd00::10"), "", "spec.clusterIPs[0]: IPv6 is not configured on this cluster"},
		{"the family follows the address", clusterDual, svc(nil, nil, "fd00::10"), "SingleStack [IPv6] [fd00::10]", ""},
		{"two addresses need a dual policy", clusterDual, svc(nil, nil, "10.96.0.10", "fd00::10"), "",
			"spec.ipFamilyPolicy: must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"},
		{"two families need a dual policy", clusterDual, svc(&single, []corev1.IPFamily{v4, v6}), "",
			"spec.ipFamilyPolicy: must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"},
		{"two addresses, dual policy", clusterDual, svc(&requir, nil, "10.96.0.10", "fd00::10"),
			"RequireDualStack [IPv4 IPv6] [10.96.0.10 fd00::10]", ""},
		{"an address against its family", clusterDual, svc(&requir, []corev1.IPFamily{v6, v4}, "10.96.0.10"), "",
			"spec.clusterIPs[0]: expected an IPv6 value as indicated by `ipFamilies[0]`"},
		{"two addresses of one family", clusterDual, svc(&requir, nil, "10.96.0.10", "10.96.0.11"), "",
			"spec.clusterIPs: may specify no more than one IP for each IP family"},
		{"duplicate families", clusterDual, svc(&requir, []corev1.IPFamily{v4, v4}), "", "spec.ipFamilies[1]: Duplicate value: \"IPv4\""},
		{"an unknown family", clusterDual, svc(nil, []corev1.IPFamily{"IPv5"}), "",
			"spec.ipFamilies[0]: supported values: \"IPv4\", \"IPv6\""},
		{"an unknown policy", clusterDual, svc(ptr.To(corev1.IPFamilyPolicy("Both")), nil), "",
			"spec.ipFamilyPolicy: supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\""},
		{"headless with a selector: like any", clusterDual, headlessSvc(nil, nil, true), "SingleStack [IPv4] [None]", ""},
		{"headless without a selector is dual by default", clusterDual, headlessSvc(nil, nil, false), "RequireDualStack [IPv4 IPv6] [None]", ""},
		{"headless without a selector, even on a single-stack cluster", clusterV4, headlessSvc(nil, nil, false),
			"RequireDualStack [IPv4 IPv6] [None]", ""},
		{"headless without a selector, SingleStack", clusterV6, headlessSvc(&single, nil, false), "SingleStack [IPv6] [None]", ""},
		{"None and an address", clusterDual, svc(&requir, nil, "None", "fd00::1"), "", "spec.clusterIPs: 'None' must be the first and only value"},
		{"not an address", clusterDual, svc(nil, nil, "10.96.0.300"), "",
			"spec.clusterIPs[0]: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.svc.DeepCopy()
			errs := Decide(s, nil, c.cluster)
			if got := errText(errs); got != c.err {
				t.Fatalf("errors:\n%s\nwant:\n%s", got, c.err)
			}
			if c.err == "" && show(s) != c.want {
				t.Fatalf("got %s, want %s", show(s), c.want)
			}
		})
	}
}

func TestDecideOnUpdate(t *testing.T) {
	dual := svc(&requir, []corev1.IPFamily{v4, v6}, "10.96.0.10", "fd00::10")
	preferDual := svc(&prefer, []corev1.IPFamily{v4, v6}, "10.96.0.10", "fd00::10")
	preferSingle := svc(&prefer, []corev1.IPFamily{v4}, "10.96.0.10")
	singleV4 := svc(&single, []corev1.IPFamily{v4}, "10.96.0.10")
	cases := []struct {
		name     string
		cluster  Cluster
		old, svc *corev1.Service
		want     string
		err      string
	}{
		{"no policy keeps the stored one", clusterDual, dual, svc(nil, []corev1.IPFamily{v4, v6}, "10.96.0.10", "fd00::10"),
			"RequireDualStack [IPv4 IPv6] [10.96.0.10 fd00::10]", ""},
		{"SingleStack releases the secondary", clusterDual, dual, svc(&single, []corev1.IPFamily{v4, v6}, "10.96.0.10", "fd00::10"),
			"SingleStack [IPv4] [10.96.0.10]", ""},
		{"dropping the secondary without SingleStack", clusterDual, dual, svc(&requir, []corev1.IPFamily{v4}, "10.96.0.10"), "",
			"spec.ipFamilyPolicy: must be 'SingleStack' to release the secondary cluster IP\nspec.ipFamilyPolicy: must be 'SingleStack' to release the secondary IP family"},
		{"upgrading to RequireDualStack adds the other family", clusterDual, singleV4, svc(&requir, []corev1.IPFamily{v4}, "10.96.0.10"),
			"RequireDualStack [IPv4 IPv6] [10.96.0.10]", ""},
		{"PreferDualStack stays single after the cluster turned dual", clusterDual, preferSingle, preferSingle.DeepCopy(),
			"PreferDualStack [IPv4] [10.96.0.10]", ""},
		{"PreferDualStack stays dual after the cluster turned single", clusterV4, preferDual, svc(nil, []corev1.IPFamily{v4, v6}, "10.96.0.10", "fd00::10"),
			"PreferDualStack [IPv4 IPv6] [10.96.0.10 fd00::10]", ""},
		{"RequireDualStack on a cluster turned single", clusterV4, dual, dual.DeepCopy(), "",
			"spec.ipFamilyPolicy: this cluster is not configured for dual-stack services\nspec.ipFamilies[1]: not configured on this cluster"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.svc.DeepCopy()
			errs := Decide(s, c.old, c.cluster)
			if got := errText(errs); got != c.err {
				t.Fatalf("errors:\n%s\nwant:\n%s", got, c.err)
			}
			if c.err == "" && show(s) != c.want {
				t.Fatalf("got %s, want %s", show(s), c.want)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	dual := svc(&requir, []corev1.IPFamily{v4, v6}, "10.96.0.10", "fd00::10")
	cases := []struct {
		name     string
		old, svc *corev1.Service
		err      string
	}{
		{"unchanged", dual, dual.DeepCopy(), ""},
		{"primary changed", dual, svc(&requir, []corev1.IPFamily{v4, v6}, "10.96.0.11", "fd00::10"), "spec.clusterIPs[0]: may not change once set"},
		{"secondary changed", dual, svc(&requir, []corev1.IPFamily{v4, v6}, "10.96.0.10", "fd00::11"), "spec.clusterIPs[1]: may not change once set"},
		{"secondary released with SingleStack", dual, svc(&single, []corev1.IPFamily{v4}, "10.96.0.10"), ""},
		{"secondary released without", dual, svc(&prefer, []corev1.IPFamily{v4}, "10.96.0.10"),
			"spec.ipFamilyPolicy: must be set to 'SingleStack' when releasing the secondary clusterIP\nspec.ipFamilyPolicy: must be set to 'SingleStack' when releasing the secondary ipFamily"},
		{"families swapped", dual, svc(&requir, []corev1.IPFamily{v6, v4}, "10.96.0.10", "fd00::10"),
			"spec.ipFamilies[0]: may not change once set\nspec.ipFamilies[0]: may not change once set"},
		{"secondary added", svc(&single, []corev1.IPFamily{v4}, "10.96.0.10"), dual.DeepCopy(), ""},
		{"headless may change families", headlessSvc(&single, []corev1.IPFamily{v4}, true), headlessSvc(&single, []corev1.IPFamily{v6}, true), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := errText(ValidateUpdate(c.svc, c.old)); got != c.err {
				t.Fatalf("errors:\n%s\nwant:\n%s", got, c.err)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	s := svc(&requir, []corev1.IPFamily{v4, v6}, "10.96.0.10")
	if got := Missing(s); !slices.Equal(got, []corev1.IPFamily{v6}) {
		t.Errorf("Missing = %v, want [IPv6]", got)
	}
	if got := Missing(headlessSvc(nil, []corev1.IPFamily{v4, v6}, false)); got != nil {
		t.Errorf("a headless Service misses %v", got)
	}
}

func TestClusterOf(t *testing.T) {
	c := ClusterOf([]netip.Prefix{netip.MustParsePrefix("fd00:10:96::/108"), netip.MustParsePrefix("10.96.0.0/12")})
	if !slices.Equal(c, Cluster{v6, v4}) || c.Primary() != v6 || !c.DualStack() {
		t.Errorf("ClusterOf = %v", c)
	}
}

// TestDecideProperties: over random Services, clusters and stored Services, Decide never
// panics, and whenever it accepts, what it leaves is consistent — a policy, one or two
// distinct families each with a matching address where one is given, families the cluster
// serves (a selectorless headless Service excepted), exactly one for SingleStack, two for
// RequireDualStack, and two for PreferDualStack on a dual-stack cluster at create.
func TestDecideProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	clusters := []Cluster{clusterV4, clusterV6, clusterDual, clusterV6V4}
	policies := []*corev1.IPFamilyPolicy{nil, &single, &prefer, &requir}
	familyLists := [][]corev1.IPFamily{nil, {v4}, {v6}, {v4, v6}, {v6, v4}}
	ipLists := [][]string{nil, {"10.96.0.10"}, {"fd00::10"}, {"10.96.0.10", "fd00::10"}, {"fd00::10", "10.96.0.10"}, {"None"}}
	pick := func() *corev1.Service {
		s := svc(policies[r.IntN(len(policies))], slices.Clone(familyLists[r.IntN(len(familyLists))]), slices.Clone(ipLists[r.IntN(len(ipLists))])...)
		if r.IntN(4) == 0 {
			s.Spec.Selector = nil
		}
		return s
	}
	accepted := 0
	for range 20000 {
		c := clusters[r.IntN(len(clusters))]
		s := pick()
		var old *corev1.Service
		if r.IntN(2) == 0 {
			old = pick()
			if errs := Decide(old, nil, c); len(errs) > 0 {
				old = nil
			}
		}
		in := show(s)
		if errs := Decide(s, old, c); len(errs) > 0 {
			continue
		}
		accepted++
		spec := s.Spec
		fail := func(why string) { t.Fatalf("%s: %s -> %s on %v (old %v)", why, in, show(s), c, old != nil) }
		if spec.IPFamilyPolicy == nil {
			fail("no policy")
		}
		if n := len(spec.IPFamilies); n == 0 || n > 2 || (n == 2 && spec.IPFamilies[0] == spec.IPFamilies[1]) {
			fail("families")
		}
		selectorless := spec.ClusterIP == corev1.ClusterIPNone && len(spec.Selector) == 0
		for i, f := range spec.IPFamilies {
			if !c.Serves(f) && !selectorless && !(old != nil && *spec.IPFamilyPolicy == prefer) {
				fail("a family the cluster does not serve")
			}
			if i < len(spec.ClusterIPs) && spec.ClusterIPs[i] != corev1.ClusterIPNone && familyOf(spec.ClusterIPs[i]) != f {
				fail("an address of another family")
			}
		}
		switch *spec.IPFamilyPolicy {
		case single:
			if len(spec.IPFamilies) != 1 {
				fail("SingleStack with two families")
			}
		case requir:
			if len(spec.IPFamilies) != 2 {
				fail("RequireDualStack with one family")
			}
		case prefer:
			if old == nil && c.DualStack() && len(spec.IPFamilies) != 2 {
				fail("PreferDualStack single on a dual-stack cluster")
			}
		}
	}
	if accepted < 1000 {
		t.Fatalf("only %d of 20000 random Services accepted: the generator is not exercising Decide", accepted)
	}
}

// FuzzDecide feeds Decide and the validators arbitrary policies, families and addresses (a
// Service body is client input): they never panic, and what Decide accepts has a policy and
// one or two distinct families of the allowed names.
func FuzzDecide(f *testing.F) {
	f.Add("RequireDualStack", "IPv6,IPv4", "fd00::1,10.96.0.1", uint8(2), true)
	f.Add("", "", "None", uint8(0), false)
	f.Add("SingleStack", "IPv4", "10.96.0.300", uint8(1), true)
	f.Add("PreferDualStack", "IPv4,IPv4", ",", uint8(3), true)
	f.Fuzz(func(t *testing.T, policy, families, ips string, cluster uint8, selector bool) {
		var s corev1.Service
		s.Spec.Type = corev1.ServiceTypeClusterIP
		if policy != "" {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicy(policy))
		}
		if families != "" {
			for _, f := range strings.Split(families, ",") {
				s.Spec.IPFamilies = append(s.Spec.IPFamilies, corev1.IPFamily(f))
			}
		}
		if ips != "" {
			s.Spec.ClusterIPs = strings.Split(ips, ",")
			s.Spec.ClusterIP = s.Spec.ClusterIPs[0]
		}
		if selector {
			s.Spec.Selector = map[string]string{"app": "a"}
		}
		c := []Cluster{clusterV4, clusterV6, clusterDual, clusterV6V4}[int(cluster)%4]
		old := s.DeepCopy()
		_ = Validate(&s)
		_ = ValidateUpdate(&s, old)
		_ = Missing(&s)
		if errs := Decide(&s, nil, c); len(errs) > 0 {
			return
		}
		if s.Spec.IPFamilyPolicy == nil {
			t.Fatal("accepted without a policy")
		}
		n := len(s.Spec.IPFamilies)
		if n == 0 || n > 2 || (n == 2 && s.Spec.IPFamilies[0] == s.Spec.IPFamilies[1]) {
			t.Fatalf("accepted families %v", s.Spec.IPFamilies)
		}
		for _, f := range s.Spec.IPFamilies {
			if f != v4 && f != v6 {
				t.Fatalf("accepted family %q", f)
			}
		}
		_ = Missing(&s)
	})
}
