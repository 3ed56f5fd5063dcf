package bench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/dataplane/loader"
	"github.com/skiff-sh/skiff/dataplane/netpol"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
	"github.com/skiff-sh/skiff/tests/scale"
)

// BenchmarkNetworkPolicy measures skiff's NetworkPolicy enforcement in labs of two workers,
// with 1000 pods in the cluster:
//
//   - conn/s and request p50 from a pod on node1 to one on node2 whose ingress is policed
//     with 0, ~100 and ~10,000 rules (entries in its policy map), against the same in a lab
//     whose agents run no policy programs at all (--network-policy=false), in this one run;
//   - a policy applied (and deleted) until it is enforced on both nodes, p50/p99 of 20, with
//     100 and with 1000 other policies present;
//   - a new pod that a policy selects: from its creation until a client the policy admits is
//     answered, against a pod no policy selects.
//
// The 1000 pods are hollow (as kubemark's): bound to a node that does not exist, their
// status written with an address in 10.250.0.0/16 — every agent gives them identities and
// addresses as it does real remote pods, while nothing runs them.
func BenchmarkNetworkPolicy(b *testing.B) {
	framework.AgentArtifacts(b)
	var none load
	b.Run("no-programs", func(b *testing.B) {
		e := newPolicyLab(b, "bnp0", false)
		none = e.measure("client-1", "server-2")
		b.ReportMetric(none.rate, "conn/s")
	})
	b.Run("policy", func(b *testing.B) {
		e := newPolicyLab(b, "bnp1", true)
		e.hollowPods(1000)
		rates := e.connectWithRules(none)
		applied := e.applyToEnforced()
		start := e.podStartToEnforced()
		fmt.Printf("\nNetworkPolicy (1000 pods)          conn/s (x no programs)   p50 µs (x no programs)\n")
		fmt.Printf("  no programs (baseline)        %10.0f                %8d\n", none.rate, none.p50)
		for _, r := range rates {
			fmt.Printf("  %-28s  %10.0f (%.3fx)        %8d (%.3fx)\n", r.what, r.l.rate, r.l.rate/none.rate, r.l.p50, float64(r.l.p50)/float64(none.p50))
			b.ReportMetric(r.l.rate/none.rate, "conn-rate-vs-none-"+r.key)
		}
		fmt.Printf("\nA policy applied → enforced on both nodes (20 each)   apply p50   apply p99   delete p50   delete p99\n")
		for _, a := range applied {
			fmt.Printf("  with %4d other policies                        %9s   %9s   %10s   %10s\n", a.others,
				a.apply[len(a.apply)/2].Round(time.Millisecond), a.apply[len(a.apply)*99/100].Round(time.Millisecond),
				a.delete[len(a.delete)/2].Round(time.Millisecond), a.delete[len(a.delete)*99/100].Round(time.Millisecond))
			b.ReportMetric(float64(a.apply[len(a.apply)/2].Milliseconds()), fmt.Sprintf("apply-p50-ms-%d", a.others))
			b.ReportMetric(float64(a.apply[len(a.apply)*99/100].Milliseconds()), fmt.Sprintf("apply-p99-ms-%d", a.others))
		}
		fmt.Printf("\nPod created → a client its policy admits answered (p50 of %d): policed %s, unpoliced %s (%.2fx)\n",
			len(start.policed), start.policed[len(start.policed)/2].Round(time.Millisecond), start.open[len(start.open)/2].Round(time.Millisecond),
			start.policed[len(start.policed)/2].Seconds()/start.open[len(start.open)/2].Seconds())
		b.ReportMetric(start.policed[len(start.policed)/2].Seconds()/start.open[len(start.open)/2].Seconds(), "pod-start-policed-vs-open")
	})
}

// policyLab is a lab with servers (app=server) and clients (role=client) on both workers.
type policyLab struct {
	b      *testing.B
	ctx    context.Context
	name   string
	client kubernetes.Interface
	pods   map[string]*corev1.Pod
	shells map[string]*podShell
}

func newPolicyLab(b *testing.B, name string, networkPolicy bool) *policyLab {
	bin := framework.Binary(b)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	b.Cleanup(cancel)
	b.Cleanup(func() { _ = exec.Command(bin, "lab", "down", "--name", name).Run() })
	if out, err := exec.CommandContext(ctx, bin, "lab", "up", "--name", name, "--nodes", "2", "--tor", "none",
		fmt.Sprintf("--network-policy=%t", networkPolicy)).CombinedOutput(); err != nil {
		b.Fatalf("lab up: %v\n%s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join("/var/lib/skiff/lab", name, "admin.kubeconfig"))
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	e := &policyLab{b: b, ctx: ctx, name: name, client: kubernetes.NewForConfigOrDie(cfg), pods: map[string]*corev1.Pod{}, shells: map[string]*podShell{}}
	for _, p := range []struct {
		name, role string
		labels     map[string]string
	}{{"server-1", "node1", map[string]string{"app": "server"}}, {"server-2", "node2", map[string]string{"app": "server"}},
		{"client-1", "node1", map[string]string{"role": "client"}}, {"client-2", "node2", map[string]string{"role": "client"}}} {
		e.create(p.name, p.role, p.labels)
	}
	for _, p := range []string{"server-1", "server-2", "client-1", "client-2"} {
		e.pods[p] = e.running(p)
	}
	e.shells["client-1"] = newPodShell(b, ctx, name, "node1", e.pods["client-1"])
	e.shells["client-2"] = newPodShell(b, ctx, name, "node2", e.pods["client-2"])
	// Pod to pod across the nodes works first (the nodes' routes are in).
	e.shells["client-1"].answered("pod to pod", func() string { return e.target("server-2") })
	e.shells["client-2"].answered("pod to pod", func() string { return e.target("server-1") })
	return e
}

func (e *policyLab) target(pod string) string {
	return net.JoinHostPort(e.pods[pod].Status.PodIP, "8080")
}

func (e *policyLab) create(name, role string, labels map[string]string) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: e.name + "-" + role,
		Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullIfNotPresent}}}}
	if _, err := e.client.CoreV1().Pods("default").Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.b.Fatal(err)
	}
}

// running polls (every 10 ms) until the pod is Running with an address.
func (e *policyLab) running(name string) *corev1.Pod {
	for e.ctx.Err() == nil {
		got, err := e.client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
		if err == nil && got.Status.Phase == corev1.PodRunning && got.Status.PodIP != "" {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.b.Fatalf("pod %s not running", name)
	return nil
}

// podIP polls (every 5 ms) until the pod has an address.
func (e *policyLab) podIP(name string) string {
	for e.ctx.Err() == nil {
		got, err := e.client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
		if err == nil && got.Status.PodIP != "" {
			return got.Status.PodIP
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.b.Fatalf("pod %s has no address", name)
	return ""
}

// hollowPods creates n pods in groups hg=g0…g99 bound to a node that does not exist and
// writes their status as Running with an address.
func (e *policyLab) hollowPods(n int) {
	err := scale.Parallel(n, 16, func(i int) error {
		name := fmt.Sprintf("hollow-%d", i)
		p, err := e.client.CoreV1().Pods("default").Create(e.ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"hollow": "true", "hg": fmt.Sprintf("g%d", i%100)}},
			Spec: corev1.PodSpec{NodeName: "hollow-node", Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1"}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		ip := netip.AddrFrom4([4]byte{10, 250, byte(i / 250), byte(i%250 + 1)}).String()
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
		_, err = e.client.CoreV1().Pods("default").UpdateStatus(e.ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.b.Fatal(err)
	}
}

func (e *policyLab) createPolicy(np *networkingv1.NetworkPolicy) {
	if _, err := e.client.NetworkingV1().NetworkPolicies("default").Create(e.ctx, np, metav1.CreateOptions{}); err != nil {
		e.b.Fatalf("networkpolicy %s: %v", np.Name, err)
	}
}

func (e *policyLab) deletePolicy(name string) {
	if err := e.client.NetworkingV1().NetworkPolicies("default").Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		e.b.Fatalf("networkpolicy %s: %v", name, err)
	}
}

var servers = metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}

// denyServers isolates the servers' ingress.
func denyServers() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-servers"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: servers, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
}

// allowClients admits role=client to the servers' 8080/TCP.
func allowClients() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-clients"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: servers,
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(8080))}}}}}}
}

// hollowRules admits to the servers, on one port, the given hollow groups (one identity
// each): a map entry per group on every server.
func hollowRules(name string, port int32, groups []string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: servers,
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "hg", Operator: metav1.LabelSelectorOpIn, Values: groups}}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(port))}}}}}}
}

func groups(from, to int) []string {
	var g []string
	for i := from; i < to; i++ {
		g = append(g, fmt.Sprintf("g%d", i))
	}
	return g
}

// rulesOn counts the entries of pod's endpoint in its node's policy map.
func (e *policyLab) rulesOn(role, pod string) int {
	v, err := netpol.OpenPolicyPinned(loader.PinDir(e.name + "-" + role))
	if err != nil {
		return -1
	}
	defer v.Close()
	eps, err := v.Endpoints()
	if err != nil {
		return -1
	}
	for _, ep := range eps {
		if ep.Address.String() == e.pods[pod].Status.PodIP {
			return len(ep.Rules)
		}
	}
	return 0
}

// measure runs the load helper from client to server three times (5 s each) and keeps the
// run with the median rate: one run on a shared 2-core machine is too noisy alone.
func (e *policyLab) measure(client, server string) load {
	var runs []load
	for i := 0; i < 3; i++ {
		runs = append(runs, e.shells[client].measure(e.target(server), 5))
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].rate < runs[j].rate })
	return runs[1]
}

type rateAt struct {
	what, key string
	l         load
}

// connectWithRules measures client-1 → server-2 with no policy, then with server-2 policed
// by ~100 and by ~10,000 rules (the client admitted by one of them); it leaves deny-servers
// and allow-clients in place and removes the rest.
func (e *policyLab) connectWithRules(none load) []rateAt {
	var out []rateAt
	out = append(out, rateAt{"programs, no policy", "0", e.measure("client-1", "server-2")})
	e.createPolicy(denyServers())
	e.createPolicy(allowClients())
	e.createPolicy(hollowRules("rules-0", 10000, groups(0, 100)))
	for _, want := range []int{100, 10000} {
		for i := 1; i < want/100; i++ {
			e.createPolicy(hollowRules(fmt.Sprintf("rules-%d", i), int32(10000+i), groups(0, 100)))
		}
		waitFor(e.b, e.ctx, fmt.Sprintf("%d rules on server-2", want), func() bool { return e.rulesOn("node2", "server-2") >= want })
		n := e.rulesOn("node2", "server-2")
		out = append(out, rateAt{fmt.Sprintf("%d rules on the server", n), fmt.Sprint(want), e.measure("client-1", "server-2")})
	}
	for i := 0; i < 100; i++ {
		e.deletePolicy(fmt.Sprintf("rules-%d", i))
	}
	e.deletePolicy("allow-clients")
	waitFor(e.b, e.ctx, "server-2's rules removed", func() bool { return e.rulesOn("node2", "server-2") == 0 })
	return out
}

type applyTimes struct {
	others        int
	apply, delete []time.Duration
}

// applyToEnforced, with the servers isolated (deny-servers), creates allow-clients and times
// until client-1 → server-2 (enforced on node2) and client-2 → server-1 (on node1) are both
// answered, then deletes it and times until both are refused; 20 times each with 100 and
// with 1000 other policies (each admitting a hollow group to the servers on a port of its own).
func (e *policyLab) applyToEnforced() []applyTimes {
	var out []applyTimes
	made := 0
	for _, others := range []int{100, 1000} {
		err := scale.Parallel(others-made, 16, func(i int) error {
			i += made
			_, err := e.client.NetworkingV1().NetworkPolicies("default").Create(e.ctx, hollowRules(fmt.Sprintf("other-%d", i), int32(20000+i), groups(i%100, i%100+1)), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			e.b.Fatal(err)
		}
		made = others
		waitFor(e.b, e.ctx, fmt.Sprintf("%d other policies on both nodes", others), func() bool {
			return e.rulesOn("node1", "server-1") >= others && e.rulesOn("node2", "server-2") >= others
		})
		a := applyTimes{others: others}
		for i := 0; i < 20; i++ {
			a.apply = append(a.apply, e.bothSee("answered", func() { e.createPolicy(allowClients()) }))
			a.delete = append(a.delete, e.bothSee("refused", func() { e.deletePolicy("allow-clients") }))
		}
		sort.Slice(a.apply, func(i, j int) bool { return a.apply[i] < a.apply[j] })
		sort.Slice(a.delete, func(i, j int) bool { return a.delete[i] < a.delete[j] })
		e.b.Logf("%d other policies: apply → enforced %v; delete → enforced %v", others, a.apply, a.delete)
		out = append(out, a)
	}
	return out
}

// bothSee starts a wait helper in each client for the server on the other node, runs change,
// and returns the time until both saw their connection answered or refused.
func (e *policyLab) bothSee(until string, change func()) time.Duration {
	w1 := e.shells["client-1"].startWait("client-1 → server-2 "+until, until)
	w2 := e.shells["client-2"].startWait("client-2 → server-1 "+until, until)
	start := time.Now()
	change()
	w1.dial(e.target("server-2"))
	w2.dial(e.target("server-1"))
	var at1, at2 time.Time
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); at1 = w1.at() }()
	go func() { defer wg.Done(); at2 = w2.at() }()
	wg.Wait()
	if at2.After(at1) {
		at1 = at2
	}
	return at1.Sub(start)
}

type startTimes struct{ policed, open []time.Duration }

// podStartToEnforced creates pods on node2, one at a time, alternately selected by the
// servers' policies (deny-servers and allow-clients, with the 1000 others) and selected by
// none, and times from the create call until client-1 is answered by each: for a policed
// pod, that is when its policy is in place (its first packet already met it: the pod is
// isolated until then).
func (e *policyLab) podStartToEnforced() startTimes {
	e.createPolicy(allowClients())
	var out startTimes
	for i := 0; i < 10; i++ {
		for _, policed := range []bool{true, false} {
			name, labels := fmt.Sprintf("late-open-%d", i), map[string]string{"app": "open"}
			if policed {
				name, labels = fmt.Sprintf("late-policed-%d", i), map[string]string{"app": "server"}
			}
			d := e.shells["client-1"].answered(name, func() string {
				e.create(name, "node2", labels)
				return net.JoinHostPort(e.podIP(name), "8080")
			})
			if policed {
				out.policed = append(out.policed, d)
			} else {
				out.open = append(out.open, d)
			}
			_ = e.client.CoreV1().Pods("default").Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
		}
	}
	sort.Slice(out.policed, func(i, j int) bool { return out.policed[i] < out.policed[j] })
	sort.Slice(out.open, func(i, j int) bool { return out.open[i] < out.open[j] })
	e.b.Logf("pod created → admitted client answered: policed %v; unpoliced %v", out.policed, out.open)
	return out
}
