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

// wait returns when every one of prefixes was added (add) or deleted (!add) in the watched
// table, with the time each was.
func (w *routeWatch) wait(prefixes []string, add bool, timeout time.Duration) (map[string]time.Time, error) {
	deadline := time.After(timeout)
	got := map[string]time.Time{}
	for len(got) < len(prefixes) {
		select {
		case s := <-w.ch:
			if u := s.u; u.Dst != nil && slices.Contains(prefixes, u.Dst.String()) && (u.Type == 24) == add { // 24 = RTM_NEWROUTE
				if _, seen := got[u.Dst.String()]; !seen {
					got[u.Dst.String()] = s.at
				}
			}
		case <-deadline:
			return got, fmt.Errorf("%s: %v never all %s (%d did)", w.host, prefixes, map[bool]string{true: "appeared", false: "left"}[add], len(got))
		}
	}
	return got, nil
}

// BenchmarkBGPRoutePropagation measures, in an FRR lab, the time from a new node's pod CIDR
// assignment to its route in every other node's table and the ToR's, and from a node's
// deletion to that route's withdrawal everywhere. The baseline, taken in the same run, is
// the bare BGP path: a prefix the ToR itself originates, timed to every node's table (FRR →
// GoBGP → skiff's kernel sync, without the API or the agent's watch).
func BenchmarkBGPRoutePropagation(b *testing.B) { routePropagation(b, "benchbgp", false) }

// BenchmarkBGPRoutePropagationDual is BenchmarkBGPRoutePropagation in a dual-stack lab: every
// event is timed for the IPv4 and the IPv6 prefix it moves (a node's two blocks, the ToR's
// two prefixes), so IPv6's convergence is reported against IPv4's of the same events.
func BenchmarkBGPRoutePropagationDual(b *testing.B) { routePropagation(b, "benchbg6", true) }

func routePropagation(b *testing.B, name string, dual bool) {
	framework.AgentArtifacts(b)
	bin := framework.Binary(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	skiff := func(args ...string) {
		if out, err := exec.CommandContext(ctx, bin, append([]string{"lab", "--name", name}, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("skiff lab %v: %v\n%s", args, err, out)
		}
	}
	b.Cleanup(func() { _ = exec.Command(bin, "lab", "down", "--name", name).Run() })
	family := skifflab.IPv4
	if dual {
		family = skifflab.DualStack
	}
	skiff("up", "--nodes", "2", "--tor", "frr", "--ip-family", family)
	cfg, err := clientcmd.BuildConfigFromFlags("", "/var/lib/skiff/lab/"+name+"/admin.kubeconfig")
	if err != nil {
		b.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	time.Sleep(3 * time.Second) // every session up

	others := []string{name + "-master", name + "-node1", name + "-node2"}
	// everywhere is when each prefix had reached (or left) the last of the watched tables.
	everywhere := func(watches []*routeWatch, prefixes []string, add bool) (map[string]time.Time, error) {
		last := map[string]time.Time{}
		for _, w := range watches {
			got, err := w.wait(prefixes, add, time.Minute)
			if err != nil {
				return last, err
			}
			for p, t := range got {
				if t.After(last[p]) {
					last[p] = t
				}
			}
		}
		return last, nil
	}
	// Samples per family (index 0 IPv4, 1 IPv6); a prefix's family is its position.
	var base, join, leave [2][]time.Duration
	record := func(into *[2][]time.Duration, prefixes []string, at map[string]time.Time, start time.Time) {
		for i, p := range prefixes {
			into[i] = append(into[i], at[p].Sub(start))
		}
	}
	// tor runs vtysh commands in the ToR's router bgp block.
	tor := func(cmds ...string) error {
		args := []string{"--net=/run/netns/" + name + "-tor", "--", "vtysh", "-N", name + "-tor", "-c", "configure terminal",
			"-c", "router bgp 64512", "-c", "no bgp network import-check"}
		for _, c := range cmds {
			args = append(args, "-c", c)
		}
		out, err := exec.Command("nsenter", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("vtysh: %v %s", err, out)
		}
		return nil
	}

	// Five samples of each per b.N. The new nodes stay until every one has joined (the
	// lab's add-node waits for routes among all its hosts), and each later one is also
	// timed into the tables of those before it; then they are deleted one by one.
	rounds := 5 * b.N
	for i := 0; i < rounds; i++ {
		// Baseline: the ToR originates a prefix (FRR's network statement, no import check),
		// in each family at once.
		watches := make([]*routeWatch, 0, len(others))
		for _, ns := range others {
			watches = append(watches, watchRoutes(b, ns))
		}
		prefixes := []string{fmt.Sprintf("203.0.113.%d/32", i%250+1)}
		args := []string{"address-family ipv4 unicast", "network " + prefixes[0], "exit-address-family"}
		if dual {
			prefixes = append(prefixes, fmt.Sprintf("2001:2:0:113::%x/128", i%250+1))
			args = append(args, "address-family ipv6 unicast", "network "+prefixes[1], "exit-address-family")
		}
		start := time.Now()
		if err := tor(args...); err != nil {
			b.Fatal(err)
		}
		at, err := everywhere(watches, prefixes, true)
		if err != nil {
			b.Fatal(err)
		}
		record(&base, prefixes, at, start)
		undo := []string{"address-family ipv4 unicast", "no network " + prefixes[0], "exit-address-family"}
		if dual {
			undo = append(undo, "address-family ipv6 unicast", "no network "+prefixes[1], "exit-address-family")
		}
		_ = tor(undo...)
	}
	type joinedNode struct {
		node   string
		blocks []string // its pod CIDRs, IPv4's first
	}
	var joined []joinedNode
	for i := 0; i < rounds; i++ {
		// A new node: from its pod CIDR assignment (seen by a GET every 2 ms) to the routes in
		// every other table.
		node := fmt.Sprintf("node%d", 3+i)
		watches := make([]*routeWatch, 0, len(others)+1)
		for _, ns := range append(others, name+"-tor") {
			watches = append(watches, watchRoutes(b, ns))
		}
		assigned := make(chan time.Time, 1)
		cidrs := make(chan []string, 1)
		want := 1
		if dual {
			want = 2
		}
		go func() {
			for ctx.Err() == nil {
				n, err := client.CoreV1().Nodes().Get(ctx, name+"-"+node, metav1.GetOptions{})
				if err == nil && len(n.Spec.PodCIDRs) >= want {
					assigned <- time.Now()
					cidrs <- n.Spec.PodCIDRs[:want]
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		skiff("add-node", "--nodes", fmt.Sprint(2+i+1))
		at, blocks := <-assigned, <-cidrs
		got, err := everywhere(watches, blocks, true)
		if err != nil {
			b.Fatal(err)
		}
		record(&join, blocks, got, at)
		joined = append(joined, joinedNode{node, blocks})
		others = append(others, name+"-"+node)
	}
	// A hung node (its agent stopped: no BFD, no keepalive, no FIN): from SIGSTOP to its
	// blocks leaving the ToR's table, which BFD (the lab's 4 x 300 ms) does rather than the
	// 9 s hold time. It is resumed and back before the deletions.
	var hung [2]time.Duration
	{
		last := joined[len(joined)-1]
		pid, err := skifflab.PID(name, last.node)
		if err != nil || pid == 0 {
			b.Fatalf("%s's agent: pid %d, %v", last.node, pid, err)
		}
		w := watchRoutes(b, name+"-tor")
		start := time.Now()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			b.Fatal(err)
		}
		got, err := w.wait(last.blocks, false, 30*time.Second)
		_ = syscall.Kill(pid, syscall.SIGCONT)
		if err != nil {
			b.Fatal(err)
		}
		for i, p := range last.blocks {
			hung[i] = got[p].Sub(start)
		}
		if _, err := w.wait(last.blocks, true, 2*time.Minute); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Second) // its sessions with everyone settle
	}
	for _, j := range joined {
		// Its loss: the Node deleted, its routes withdrawn everywhere.
		watches := make([]*routeWatch, 0, len(others)+1)
		for _, ns := range append(others, name+"-tor") {
			if ns != name+"-"+j.node {
				watches = append(watches, watchRoutes(b, ns))
			}
		}
		start := time.Now()
		if err := client.CoreV1().Nodes().Delete(ctx, name+"-"+j.node, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		got, err := everywhere(watches, j.blocks, false)
		if err != nil {
			b.Fatal(err)
		}
		record(&leave, j.blocks, got, start)
		_ = exec.Command("pkill", "-KILL", "-f", "/var/lib/skiff/lab/"+name+"/"+j.node+"/").Run()
		others = slices.DeleteFunc(others, func(ns string) bool { return ns == name+"-"+j.node })
	}
	med := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(med(base[0])), "baseline-ms")
	b.ReportMetric(ms(med(join[0])), "join-ms")
	b.ReportMetric(ms(med(leave[0])), "withdraw-ms")
	b.ReportMetric(ms(hung[0]), "hung-node-ms")
	b.ReportMetric(float64(med(join[0]))/float64(med(base[0])), "join/baseline")
	b.ReportMetric(float64(med(leave[0]))/float64(med(base[0])), "withdraw/baseline")
	b.Logf("BGP (median of %d): baseline (ToR-originated prefix to every node) %v; new node's pod CIDR to every table %v (%.1fx, max %v, goal 500 ms); node deleted to withdrawn everywhere %v (%.1fx); a hung node's block left the ToR %v after SIGSTOP (BFD; hold time 9 s, %.2fx)",
		rounds, med(base[0]), med(join[0]), float64(med(join[0]))/float64(med(base[0])), slices.Max(join[0]), med(leave[0]), float64(med(leave[0]))/float64(med(base[0])),
		hung[0], float64(hung[0])/float64(9*time.Second))
	if !dual {
		return
	}
	b.ReportMetric(ms(med(base[1])), "ipv6-baseline-ms")
	b.ReportMetric(ms(med(join[1])), "ipv6-join-ms")
	b.ReportMetric(ms(med(leave[1])), "ipv6-withdraw-ms")
	b.ReportMetric(ms(hung[1]), "ipv6-hung-node-ms")
	b.ReportMetric(float64(med(join[1]))/float64(med(join[0])), "ipv6/ipv4-join")
	b.ReportMetric(float64(med(leave[1]))/float64(med(leave[0])), "ipv6/ipv4-withdraw")
	b.Logf("IPv6 (the same events): baseline %v; a new node's IPv6 block to every table %v (%.2fx IPv4's, max %v); withdrawn %v (%.2fx IPv4's); a hung node's IPv6 block left the ToR %v",
		med(base[1]), med(join[1]), float64(med(join[1]))/float64(med(join[0])), slices.Max(join[1]), med(leave[1]), float64(med(leave[1]))/float64(med(leave[0])), hung[1])
}
