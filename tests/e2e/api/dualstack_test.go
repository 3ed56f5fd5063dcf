package api

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

func dualSvc(name string, policy *corev1.IPFamilyPolicy, families ...corev1.IPFamily) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, IPFamilyPolicy: policy, IPFamilies: families,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
}

// TestDualStackServices runs a server with an IPv4 and an IPv6 service CIDR and checks what
// upstream's API server gives Services there: families by ipFamilyPolicy, ClusterIPs from both
// ranges (with an IPAddress each), an upgrade to and a downgrade from dual-stack that
// allocate and release the secondary address, and upstream's refusals.
func TestDualStackServices(t *testing.T) {
	s := framework.StartServer(t, "--service-cidr", "10.96.0.0/16,fd00:10:96::/108", "--cluster-cidr", "fd00:10:244::/56,10.244.0.0/16")
	client := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svcs := client.CoreV1().Services("default")
	families := func(svc *corev1.Service) string {
		var out []string
		for _, f := range svc.Spec.IPFamilies {
			out = append(out, string(f))
		}
		return strings.Join(out, ",")
	}
	inRange := func(t *testing.T, ip, cidr string) {
		t.Helper()
		if a, err := netip.ParseAddr(ip); err != nil || !netip.MustParsePrefix(cidr).Contains(a) {
			t.Errorf("ClusterIP %q is not in %s", ip, cidr)
		}
	}
	hasIPAddress := func(t *testing.T, ip string, want bool) {
		t.Helper()
		_, err := client.NetworkingV1().IPAddresses().Get(ctx, ip, metav1.GetOptions{})
		if want && err != nil {
			t.Errorf("IPAddress %s: %v", ip, err)
		}
		if !want && !apierrors.IsNotFound(err) {
			t.Errorf("IPAddress %s after its release: %v, want NotFound", ip, err)
		}
	}

	t.Run("a node gets a pod CIDR per family, in --cluster-cidr's order", func(t *testing.T) {
		if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dual"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var n *corev1.Node
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			n, err = client.CoreV1().Nodes().Get(ctx, "dual", metav1.GetOptions{})
			return err == nil && len(n.Spec.PodCIDRs) == 2, nil
		})
		if err != nil {
			t.Fatalf("node IPAM: %v %+v", err, n)
		}
		if n.Spec.PodCIDR != n.Spec.PodCIDRs[0] {
			t.Errorf("podCIDR %s is not podCIDRs[0] %v", n.Spec.PodCIDR, n.Spec.PodCIDRs)
		}
		for i, want := range []string{"fd00:10:244::/56 64", "10.244.0.0/16 24"} {
			cluster, bits, _ := strings.Cut(want, " ")
			p, err := netip.ParsePrefix(n.Spec.PodCIDRs[i])
			if err != nil || !netip.MustParsePrefix(cluster).Contains(p.Addr()) || fmt.Sprint(p.Bits()) != bits {
				t.Errorf("podCIDRs[%d] = %s, want a /%s of %s", i, n.Spec.PodCIDRs[i], bits, cluster)
			}
		}
	})

	t.Run("the default ServiceCIDR lists both ranges", func(t *testing.T) {
		sc, err := client.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil || strings.Join(sc.Spec.CIDRs, ",") != "10.96.0.0/16,fd00:10:96::/108" {
			t.Fatalf("ServiceCIDR kubernetes: %v %v", err, sc)
		}
	})

	t.Run("SingleStack by default, in the primary family", func(t *testing.T) {
		got, err := svcs.Create(ctx, dualSvc("single", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *got.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack || families(got) != "IPv4" || len(got.Spec.ClusterIPs) != 1 {
			t.Fatalf("got %v %v %v", *got.Spec.IPFamilyPolicy, got.Spec.IPFamilies, got.Spec.ClusterIPs)
		}
		inRange(t, got.Spec.ClusterIP, "10.96.0.0/16")
	})

	t.Run("an IPv6-only Service", func(t *testing.T) {
		got, err := svcs.Create(ctx, dualSvc("six", nil, corev1.IPv6Protocol), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if families(got) != "IPv6" || len(got.Spec.ClusterIPs) != 1 {
			t.Fatalf("got %v %v", got.Spec.IPFamilies, got.Spec.ClusterIPs)
		}
		inRange(t, got.Spec.ClusterIP, "fd00:10:96::/108")
		hasIPAddress(t, got.Spec.ClusterIP, true)
	})

	t.Run("RequireDualStack gets an address in each family, IPv6 first when asked", func(t *testing.T) {
		got, err := svcs.Create(ctx, dualSvc("both", ptr.To(corev1.IPFamilyPolicyRequireDualStack), corev1.IPv6Protocol), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if families(got) != "IPv6,IPv4" || len(got.Spec.ClusterIPs) != 2 || got.Spec.ClusterIP != got.Spec.ClusterIPs[0] {
			t.Fatalf("got %v %v", got.Spec.IPFamilies, got.Spec.ClusterIPs)
		}
		inRange(t, got.Spec.ClusterIPs[0], "fd00:10:96::/108")
		inRange(t, got.Spec.ClusterIPs[1], "10.96.0.0/16")
		for _, ip := range got.Spec.ClusterIPs {
			hasIPAddress(t, ip, true)
		}
	})

	t.Run("upgrade to dual-stack and back", func(t *testing.T) {
		got, err := svcs.Create(ctx, dualSvc("grow", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		primary := got.Spec.ClusterIP
		got.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
		if got, err = svcs.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.ClusterIPs) != 2 || got.Spec.ClusterIPs[0] != primary || families(got) != "IPv4,IPv6" {
			t.Fatalf("upgraded: %v %v", got.Spec.IPFamilies, got.Spec.ClusterIPs)
		}
		secondary := got.Spec.ClusterIPs[1]
		hasIPAddress(t, secondary, true)
		// Dropping the secondary without saying SingleStack is refused, as upstream.
		bad := got.DeepCopy()
		bad.Spec.ClusterIPs, bad.Spec.IPFamilies = bad.Spec.ClusterIPs[:1], bad.Spec.IPFamilies[:1]
		if _, err := svcs.Update(ctx, bad, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "must be 'SingleStack' to release the secondary") {
			t.Fatalf("releasing the secondary under PreferDualStack: %v", err)
		}
		got.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		if got, err = svcs.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.ClusterIPs) != 1 || got.Spec.ClusterIPs[0] != primary || families(got) != "IPv4" {
			t.Fatalf("downgraded: %v %v", got.Spec.IPFamilies, got.Spec.ClusterIPs)
		}
		hasIPAddress(t, secondary, false)
	})

	t.Run("deleting a dual-stack Service releases both addresses", func(t *testing.T) {
		got, err := svcs.Create(ctx, dualSvc("gone", ptr.To(corev1.IPFamilyPolicyRequireDualStack)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := svcs.Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, ip := range got.Spec.ClusterIPs {
			hasIPAddress(t, ip, false)
		}
	})

	t.Run("an address of each family, asked for", func(t *testing.T) {
		svc := dualSvc("pinned", ptr.To(corev1.IPFamilyPolicyRequireDualStack))
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.96.0.200", []string{"10.96.0.200", "fd00:10:96::200"}
		got, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got.Spec.ClusterIPs, ",") != "10.96.0.200,fd00:10:96::200" || families(got) != "IPv4,IPv6" {
			t.Fatalf("got %v %v", got.Spec.IPFamilies, got.Spec.ClusterIPs)
		}
		again := dualSvc("pinned-again", nil, corev1.IPv6Protocol)
		again.Spec.ClusterIP, again.Spec.ClusterIPs = "fd00:10:96::200", []string{"fd00:10:96::200"}
		if _, err := svcs.Create(ctx, again, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "provided value is already allocated") {
			t.Fatalf("the same IPv6 address twice: %v", err)
		}
	})

	t.Run("a dual-stack Service's addresses survive a status write, a dry run and a PUT naming the primary alone", func(t *testing.T) {
		got, err := svcs.Create(ctx, dualSvc("kept", ptr.To(corev1.IPFamilyPolicyRequireDualStack)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Join(got.Spec.ClusterIPs, ",")
		// A status write carrying another spec allocates and frees nothing.
		st := got.DeepCopy()
		st.Spec.ClusterIP, st.Spec.ClusterIPs = "10.96.0.99", []string{"10.96.0.99"}
		st.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		st.Status.LoadBalancer = corev1.LoadBalancerStatus{}
		if _, err := svcs.UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		hasIPAddress(t, "10.96.0.99", false)
		// A dry-run downgrade releases nothing.
		cur, err := svcs.Get(ctx, "kept", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dry := cur.DeepCopy()
		dry.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		if _, err := svcs.Update(ctx, dry, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		// A PUT whose spec names only clusterIP keeps both addresses, as upstream.
		put := cur.DeepCopy()
		put.Spec.ClusterIPs, put.Spec.IPFamilies = nil, nil
		after, err := svcs.Update(ctx, put, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(after.Spec.ClusterIPs, ",") != want {
			t.Fatalf("clusterIPs %v after a PUT naming the primary alone, want %s", after.Spec.ClusterIPs, want)
		}
		for _, ip := range after.Spec.ClusterIPs {
			hasIPAddress(t, ip, true)
		}
	})

	t.Run("upstream's refusals", func(t *testing.T) {
		for _, c := range []struct {
			svc  *corev1.Service
			want string
		}{
			{dualSvc("two-families-single", ptr.To(corev1.IPFamilyPolicySingleStack), corev1.IPv4Protocol, corev1.IPv6Protocol),
				"must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"},
			{dualSvc("dup-families", ptr.To(corev1.IPFamilyPolicyRequireDualStack), corev1.IPv6Protocol, corev1.IPv6Protocol),
				"spec.ipFamilies[1]: Duplicate value: \"IPv6\""},
		} {
			if _, err := svcs.Create(ctx, c.svc, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want Invalid with %q", c.svc.Name, err, c.want)
			}
		}
	})
}

// TestSingleStackServicesRefuseDualStack: on a cluster with one service CIDR (the default),
// RequireDualStack is refused and PreferDualStack gets the one family, as upstream.
func TestSingleStackServicesRefuseDualStack(t *testing.T) {
	s := framework.StartServer(t)
	var client kubernetes.Interface = s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svcs := client.CoreV1().Services("default")
	if _, err := svcs.Create(ctx, dualSvc("require", ptr.To(corev1.IPFamilyPolicyRequireDualStack)), metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "this cluster is not configured for dual-stack services") {
		t.Errorf("RequireDualStack on a single-stack cluster: %v", err)
	}
	got, err := svcs.Create(ctx, dualSvc("prefer", ptr.To(corev1.IPFamilyPolicyPreferDualStack)), metav1.CreateOptions{})
	if err != nil || *got.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyPreferDualStack || len(got.Spec.IPFamilies) != 1 || got.Spec.IPFamilies[0] != corev1.IPv4Protocol {
		t.Fatalf("PreferDualStack on a single-stack cluster: %v %+v", err, got)
	}
	if _, err := svcs.Create(ctx, dualSvc("six", nil, corev1.IPv6Protocol), metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.ipFamilies[0]: Invalid value: \"IPv6\": not configured on this cluster") {
		t.Errorf("IPv6 on an IPv4 cluster: %v", err)
	}
}

// TestIPv6FirstServices runs a dual-stack server whose first (primary) ranges are IPv6's, as
// upstream allows: Services are IPv6 by default and IPv6 first when dual-stack, the kubernetes
// Service and its EndpointSlice are IPv6 (the advertised address must be: an IPv4 one is
// refused at start with a message naming both flags), the cluster DNS Service takes the tenth
// address of the IPv6 range, and nodes get their IPv6 block first.
func TestIPv6FirstServices(t *testing.T) {
	refusedCtx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	out, err := exec.CommandContext(refusedCtx, framework.Binary(t), "server", "--disable-agent", "--data-dir", t.TempDir(),
		"--advertise-address", "127.0.0.1", "--service-cidr", "fd00:10:96::/108,10.96.0.0/16").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--advertise-address 127.0.0.1 and the first --service-cidr fd00:10:96::/108 are of different IP families") {
		t.Errorf("an IPv4 advertised address for an IPv6-first cluster: %v\n%s", err, out)
	}
	s := framework.StartServer(t, "--advertise-address", "::1", "--bind-address", "::",
		"--service-cidr", "fd00:10:96::/108,10.96.0.0/16", "--cluster-cidr", "fd00:10:244::/56,10.244.0.0/16")
	client := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc, err := client.CoreV1().Services("default").Create(ctx, dualSvc("web", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.IPFamilies) != 1 || svc.Spec.IPFamilies[0] != corev1.IPv6Protocol || !strings.HasPrefix(svc.Spec.ClusterIP, "fd00:10:96::") {
		t.Errorf("a Service by default: %v %v, want IPv6", svc.Spec.IPFamilies, svc.Spec.ClusterIPs)
	}
	both, err := client.CoreV1().Services("default").Create(ctx, dualSvc("both", ptr.To(corev1.IPFamilyPolicyPreferDualStack)), metav1.CreateOptions{})
	if err != nil || len(both.Spec.ClusterIPs) != 2 || !strings.HasPrefix(both.Spec.ClusterIPs[0], "fd00:10:96::") || !strings.HasPrefix(both.Spec.ClusterIPs[1], "10.96.") {
		t.Errorf("PreferDualStack: %v %v, want IPv6 first", both.Spec.ClusterIPs, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		k, err1 := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		slice, err2 := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		dns, err3 := client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		return err1 == nil && err2 == nil && err3 == nil && k.Spec.ClusterIP == "fd00:10:96::1" && slice.AddressType == "IPv6" &&
			len(slice.Endpoints) == 1 && slice.Endpoints[0].Addresses[0] == "::1" && dns.Spec.ClusterIP == "fd00:10:96::a", nil
	})
	if err != nil {
		k, _ := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		slice, _ := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		dns, _ := client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		t.Fatalf("kubernetes Service %v, its EndpointSlice %v, kube-dns %v: want fd00:10:96::1, IPv6 [::1], fd00:10:96::a", k, slice, dns)
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{})
		return err == nil && len(n.Spec.PodCIDRs) == 2 && strings.HasPrefix(n.Spec.PodCIDRs[0], "fd00:10:244:") && n.Spec.PodCIDR == n.Spec.PodCIDRs[0], nil
	})
	if err != nil {
		t.Errorf("the node's blocks, IPv6 first: %v", err)
	}
}
