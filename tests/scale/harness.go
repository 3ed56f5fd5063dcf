package scale

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Target is a control plane under load: skiff's one process, or upstream's four.
type Target interface {
	Name() string
	// Kubeconfig holds admin credentials (kwok uses it too).
	Kubeconfig() string
	RESTConfig() (*rest.Config, error)
	// PIDs are the processes whose memory and CPU are the target's.
	PIDs() []int
	// EtcdDBBytes is the size of etcd's database file.
	EtcdDBBytes() int64
}

// Options shape one run.
type Options struct {
	Nodes, PodsPerNode int
	// Churn is how long the steady churn runs after the burst, at ChurnRate mutations/s.
	Churn     time.Duration
	ChurnRate float64
	// Settle is how long the harness waits after the churn before it reads memory, and
	// Pause between the burst and the churn, so the churn's pod start-up (the SLO) is not
	// measured behind the burst's queues.
	Settle, Pause time.Duration
	// Kwok is kwok's binary and KwokStages its stage configuration (`make kwok`).
	Kwok, KwokStages string
	// KwokCIDR is where kwok gives its pods addresses (10.128.0.0/9 when empty).
	KwokCIDR string
	// Dir holds kwok's log.
	Dir  string
	Seed uint64
	Logf func(format string, args ...any)
	// Timeout bounds waiting for nodes and pods.
	Timeout time.Duration
	// Agents, if not 0, is how many node agents' watches (Fanout) the server carries from
	// the pause on, through the churn.
	Agents int
}

// CallLatency is one call's latency as the server's histogram or the client measured it.
type CallLatency struct {
	Call     string        `json:"call"`
	P50, P99 time.Duration `json:"-"`
	P50ms    float64       `json:"p50_ms"`
	P99ms    float64       `json:"p99_ms"`
	Count    int           `json:"count"`
}

// Result is what one run measured.
type Result struct {
	Target   string `json:"target"`
	Nodes    int    `json:"nodes"`
	Pods     int    `json:"pods"`
	Services int    `json:"services"`
	// NodesReady is the time from the first Node created to every node Ready.
	NodesReady time.Duration `json:"nodes_ready"`
	// Burst is the time from the first object created to every planned pod Running.
	Burst        time.Duration `json:"burst"`
	BurstStartup Startup       `json:"burst_startup"`
	ChurnSteps   int           `json:"churn_steps"`
	ChurnStartup Startup       `json:"churn_startup"`
	SLOs         []SLO         `json:"slos"`
	// Server is the server's own histograms over the measured window, the slowest first;
	// Client the same calls timed by the load driver.
	Server []CallLatency `json:"server"`
	Client []CallLatency `json:"client"`
	// Idle is the processes before any node existed, End after the churn and Settle.
	Idle     Sample        `json:"idle"`
	End      Sample        `json:"end"`
	PeakRSS  uint64        `json:"peak_rss"`
	PeakAnon uint64        `json:"peak_anon"`
	CPU      time.Duration `json:"cpu"`
	EtcdDB   int64         `json:"etcd_db"`
	Watchers float64       `json:"watchers"`
	Fanout   *FanoutResult `json:"fanout,omitempty"`
	Samples  []Sample      `json:"samples"`
	Phases   []Phase       `json:"phases"`
}

// FanoutResult is what the simulated agents' watches cost the server and how fast a change
// reached all of them.
type FanoutResult struct {
	Agents, Streams int
	// Before is the server just before the watches opened, Open once they had (and the
	// server settled).
	Before, Open Sample
	// Delivery is a new Service's creation → each agent's watch event; Slowest the last
	// agent's. Bytes is what the agents' watches carried; Broken the watches that failed.
	Delivery      Latency
	Slowest       time.Duration
	Bytes, Broken int64
}

// Phase marks when a part of the run began, for the plot.
type Phase struct {
	Name string        `json:"name"`
	At   time.Duration `json:"at"`
}

// AnonPerPod is the anonymous memory the load added, per planned pod.
func (r Result) AnonPerPod() float64 {
	if r.Pods == 0 || r.End.Anon < r.Idle.Anon {
		return 0
	}
	return float64(r.End.Anon-r.Idle.Anon) / float64(r.Pods)
}

// Measure runs the whole load against a started target: kwok and its nodes, the creation
// burst, the churn with reads, and the readings.
func Measure(ctx context.Context, t Target, o Options) (Result, error) {
	plan := PlanFor(o.Nodes, o.PodsPerNode)
	res := Result{Target: t.Name(), Nodes: o.Nodes, Pods: plan.Pods(), Services: plan.Services()}
	cfg, err := t.RESTConfig()
	if err != nil {
		return res, err
	}
	rec := NewRecorder()
	base := cfg
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.Wrap(rec.Wrap)
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return res, err
	}
	metricsOf := func() (ServerMetrics, error) {
		body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return ServerMetrics{}, fmt.Errorf("/metrics: %w", err)
		}
		return ParseServerMetrics(strings.NewReader(string(body)))
	}

	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	sampler := SampleProcesses(sampleCtx, t.PIDs(), time.Second)
	start := time.Now()
	phase := func(name string) {
		res.Phases = append(res.Phases, Phase{Name: name, At: time.Since(start)})
		o.Logf("%s %d nodes: %s", t.Name(), o.Nodes, name)
	}
	res.Idle = sampler.Last()

	kwok, err := startKwok(ctx, o, t.Kubeconfig())
	if err != nil {
		return res, err
	}
	defer kwok.stop()

	phase("nodes")
	if err := CreateNodes(ctx, c, o.Nodes); err != nil {
		return res, fmt.Errorf("creating nodes: %w", err)
	}
	if err := waitFor(ctx, o.Timeout, func() (bool, string, error) {
		ready, err := readyNodes(ctx, c)
		return ready >= o.Nodes, fmt.Sprintf("%d/%d nodes Ready", ready, o.Nodes), err
	}, o.Logf, kwok); err != nil {
		return res, err
	}
	res.NodesReady = time.Since(start) - res.Phases[0].At

	before, err := metricsOf()
	if err != nil {
		return res, err
	}
	pods, err := TrackPods(ctx, c)
	if err != nil {
		return res, err
	}
	phase("burst")
	burstStart := time.Now()
	if err := CreateLoad(ctx, c, plan, 16); err != nil {
		return res, fmt.Errorf("creating the load: %w", err)
	}
	if err := waitFor(ctx, o.Timeout, func() (bool, string, error) {
		n := pods.Running()
		s := sampler.Last()
		return n >= res.Pods, fmt.Sprintf("%d/%d pods Running, RSS %d MiB, CPU %s", n, res.Pods, s.RSS>>20, s.CPU.Round(time.Second)), nil
	}, o.Logf, kwok); err != nil {
		return res, err
	}
	burstEnd := time.Now()
	res.Burst = burstEnd.Sub(burstStart)
	res.BurstStartup = pods.Startup(burstStart, burstEnd)
	if o.Pause > 0 {
		phase("pause")
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(o.Pause):
		}
	}
	var fan *Fanout
	if o.Agents > 0 {
		phase("watches")
		// Its own client: the watches are not calls the SLOs judge.
		plain := rest.CopyConfig(base)
		plain.QPS, plain.Burst = 1000, 2000
		plain.ContentType = "application/vnd.kubernetes.protobuf" // as agents and kubelets watch
		fc, err := kubernetes.NewForConfig(plain)
		if err != nil {
			return res, err
		}
		res.Fanout = &FanoutResult{Before: sampler.Last()}
		if fan, err = StartFanout(ctx, fc, o.Agents); err != nil {
			return res, fmt.Errorf("the agents' watches: %w", err)
		}
		defer fan.Stop()
		res.Fanout.Agents, res.Fanout.Streams = fan.Agents, fan.Streams
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(30 * time.Second):
		}
		res.Fanout.Open = sampler.Last()
	}
	churnStart := time.Now()

	phase("churn")
	stop := make(chan struct{})
	time.AfterFunc(o.Churn, func() { close(stop) })
	readErr := make(chan error, 1)
	go func() { readErr <- Reader(ctx, stop, c, plan, pods) }()
	steps := Churn(plan, int(o.Churn.Seconds()*o.ChurnRate)+1, o.Seed)
	ch := &Churner{Client: c, Plan: plan}
	res.ChurnSteps, err = ch.Run(ctx, stop, steps, o.ChurnRate)
	if rerr := <-readErr; err == nil {
		err = rerr
	}
	if err != nil {
		return res, err
	}
	churnEnd := time.Now()

	phase("settle")
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(o.Settle):
	}
	res.ChurnStartup = pods.Startup(churnStart, churnEnd)
	if fan != nil {
		if res.Fanout.Delivery, res.Fanout.Slowest, err = fan.Delivery(ctx, c, plan.Namespaces[0], 10); err != nil {
			return res, err
		}
		res.Fanout.Bytes, res.Fanout.Broken = fan.Bytes(), fan.Broken()
	}
	after, err := metricsOf()
	if err != nil {
		return res, err
	}
	window := after.Since(before)
	// Pod start-up is judged on the churn's pods: upstream states the SLO at no more than 20
	// mutations/s, and the burst (every pod of the size created at once) is a throughput test,
	// reported on its own.
	res.SLOs = append(APISLOs(window.Requests), PodStartupSLO(res.ChurnStartup.Running))
	res.Server = serverLatencies(window.Requests)
	res.Client = clientLatencies(rec.Quantiles())
	res.Watchers = after.Watchers
	res.EtcdDB = t.EtcdDBBytes()
	stopSampling()
	res.End = sampler.Last()
	res.PeakRSS, res.PeakAnon = sampler.Peak()
	res.CPU = res.End.CPU - res.Idle.CPU
	res.Samples = sampler.Samples()
	phase("done")
	return res, nil
}

func serverLatencies(reqs map[Call]Histogram) []CallLatency {
	var out []CallLatency
	for c, h := range reqs {
		if c.Verb == "WATCH" || c.Verb == "CONNECT" || isStreaming(c.Resource) {
			continue
		}
		p50, p99 := h.Quantile(0.5), h.Quantile(0.99)
		out = append(out, callLatency(c, time.Duration(p50*float64(time.Second)), time.Duration(p99*float64(time.Second)), int(h.Count)))
	}
	sortCalls(out)
	return out
}

func clientLatencies(q map[Call]Latency) []CallLatency {
	var out []CallLatency
	for c, l := range q {
		out = append(out, callLatency(c, l.P50, l.P99, l.Count))
	}
	sortCalls(out)
	return out
}

func callLatency(c Call, p50, p99 time.Duration, n int) CallLatency {
	return CallLatency{Call: c.String(), P50: p50, P99: p99, P50ms: float64(p50.Microseconds()) / 1000,
		P99ms: float64(p99.Microseconds()) / 1000, Count: n}
}

func sortCalls(cs []CallLatency) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].P99 != cs[j].P99 {
			return cs[i].P99 > cs[j].P99
		}
		return cs[i].Call < cs[j].Call
	})
}

func readyNodes(ctx context.Context, c kubernetes.Interface) (int, error) {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok", ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, node := range nodes.Items {
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}

// waitFor polls done every second and logs its progress every ten; it fails when kwok exits
// or the timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, done func() (bool, string, error), logf func(string, ...any), k *kwokProcess) error {
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		ok, progress, err := done()
		if err != nil {
			return err
		}
		if ok {
			logf("  %s", progress)
			return nil
		}
		if i%10 == 0 {
			logf("  %s", progress)
		}
		if k.exited() {
			return fmt.Errorf("kwok exited (%s): %s", progress, k.tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s: %s", timeout, progress)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// kwokProcess is a running kwok controller.
type kwokProcess struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startKwok(ctx context.Context, o Options, kubeconfig string) (*kwokProcess, error) {
	for _, f := range []string{o.Kwok, o.KwokStages, filepath.Join(filepath.Dir(o.KwokStages), "kwok.yaml")} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%s is missing: `make kwok` builds kwok and its stages (%v)", f, err)
		}
	}
	logPath := filepath.Join(o.Dir, "kwok.log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Kwok,
		"--kubeconfig", kubeconfig,
		"--config", o.KwokStages,
		"--config", filepath.Join(filepath.Dir(o.KwokStages), "kwok.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector", KwokAnnotation+"=fake",
		"--node-lease-duration-seconds", "40",
		"--cidr", cmp.Or(o.KwokCIDR, "10.128.0.0/9"),
		"--node-ip", "10.127.0.1",
		"--server-address", "",
	)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	k := &kwokProcess{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); log.Close(); close(k.done) }()
	return k, nil
}

func (k *kwokProcess) exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

func (k *kwokProcess) tail() string {
	b, _ := os.ReadFile(k.log)
	return tailLines(string(b), 20)
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (k *kwokProcess) stop() {
	if k.exited() {
		return
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(10 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.done
	}
}
