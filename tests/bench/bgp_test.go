package bench

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	skifflab "github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// routeWatch reports when a prefix appears in (or leaves) a namespace's main table, from
// netlink notifications rather than polling. Each notification is stamped as it arrives,
// not when wait reads it: the benchmark waits on other things (the lab's add-node) while
// the routes come.
type routeWatch struct {
	host string
	ch   chan stampedRoute
	done chan struct{}
}

type stampedRoute struct {
	at time.Time
	u  netlink.RouteUpdate
}

func watchRoutes(b *testing.B, netnsName string) *routeWatch {
	ns, err := netns.GetFromName(netnsName)
	if err != nil {
		b.Fatal(err)
	}
	raw := make(chan netlink.RouteUpdate, 1024)
	w := &routeWatch{host: netnsName, ch: make(chan stampedRoute, 1024), done: make(chan struct{})}
	if err := netlink.RouteSubscribeAt(ns, raw, w.done); err != nil {
		b.Fatal(err)
	}
	ns.Close()
	go func() {
		for u := range raw {
			select {
			case w.ch <- stampedRoute{at: time.Now(), u: u}:
			default: // nobody reads this watch any more
			}
		}
	}()
	b.Cleanup(func() { close(w.done) })
	return w
}

// wait returns when prefix was added (add) or deleted (!add) in the watched table.
func (w *routeWatch) wait(prefix string, add bool, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		select {
		case s := <-w.ch:
			if u := s.u; u.Dst != nil && u.Dst.String() == prefix && (u.Type == 24) == add { // 24 = RTM_NEWROUTE
				return s.at, nil
			}
		case <-deadline:
			return time.Time{}, fmt.Errorf("%s: %s never %s", w.host, prefix, map[bool]string{true: "appeared", false: "left"}[add])
		}
	}
}

// BenchmarkBGPRoutePropagation measures, in an FRR lab, the time from a new node's pod CIDR
// assignment to its route in every other node's table and the ToR's, and from a node's
// deletion to that route's withdrawal everywhere. The baseline, taken in the same run, is
// the bare BGP path: a prefix the ToR itself originates, timed to every node's table (FRR →
// GoBGP → skiff's kernel sync, without the API or the agent's watch).
func BenchmarkBGPRoutePropagation(b *testing.B) {
	framework.AgentArtifacts(b)
	bin := framework.Binary(b)
	const name = "benchbgp"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	skiff := func(args ...string) {
		if out, err := exec.CommandContext(ctx, bin, append([]string{"lab", "--name", name}, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("skiff lab %v: %v\n%s", args, err, out)
		}
	}
	b.Cleanup(func() { _ = exec.Command(bin, "lab", "down", "--name", name).Run() })
	skiff("up", "--nodes", "2", "--tor", "frr")
	cfg, err := clientcmd.BuildConfigFromFlags("", "/var/lib/skiff/lab/"+name+"/admin.kubeconfig")
	if err != nil {
		b.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	time.Sleep(3 * time.Second) // every session up

	others := []string{name + "-master", name + "-node1", name + "-node2"}
	everywhere := func(watches []*routeWatch, prefix string, add bool) (time.Time, error) {
		var last time.Time
		for _, w := range watches {
			t, err := w.wait(prefix, add, time.Minute)
			if err != nil {
				return last, err
			}
			if t.After(last) {
				last = t
			}
		}
		return last, nil
	}

	// Five samples of each per b.N. The new nodes stay until every one has joined (the
	// lab's add-node waits for routes among all its hosts), and each later one is also
	// timed into the tables of those before it; then they are deleted one by one.
	var base, join, leave []time.Duration
	rounds := 5 * b.N
	for i := 0; i < rounds; i++ {
		// Baseline: the ToR originates a prefix (FRR's network statement, no import check).
		watches := make([]*routeWatch, 0, len(others))
		for _, ns := range others {
			watches = append(watches, watchRoutes(b, ns))
		}
		prefix := fmt.Sprintf("203.0.113.%d/32", i%250+1)
		start := time.Now()
		if out, err := exec.Command("nsenter", "--net=/run/netns/"+name+"-tor", "--", "vtysh", "-N", name+"-tor", "-c", "configure terminal",
			"-c", "router bgp 64512", "-c", "no bgp network import-check", "-c", "address-family ipv4 unicast", "-c", "network "+prefix).CombinedOutput(); err != nil {
			b.Fatalf("vtysh: %v %s", err, out)
		}
		t, err := everywhere(watches, prefix, true)
		if err != nil {
			b.Fatal(err)
		}
		base = append(base, t.Sub(start))
		_ = exec.Command("nsenter", "--net=/run/netns/"+name+"-tor", "--", "vtysh", "-N", name+"-tor", "-c", "configure terminal",
			"-c", "router bgp 64512", "-c", "address-family ipv4 unicast", "-c", "no network "+prefix).Run()
	}
	var joined []string // node, pod CIDR, …
	for i := 0; i < rounds; i++ {
		// A new node: from its pod CIDR assignment (seen by a GET every 2 ms) to the route in
		// every other table.
		node := fmt.Sprintf("node%d", 3+i)
		watches := make([]*routeWatch, 0, len(others)+1)
		for _, ns := range append(others, name+"-tor") {
			watches = append(watches, watchRoutes(b, ns))
		}
		assigned := make(chan time.Time, 1)
		cidr := make(chan string, 1)
		go func() {
			for ctx.Err() == nil {
				n, err := client.CoreV1().Nodes().Get(ctx, name+"-"+node, metav1.GetOptions{})
				if err == nil && n.Spec.PodCIDR != "" {
					assigned <- time.Now()
					cidr <- n.Spec.PodCIDR
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		skiff("add-node", "--nodes", fmt.Sprint(2+i+1))
		at, block := <-assigned, <-cidr
		t, err := everywhere(watches, block, true)
		if err != nil {
			b.Fatal(err)
		}
		join = append(join, t.Sub(at))
		joined = append(joined, node, block)
		others = append(others, name+"-"+node)
	}
	// A hung node (its agent stopped: no BFD, no keepalive, no FIN): from SIGSTOP to its
	// block leaving the ToR's table, which BFD (the lab's 4 x 300 ms) does rather than the 9 s hold
	// time. It is resumed and back before the deletions.
	var hung time.Duration
	{
		node, block := joined[len(joined)-2], joined[len(joined)-1]
		pid, err := skifflab.PID(name, node)
		if err != nil || pid == 0 {
			b.Fatalf("%s's agent: pid %d, %v", node, pid, err)
		}
		w := watchRoutes(b, name+"-tor")
		start := time.Now()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			b.Fatal(err)
		}
		t, err := w.wait(block, false, 30*time.Second)
		_ = syscall.Kill(pid, syscall.SIGCONT)
		if err != nil {
			b.Fatal(err)
		}
		hung = t.Sub(start)
		if _, err := w.wait(block, true, 2*time.Minute); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Second) // its sessions with everyone settle
	}
	for i := 0; i+1 < len(joined); i += 2 {
		// Its loss: the Node deleted, its route withdrawn everywhere.
		node, block := joined[i], joined[i+1]
		watches := make([]*routeWatch, 0, len(others)+1)
		for _, ns := range append(others, name+"-tor") {
			if ns != name+"-"+node {
				watches = append(watches, watchRoutes(b, ns))
			}
		}
		start := time.Now()
		if err := client.CoreV1().Nodes().Delete(ctx, name+"-"+node, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		t, err := everywhere(watches, block, false)
		if err != nil {
			b.Fatal(err)
		}
		leave = append(leave, t.Sub(start))
		_ = exec.Command("pkill", "-KILL", "-f", "/var/lib/skiff/lab/"+name+"/"+node+"/").Run()
		others = slices.DeleteFunc(others, func(ns string) bool { return ns == name+"-"+node })
	}
	med := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	b.ReportMetric(float64(med(base).Microseconds())/1000, "baseline-ms")
	b.ReportMetric(float64(med(join).Microseconds())/1000, "join-ms")
	b.ReportMetric(float64(med(leave).Microseconds())/1000, "withdraw-ms")
	b.ReportMetric(float64(hung.Microseconds())/1000, "hung-node-ms")
	b.ReportMetric(float64(med(join))/float64(med(base)), "join/baseline")
	b.ReportMetric(float64(med(leave))/float64(med(base)), "withdraw/baseline")
	b.Logf("BGP (median of %d): baseline (ToR-originated prefix to every node) %v; new node's pod CIDR to every table %v (%.1fx, max %v, goal 500 ms); node deleted to withdrawn everywhere %v (%.1fx); a hung node's block left the ToR %v after SIGSTOP (BFD; hold time 9 s, %.2fx)",
		rounds, med(base), med(join), float64(med(join))/float64(med(base)), slices.Max(join), med(leave), float64(med(leave))/float64(med(base)),
		hung, float64(hung)/float64(9*time.Second))
}
