package dataplane

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sys/unix"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ProxyOptions configure the node's service proxy.
type ProxyOptions struct {
	// Node is this node: its name (local endpoints) and address (NodePorts).
	Node Node
	// Uplink is the interface NodePort traffic arrives on (the one with the node's address);
	// empty serves no NodePorts.
	Uplink string
	// PinDir holds the node's pinned maps and links (PinDir(node)).
	PinDir string
	// CgroupPath is the cgroup2 directory every pod of the node runs under.
	CgroupPath string
	// Resync rewrites everything at least this often (30 s), repairing any drift; changes
	// in between write only their difference.
	Resync time.Duration
	// Started, if set, receives the loaded dataplane (metrics read its maps).
	Started func(*Dataplane)
}

// RunProxy loads the programs and keeps the maps equal to the cluster's Services and
// EndpointSlices until ctx ends. The programs and maps stay pinned when it returns.
func RunProxy(ctx context.Context, client kubernetes.Interface, o ProxyOptions, log *slog.Logger) error {
	if o.Resync == 0 {
		o.Resync = 30 * time.Second
	}
	d, err := Load(o.PinDir, o.CgroupPath, o.Uplink)
	if err != nil {
		return err
	}
	defer d.Close()
	if o.Started != nil {
		o.Started(d)
	}
	// Ids survive restarts: start from what the maps already name.
	ids, err := d.Maps.IDs()
	if err != nil {
		log.Warn("reading frontend ids from the pinned maps; numbering afresh", "err", err)
		ids = map[string]uint32{}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	services := factory.Core().V1().Services()
	slices := factory.Discovery().V1().EndpointSlices()
	kick := make(chan struct{}, 1)
	trigger := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { trigger() }, UpdateFunc: func(any, any) { trigger() }, DeleteFunc: func(any) { trigger() }}
	_, _ = services.Informer().AddEventHandler(h)
	_, _ = slices.Informer().AddEventHandler(h)
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), services.Informer().HasSynced, slices.Informer().HasSynced) {
		return ctx.Err()
	}
	go func() {
		// Idle NodePort flows go after 10 minutes (upstream's TCP established timeout is
		// longer, but the table is also an LRU: nothing live is lost to this).
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Minute):
			}
			if _, err := GCConntrack(d.Maps.CT, Monotonic(), 10*time.Minute); err != nil {
				log.Warn("conntrack GC", "err", err)
			}
		}
	}()
	health := newHealthServer(o.Node.IP, log)
	defer health.Close(ctx)
	log.Info("service proxy running", "pins", o.PinDir, "cgroup", o.CgroupPath, "nodePortUplink", o.Uplink)
	programmer := &Programmer{Maps: d.Maps}
	compiler := &Compiler{Node: o.Node, IDs: ids}
	full := true           // the first sync and every resync rewrite everything; changes write their delta
	var took time.Duration // how long the last sync ran
	var done time.Time     // and when it ended
	var lastFull time.Time // when everything was last rewritten: at least every Resync, even under constant churn
	for {
		start := time.Now()
		svcs, _ := services.Lister().List(labels.Everything())
		eps, _ := slices.Lister().List(labels.Everything())
		compiled := compiler.Compile(svcs, eps)
		if err := programmer.Apply(compiled, full); err != nil {
			log.Warn("service maps", "err", err)
		}
		if full {
			lastFull = start
		}
		if o.Node.IP.IsValid() {
			health.Sync(HealthChecks(svcs, eps, o.Node.Name))
		}
		done = time.Now()
		took = done.Sub(start)
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
			// Coalesce a burst (a Deployment's endpoints change together), and in a long one
			// (thousands of Services created) spend at most half the time syncing; a change
			// after a quiet spell waits only the 20 ms.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(max(20*time.Millisecond, took-time.Since(done))):
			}
			full = time.Since(lastFull) >= o.Resync
		case <-time.After(o.Resync):
			full = true
		}
	}
}

// Monotonic is CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns.
func Monotonic() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}
