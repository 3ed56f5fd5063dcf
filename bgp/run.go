package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/bgp/bfd"
	"github.com/skiff-sh/skiff/bgp/config"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
)

// ConfigMapName is the cluster-wide BGP configuration in kube-system.
const ConfigMapName = "skiff-bgp"

// Informers are the watches the speaker reads, each from the agent's shared factory: the
// Nodes of the mesh, and the Services and EndpointSlices whose LoadBalancer addresses it
// advertises.
type Informers struct {
	Nodes          coreinformers.NodeInformer
	Services       coreinformers.ServiceInformer
	EndpointSlices discoveryinformers.EndpointSliceInformer
	// Start starts the informers asked for so far (sharedinformers.Shared.Start).
	Start func()
}

// Options configure the node's routing.
type Options struct {
	NodeName string
	// Overrides are the agent's --bgp-* flags.
	Overrides config.Overrides
	// APIAddress serves GoBGP's gRPC API for `skiff bgp` (127.0.0.1:50051); empty: none.
	APIAddress string
	// Kernel installs learned routes (the calling namespace when zero).
	Kernel Kernel
	// SyncPeriod re-checks the kernel even without BGP events (10 s).
	SyncPeriod time.Duration
	// Informers are the watches Run reads, from the agent's shared factory.
	Informers Informers
	// Started, if set, receives the speaker once it runs (metrics read it).
	Started func(*Speaker)
	// BFDStateFile keeps the BFD sessions across the agent's restarts (see bfd.Manager);
	// empty keeps none.
	BFDStateFile string
}

// Run keeps the node's BGP speaker and its kernel routes in line with the cluster until ctx
// ends: peers from the configuration and the node mesh, the node's pod CIDR advertised, and
// the learned blocks installed as proto-bgp routes.
func Run(ctx context.Context, client kubernetes.Interface, o Options, log *slog.Logger) error {
	// Everything started here ends when Run returns, so a restarted speaker does not run
	// beside the remains of the last one.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.SyncPeriod == 0 {
		o.SyncPeriod = 10 * time.Second
	}
	// Nodes come from the agent's shared factory; the one ConfigMap is watched by name.
	nodes := o.Informers.Nodes
	// LoadBalancer addresses are advertised from the Services and, for externalTrafficPolicy
	// Local, where their endpoints are.
	services, slices := o.Informers.Services, o.Informers.EndpointSlices
	cmFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(metav1.NamespaceSystem),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.FieldSelector = "metadata.name=" + ConfigMapName }))
	cms := cmFactory.Core().V1().ConfigMaps()
	kick := make(chan struct{}, 1)
	watched := []cache.SharedIndexInformer{nodes.Informer(), cms.Informer(), services.Informer(), slices.Informer()}
	o.Informers.Start() // after asking for the informers: Start starts only those
	cmFactory.Start(ctx.Done())
	release, err := sharedinformers.Watch(ctx, sharedinformers.Trigger(kick), watched...)
	if err != nil {
		return err
	}
	defer release()
	secret := func(name, key string) (string, error) {
		s, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := s.Data[key]
		if !ok {
			return "", fmt.Errorf("secret kube-system/%s has no key %q", name, key)
		}
		return string(v), nil
	}
	resolve := func() (config.Config, *corev1.Node, []*corev1.Node, error) {
		self, err := nodes.Lister().Get(o.NodeName)
		if err != nil {
			return config.Config{}, nil, nil, err
		}
		cm, _ := cms.Lister().ConfigMaps(metav1.NamespaceSystem).Get(ConfigMapName)
		cfg, err := config.Resolve(cm, self, secret, o.Overrides)
		if err != nil {
			return config.Config{}, nil, nil, err
		}
		all, err := nodes.Lister().List(labels.Everything())
		return cfg, self, all, err
	}

	// The speaker starts once the node is known (router id = its address): at the informer
	// event that brings it, since a new node's routes wait on this start.
	var cfg config.Config
	for {
		c, _, _, err := resolve()
		if err == nil {
			cfg = c
			break
		}
		log.Debug("BGP waiting for configuration", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-kick:
		case <-time.After(5 * time.Second):
		}
	}
	// Routes a previous speaker installed are still in the kernel: the agent restarted, not
	// the node, and this node still forwards to what it learned. Its peers are told so.
	kept, err := o.Kernel.Installed()
	if err != nil {
		return err
	}
	global := Global{ASN: cfg.ASN, RouterID: cfg.RouterID, IPv4: cfg.IPv4, IPv6: cfg.IPv6, ListenPort: cfg.ListenPort, APIAddress: o.APIAddress, GracefulRestart: cfg.GracefulRestart,
		Restarting: len(kept) > 0 && cfg.GracefulRestart.Enabled}
	sp, err := Start(ctx, global, log)
	if err != nil {
		return err
	}
	if o.Started != nil {
		o.Started(sp)
	}
	log.Info("BGP speaker started", "asn", cfg.ASN, "routerID", cfg.RouterID, "ipv6", cfg.IPv6, "nodeMesh", cfg.NodeMesh, "peers", len(cfg.Peers),
		"restarting", global.Restarting, "keptRoutes", len(kept))

	r := &reconciler{sp: sp, kernel: o.Kernel, self: []netip.Addr{cfg.IPv4, cfg.IPv6}, started: time.Now(), log: log, kicks: make(chan struct{}, 1),
		staleFor: min(cfg.GracefulRestart.RestartTime, 30*time.Second), lost: map[netip.Addr]bool{}}
	// BFD beside every session: a lost peer's session is reset at once, and its routes
	// leave the kernel without the graceful-restart wait.
	// One BFD per address family (RFC 5881): the IPv4 one from the node's IPv4 address for
	// its IPv4 peers, the IPv6 one from its IPv6 address for its IPv6 peers.
	var sessions [2]*bfd.Manager // [0] IPv4, [1] IPv6
	lost := make(chan bfd.Event, 64)
	bfdErrs := [2]<-chan error{}
	if cfg.BFD.Enabled {
		bcfg := bfd.Config{DesiredMinTx: cfg.BFD.TransmitInterval, RequiredMinRx: cfg.BFD.TransmitInterval, DetectMult: cfg.BFD.Multiplier}
		for i, local := range []netip.Addr{cfg.IPv4, cfg.IPv6} {
			if !local.IsValid() {
				continue
			}
			stateFile := o.BFDStateFile
			if i == 1 && stateFile != "" {
				stateFile += "6"
			}
			sessions[i], bfdErrs[i] = processBFD(local, bcfg, stateFile, log.With("protocol", "bfd", "local", local))
			if sessions[i].Config() != bcfg {
				log.Warn("BFD settings changed; restart the agent to apply them", "running", sessions[i].Config(), "configured", bcfg)
			}
			sessions[i].SetHandler(func(ev bfd.Event) {
				if ev.Lost() {
					select {
					case lost <- ev:
					default:
					}
				}
			})
			defer sessions[i].SetHandler(nil)
		}
	}
	watchErr := make(chan error, 1)
	go func() {
		if err := sp.Watch(ctx, r.kick); err != nil && ctx.Err() == nil {
			watchErr <- err
		}
	}()
	go r.loop(ctx, o.SyncPeriod)

	peered := false // the speaker has been given its peers
	for {
		c, self, all, err := resolve()
		switch {
		case apierrors.IsNotFound(err):
			// The node was deleted: stop attracting traffic for its pods.
			if err := sp.Advertise(ctx); err != nil {
				log.Warn("BGP withdraw", "err", err)
			}
		case err != nil:
			log.Warn("BGP configuration", "err", err)
		default:
			if c.ASN != global.ASN || c.RouterID != global.RouterID || c.IPv4 != global.IPv4 || c.IPv6 != global.IPv6 || c.ListenPort != global.ListenPort {
				log.Warn("BGP global settings changed; restart the agent to apply them", "asn", c.ASN, "routerID", c.RouterID)
			}
			// The route goes into the RIB before any session exists: a peer that helped this
			// node through a restart drops the stale copy at our End-of-RIB, which must not
			// come before the route itself.
			svcs, _ := services.Lister().List(labels.Everything())
			eps, _ := slices.Lister().List(labels.Everything())
			intent := Want(c, self, all, svcs, eps)
			if err := sp.Advertise(ctx, intent.Advertised...); err != nil {
				log.Warn("BGP advertise", "err", err)
			}
			peers := intent.Peers
			for i, m := range sessions {
				if m == nil {
					continue
				}
				var addrs []netip.Addr
				for _, p := range peers {
					// BFD runs from the node's address of each family, which a link-local
					// peer does not answer: no BFD for link-local peers (yet).
					if p.Address.Is6() == (i == 1) && p.Address.Zone() == "" {
						addrs = append(addrs, p.Address)
					}
				}
				m.SetPeers(addrs)
				if !peered {
					// After a restart, BGP waits for the resumed BFD sessions (see
					// bfd.Manager.AwaitResumed); the peers keep our routes meanwhile.
					if late := m.AwaitResumed(ctx, resumeWait); len(late) > 0 {
						log.Warn("BFD sessions not back after the restart; opening BGP anyway", "peers", late, "waited", resumeWait)
					}
				}
			}
			if err := sp.SetPeers(ctx, peers); err != nil {
				log.Warn("BGP peers", "err", err)
			}
			peered = true
			r.setOwn(append([]netip.Prefix(nil), intent.Advertised...), len(peers))
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-watchErr:
			// Without the watch no learned route reaches the kernel: fail, and let the
			// supervisor restart the speaker (releasing its listeners first).
			sp.srv.Stop()
			return fmt.Errorf("BGP watch: %w", err)
		case err := <-bfdErrs[0]:
			sp.srv.Stop()
			return fmt.Errorf("BFD: %w", err)
		case err := <-bfdErrs[1]:
			sp.srv.Stop()
			return fmt.Errorf("BFD (IPv6): %w", err)
		case ev := <-lost:
			peer := ev.Peer
			states, err := sp.PeerStates(ctx)
			if st, ok := states[peer]; err == nil && ok && st.State != api.PeerState_ESTABLISHED && st.GracefulRestart && !ev.RemoteControlPlaneIndependent {
				// The session had already ended and the peer's BFD shares its control plane
				// (C bit clear): this is the peer restarting, which graceful restart covers
				// (RFC 5882 4.3.2; FRR's check-control-plane-failure).
				log.Info("BFD loss ignored: the peer is restarting (graceful restart)", "peer", peer)
				continue
			}
			// The peer is gone: do not wait for the hold timer, and do not keep its routes
			// as for a restart.
			r.markLost(peer)
			if err := sp.ResetPeer(ctx, peer, "BFD: peer lost"); err != nil {
				log.Warn("BGP reset after BFD loss", "peer", peer, "err", err)
			} else {
				log.Info("BGP session reset: BFD lost the peer", "peer", peer)
			}
			r.kick()
		case <-kick:
		case <-time.After(30 * time.Second):
		}
	}
}

// resumeWait bounds how long a restarted speaker waits for its BFD sessions before it
// opens BGP: a peer that noticed the restart sends Down, and the three-way handshake
// that follows runs at its slow Down-state interval (a second or more, RFC 5880 6.8.3).
const resumeWait = 5 * time.Second

// reconciler syncs kernel routes from the RIB, coalescing bursts of BGP events.
type reconciler struct {
	sp     *Speaker
	kernel Kernel
	self   []netip.Addr // the node's addresses, one per family
	log    *slog.Logger

	mu sync.Mutex
	// own is what the node originates (its pod CIDR, the LoadBalancer addresses it
	// advertises), never installed from BGP.
	own    []netip.Prefix
	npeers int
	// configured is set once the peers are known: before that, "every peer established"
	// would be true of none.
	configured bool
	started    time.Time
	staleFor   time.Duration
	// establishedSince is when every peer was first seen established together.
	establishedSince time.Time
	converged        bool
	kicks            chan struct{}
	// lastUp is when each peer was last seen established; restartTime how long a peer that
	// dropped keeps its routes in the kernel (see KeepRestarting).
	lastUp      map[netip.Addr]time.Time
	restartTime time.Duration
	// lost are peers BFD declared gone since their session was last established: their
	// routes go at once rather than being kept as a restarting peer's.
	lost map[netip.Addr]bool
}

func (r *reconciler) markLost(peer netip.Addr) {
	r.mu.Lock()
	r.lost[peer] = true
	r.mu.Unlock()
}

func (r *reconciler) setOwn(p []netip.Prefix, npeers int) {
	r.mu.Lock()
	r.own, r.npeers, r.configured = p, npeers, true
	r.mu.Unlock()
	r.kick()
}

func (r *reconciler) kick() {
	select {
	case r.kicks <- struct{}{}:
	default:
	}
}

func (r *reconciler) loop(ctx context.Context, period time.Duration) {
	r.kick()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kicks:
			// Coalesce: a restarting peer's withdraw and re-announce arrive together.
			time.Sleep(50 * time.Millisecond)
		case <-time.After(period):
		}
		if err := r.sync(ctx); err != nil {
			r.log.Warn("BGP route sync", "err", err)
		}
	}
}

// sync installs what the RIB calls for. Until the speaker has converged after a start
// (every peer established and past its End-of-RIB, or the graceful-restart window has
// passed), routes it no longer sees are kept: they may be a previous run's, still right,
// about to be relearned.
func (r *reconciler) sync(ctx context.Context) error {
	paths, err := r.sp.Paths(ctx)
	if err != nil {
		return err
	}
	states, err := r.sp.PeerStates(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	own, npeers := r.own, r.npeers
	if !r.converged {
		// Converged: every peer established and done sending its table (End-of-RIB, where
		// graceful restart is negotiated), or established for 5 s when a peer sends none.
		all := r.configured && len(states) >= npeers
		complete := true
		for _, s := range states {
			all = all && s.State == api.PeerState_ESTABLISHED
			complete = complete && (!s.GracefulRestart || s.EndOfRIB)
		}
		switch {
		case !all:
			r.establishedSince = time.Time{}
		case r.establishedSince.IsZero():
			r.establishedSince = time.Now()
		}
		up := time.Since(r.establishedSince)
		if (!r.establishedSince.IsZero() && ((complete && up >= 500*time.Millisecond) || up >= 5*time.Second)) || time.Since(r.started) >= r.staleFor {
			r.converged = true
			r.log.Info("BGP converged; stale routes are removed from now on", "after", time.Since(r.started).Round(time.Millisecond))
		}
	}
	keepStale := !r.converged
	if r.lastUp == nil {
		r.lastUp = map[netip.Addr]time.Time{}
	}
	restarting := map[netip.Addr]bool{}
	for addr, st := range states {
		switch {
		case st.State == api.PeerState_ESTABLISHED:
			r.lastUp[addr] = time.Now()
			delete(r.lost, addr)
		case !r.lastUp[addr].IsZero() && time.Since(r.lastUp[addr]) < r.restartTime && !r.lost[addr]:
			restarting[addr] = true
		}
	}
	for addr := range r.lastUp {
		if _, ok := states[addr]; !ok {
			delete(r.lastUp, addr) // removed from the configuration: its routes go now
		}
	}
	r.mu.Unlock()
	var owns []netip.Prefix
	for _, p := range own {
		if p.IsValid() {
			owns = append(owns, p)
		}
	}
	want := Select(paths, owns, r.self...)
	if len(restarting) > 0 {
		installed, err := r.kernel.Installed()
		if err != nil {
			return err
		}
		want = KeepRestarting(want, installed, restarting)
	}
	err = r.kernel.Sync(want, keepStale)
	if keepStale || len(restarting) > 0 {
		// Check again soon, so the window ends on time without waiting for an event.
		go func() { time.Sleep(time.Second); r.kick() }()
	}
	return err
}

// processBFD returns the process's BFD manager for local, starting it on first use. It is
// never stopped: it runs until the process exits, so that when an agent stops, its peers
// see the BGP connections close (and start graceful restart) before its BFD falls silent,
// and do not take the silence for a lost node. The channel reports the manager's failure;
// the next call after one starts a new manager.
func processBFD(local netip.Addr, cfg bfd.Config, stateFile string, log *slog.Logger) (*bfd.Manager, <-chan error) {
	bfdManagers.Lock()
	defer bfdManagers.Unlock()
	if bfdManagers.m == nil {
		bfdManagers.m = map[netip.Addr]*runningBFD{}
	}
	if r, ok := bfdManagers.m[local]; ok {
		select {
		case <-r.done:
		default:
			return r.m, r.err
		}
	}
	m := bfd.NewManager(local, cfg, log, nil)
	m.StateFile = stateFile
	r := &runningBFD{m: m, done: make(chan struct{}), err: make(chan error, 1)}
	bfdManagers.m[local] = r
	go func() {
		defer close(r.done)
		if err := r.m.Run(context.Background()); err != nil {
			r.err <- err
		}
	}()
	return r.m, r.err
}

type runningBFD struct {
	m    *bfd.Manager
	done chan struct{}
	err  chan error
}

var bfdManagers struct {
	sync.Mutex
	m map[netip.Addr]*runningBFD
}
