package scale

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

var (
	sizesFlag   = flag.String("scale.nodes", "100", "comma-separated cluster sizes (simulated nodes) to run")
	podsPerNode = flag.Int("scale.pods-per-node", 30, "pods per node (upstream's load test: 30)")
	upstream    = flag.Bool("scale.upstream", false, "also run upstream's kube-apiserver, kube-scheduler, kube-controller-manager and etcd (`make scale-upstream`) on the same load")
	churnFor    = flag.Duration("scale.churn", 30*time.Second, "how long the steady churn runs after the burst")
	churnRate   = flag.Float64("scale.churn-rate", 10, "churn mutations per second (upstream's SLOs hold at up to 20)")
	settleFor   = flag.Duration("scale.settle", 10*time.Second, "wait after the churn before memory is read")
	pauseFor    = flag.Duration("scale.pause", 15*time.Second, "wait between the burst and the churn (the churn's pod start-up is the SLO; the burst's queues should be gone)")
	agents      = flag.Int("scale.agents", -1, "simulated node agents whose watches (their pods, every Service, every EndpointSlice) the server carries from the pause on; -1 (default): one per node")
	outDir      = flag.String("scale.out", "", "directory the results (JSON, Markdown table, SVG plot) are written to; none when empty")
)

func TestMain(m *testing.M) { framework.Main(m) }

// TestScale runs the load against skiff (and upstream, with -scale.upstream) at each size.
// It asserts what must hold at any size — every node Ready, every planned pod Running, the
// churn applied, every reading taken — and reports the figures and SLO verdicts; timings are
// never asserted (the machines are shared; `make scale` compares them as ratios).
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("the scale harness needs root, kwok (`make kwok`) and minutes")
	}
	var results []Result
sizes:
	for _, s := range strings.Split(*sizesFlag, ",") {
		nodes, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || nodes < 1 {
			t.Fatalf("-scale.nodes: %q is not a size", s)
		}
		targets := []struct {
			name  string
			start func(t *testing.T) Target
		}{{"skiff", startSkiff}}
		if *upstream {
			targets = append(targets, struct {
				name  string
				start func(t *testing.T) Target
			}{"upstream", startUpstream})
		}
		for _, target := range targets {
			var r Result
			t.Run(fmt.Sprintf("%s/nodes=%d", target.name, nodes), func(t *testing.T) {
				r = run(t, target.start(t), nodes)
			})
			if r.Target != "" {
				results = append(results, r) // a run that missed a check still reports what it measured
				// Written as each target ends: a long run stopped part-way keeps what it finished.
				t.Logf("\n%s", Markdown([]Result{r}))
				if *outDir != "" {
					if err := WriteResults(*outDir, results); err != nil {
						t.Error(err)
					}
				}
			}
		}
		// Upstream runs beside a skiff that missed a check (the comparison is the point);
		// the next size does not.
		if t.Failed() {
			break sizes
		}
	}
	t.Logf("\n%s", Markdown(results)) // every target together, with the ratios (written to -scale.out as each ended)
}

func run(t *testing.T, target Target, nodes int) Result {
	timeout := 10*time.Minute + time.Duration(nodes*(*podsPerNode))*20*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout+*pauseFor+*churnFor+*settleFor+10*time.Minute)
	defer cancel()
	r, err := Measure(ctx, target, Options{
		Nodes: nodes, PodsPerNode: *podsPerNode,
		Churn: *churnFor, ChurnRate: *churnRate, Settle: *settleFor, Pause: *pauseFor,
		Kwok: "kwok/kwok", KwokStages: "kwok/stages.yaml",
		Dir: t.TempDir(), Seed: 41, Logf: t.Logf, Timeout: timeout, Agents: agentsFor(nodes),
	})
	if err != nil {
		t.Fatalf("%s at %d nodes: %v", target.Name(), nodes, err)
	}
	// What holds at any size: the readings exist and describe the load that ran.
	if r.Pods != nodes**podsPerNode || r.BurstStartup.Running.Count < r.Pods {
		t.Errorf("%d of %d pods seen Running in the burst", r.BurstStartup.Running.Count, r.Pods)
	}
	// Each step waits for its call, so a slow server applies fewer than the rate asks; half
	// is the least a working churn manages (the achieved rate is reported).
	if want := int(churnFor.Seconds() * *churnRate); r.ChurnSteps < want/2 {
		t.Errorf("%d churn steps applied, want about %d", r.ChurnSteps, want)
	}
	if r.End.RSS == 0 || r.End.Anon == 0 || r.CPU <= 0 || r.EtcdDB == 0 || r.Watchers == 0 || len(r.Server) == 0 {
		t.Errorf("a reading is missing: RSS %d, anon %d, CPU %s, etcd %d bytes, %v watchers, %d server calls",
			r.End.RSS, r.End.Anon, r.CPU, r.EtcdDB, r.Watchers, len(r.Server))
	}
	if f := r.Fanout; agentsFor(nodes) > 0 && (f == nil || f.Delivery.Count != 10*f.Agents || f.Bytes == 0) {
		t.Errorf("the agents' watches: %+v", f)
	}
	if len(r.SLOs) != 5 {
		t.Errorf("%d SLOs judged, want 5", len(r.SLOs))
	}
	for _, s := range r.SLOs {
		t.Logf("%s %d nodes: SLO %v", target.Name(), nodes, s)
	}
	return r
}

// agentsFor is -scale.agents at a size.
func agentsFor(nodes int) int {
	if *agents < 0 {
		return nodes
	}
	return *agents
}

// skiffTarget is one `skiff server` with its embedded etcd, scheduler and controllers.
type skiffTarget struct{ s *framework.Server }

func startSkiff(t *testing.T) Target {
	// A /9 of pod addresses: 32,768 node CIDRs of /24, enough for any size here.
	s := framework.NewServer(t, t.TempDir(), "--cluster-cidr", "10.128.0.0/9")
	s.Start()
	return skiffTarget{s}
}

func (s skiffTarget) Name() string       { return "skiff" }
func (s skiffTarget) Kubeconfig() string { return s.s.Kubeconfig }
func (s skiffTarget) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", s.s.Kubeconfig)
}
func (s skiffTarget) PIDs() []int        { return []int{s.s.PID()} }
func (s skiffTarget) EtcdDBBytes() int64 { return DirBytes(filepath.Join(s.s.Dir, "etcd"), "db") }

// startUpstream is replaced by upstream_test.go's when the upstream binaries exist.
var startUpstream = func(t *testing.T) Target {
	t.Fatalf("-scale.upstream needs `make scale-upstream` (%s)", os.Args[0])
	return nil
}
