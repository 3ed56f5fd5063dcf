package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/dataplane/loader"
	"github.com/skiff-sh/skiff/dataplane/programs"
	"github.com/skiff-sh/skiff/dataplane/services"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
)

// Informers are the watches the proxy reads, each from the agent's shared factory (one watch
// per resource for the whole agent). Pods are there for their hostPorts: cluster DNS and
// network policy watch them already, so they add no watch.
type Informers struct {
	Services       coreinformers.ServiceInformer
	EndpointSlices discoveryinformers.EndpointSliceInformer
	Pods           coreinformers.PodInformer
	// Start starts the informers asked for so far (sharedinformers.Shared.Start).
	Start func()
}

// Options configure the node's service proxy.
type Options struct {
	// Node is this node: its name (local endpoints) and address (NodePorts).
	Node services.Node
	// Netns is the node's network namespace (/run/netns/NAME, as the agent's --netns), whose
	// processes and host-network pods reach hostPorts on 127.0.0.1; empty is the agent's own.
	Netns string
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
	// CheckPeriod is how often the pinned maps and attached programs are checked (5 s); a
	// damaged dataplane ends Run with the damage named, and the next run repairs it.
	CheckPeriod time.Duration
	// Informers are the watches Run reads, from the agent's shared factory.
	Informers Informers
	// Started, if set, receives the loaded dataplane (metrics read its maps).
	Started func(*loader.Dataplane)
	// MapSizes are the service maps' capacities (zero: DefaultMapSizes).
	MapSizes services.MapSizes
	// Synced, if set, receives the maps' status after every sync (fill metrics, the Node
	// condition).
	Synced func(services.MapStatus)
}

// Run loads the programs and keeps the maps equal to the cluster's Services and
// EndpointSlices until ctx ends. The programs and maps stay pinned when it returns.
func Run(ctx context.Context, client kubernetes.Interface, o Options, log *slog.Logger) error {
	if o.Resync == 0 {
		o.Resync = 30 * time.Second
	}
	if o.CheckPeriod == 0 {
		o.CheckPeriod = 5 * time.Second
	}
	d, err := loader.Load(o.PinDir, o.CgroupPath, o.Uplink, []netip.Addr{o.Node.IP, o.Node.IP6}, o.MapSizes)
	if err != nil {
		return err
	}
	defer d.Close()
	cookie, err := loader.NetnsCookie(o.Netns)
	if err != nil {
		return err
	}
	if err := d.SetHostNetns(cookie); err != nil {
		return err
	}
	if o.Started != nil {
		o.Started(d)
	}
	// Ids survive restarts: start from what the maps already name.
	ids, err := d.Maps.IDs()
	if err != nil {
		log.Warn("reading frontend ids from the pinned maps; numbering afresh", "err", err)
		ids = map[string]uint32{}
	}
	svcInformer, slices, pods := o.Informers.Services, o.Informers.EndpointSlices, o.Informers.Pods
	if err := indexSlicesByService(slices.Informer()); err != nil {
		return err
	}
	dirty := newChanged()
	o.Informers.Start() // after asking for the informers: Start starts only those
	release, err := sharedinformers.Watch(ctx, dirty.handler(serviceKeyOf), svcInformer.Informer())
	if err != nil {
		return err
	}
	defer release()
	releaseSlices, err := sharedinformers.Watch(ctx, dirty.handler(services.SliceServiceKey), slices.Informer())
	if err != nil {
		return err
	}
	defer releaseSlices()
	// Of the pods, only this node's with host ports change the maps.
	releasePods, err := sharedinformers.Watch(ctx, cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool { return services.HasHostPorts(obj, o.Node.Name) },
		Handler:    dirty.handler(func(any) string { return services.HostPortsKey }),
	}, pods.Informer())
	if err != nil {
		return err
	}
	defer releasePods()
	go func() {
		// Idle NodePort flows go after 10 minutes (upstream's TCP established timeout is
		// longer, but the table is also an LRU: nothing live is lost to this).
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Minute):
			}
			if _, err := services.GCConntrack(d.Maps.CT, d.Maps.CT6, programs.Monotonic(), 10*time.Minute); err != nil {
				log.Warn("conntrack GC", "err", err)
			}
		}
	}()
	nodeAddrs := o.Node.Addrs()
	health := newHealthServer(nodeAddrs, log)
	defer health.Close(ctx)
	log.Info("service proxy running", "pins", o.PinDir, "cgroup", o.CgroupPath, "nodePortUplink", o.Uplink)
	if len(d.Resized) > 0 {
		log.Info("service maps resized: refilled from the API", "maps", d.Resized)
	}
	programmer := &services.Programmer{Maps: d.Maps}
	fullMsg := "" // the last full-maps message logged
	compiler := &services.Compiler{Node: o.Node, IDs: ids}
	full := true           // the first sync and every resync rewrite everything; changes write their delta
	var took time.Duration // how long the last sync of changes ran (not a resync)
	var done time.Time     // and when it ended
	var lastFull time.Time // when everything was last rewritten: at least every Resync, even under constant churn
	// The Services the node serves a health check for: a change to one (or to one that now
	// has one) recounts them, as a whole sync does.
	checked := map[string]bool{}
	healthChecked := func(keys []string) bool {
		for _, key := range keys {
			ns, name := splitKey(key)
			if svc, err := svcInformer.Lister().Services(ns).Get(name); checked[key] || (err == nil && hasHealthCheck(svc)) {
				return true
			}
		}
		return false
	}
	check := time.NewTicker(o.CheckPeriod)
	defer check.Stop()
	for {
		start := time.Now()
		// What changed since the last sync is taken before anything is read, so a change
		// made while this sync runs is in the next.
		keys := dirty.take()
		applied := false
		if !full {
			// The changed Services alone (see Programmer.ApplyChanges); anything it cannot
			// do alone falls through to the whole state.
			changes := make([]services.ServiceChange, 0, len(keys))
			for _, key := range keys {
				if key == services.HostPortsKey {
					podList, _ := pods.Lister().List(labels.Everything())
					changes = append(changes, compiler.RecompileHostPorts(podList))
					continue
				}
				ns, name := splitKey(key)
				svc, _ := svcInformer.Lister().Services(ns).Get(name)
				changes = append(changes, compiler.Recompile(key, svc, slicesOf(slices.Informer(), key)))
			}
			if applied, err = programmer.ApplyChanges(changes); err != nil {
				return fmt.Errorf("writing the service maps: %w", err)
			}
		}
		var svcs []*corev1.Service
		var eps []*discoveryv1.EndpointSlice
		listed := !applied || healthChecked(keys)
		if listed {
			svcs, _ = svcInformer.Lister().List(labels.Everything())
			eps, _ = slices.Lister().List(labels.Everything())
		}
		if !applied {
			podList, _ := pods.Lister().List(labels.Everything())
			compiled := compiler.Compile(svcs, eps, podList)
			if err := programmer.Apply(compiled, full); err != nil {
				// Not a log line: a table that cannot be written is a proxy that is down (the
				// supervisor restarts it and the node says so).
				return fmt.Errorf("writing the service maps: %w", err)
			}
		}
		// A full map is not a failure of the Services that fit: they are programmed, the
		// rest are named once per change in the log, and metrics and the Node condition say so.
		if msg := programmer.Status.Full(); msg != fullMsg {
			if msg != "" {
				log.Error(msg)
			} else if fullMsg != "" {
				log.Info("service maps have room again: every frontend is programmed")
			}
			fullMsg = msg
		}
		if full {
			lastFull = start
		}
		if len(nodeAddrs) > 0 && listed {
			checks := services.HealthChecks(svcs, eps, o.Node.Name)
			health.Sync(checks)
			clear(checked)
			for _, c := range checks {
				checked[c.Namespace+"/"+c.Name] = true
			}
		}
		done = time.Now()
		if o.Synced != nil {
			status := programmer.Status
			status.Sync, status.Took = services.SyncWhole, done.Sub(start)
			switch {
			case full:
				status.Sync = services.SyncResync
			case applied:
				status.Sync = services.SyncChanges
			}
			o.Synced(status)
		}
		// The burst throttle below weighs syncs that changes caused. A resync rewrites
		// everything (hundreds of milliseconds at 10,000 Services) on a timer: the change
		// after it must not wait as long again.
		took = done.Sub(start)
		if full {
			took = 0
		}
		// Wait for a change or the resync; the periodic check does not sync.
		for waiting := true; waiting; {
			waiting = false
			select {
			case <-ctx.Done():
				return nil
			case <-dirty.kick:
				// Coalesce a burst (a Deployment's endpoints change together), and in a long
				// one (thousands of Services created) spend at most half the time syncing; a
				// change after a quiet spell waits only the 20 ms.
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(max(20*time.Millisecond, took-time.Since(done))):
				}
				full = time.Since(lastFull) >= o.Resync
			case <-time.After(o.Resync - time.Since(done)):
				full = true
			case <-check.C:
				if err := d.Check(); err != nil {
					return err
				}
				waiting = true
			}
		}
	}
}
