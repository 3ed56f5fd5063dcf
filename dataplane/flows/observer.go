package flows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// Names of the pinned maps (bpf/lib/flow.h).
const (
	RingMap   = "skiff_flows"
	ConfigMap = "skiff_flow_config"
	LostMap   = "skiff_flow_lost"
)

// ReadInterval is how long an event can wait in the ring before the agent reads it (the
// programs wake the reader early only when a batch waits).
const ReadInterval = 100 * time.Millisecond

// DefaultCapacity is how many flows a node keeps (Hubble's default ring holds 4,095).
const DefaultCapacity = 4096

// Observer reads a node's flow events, describes them and keeps the newest.
type Observer struct {
	// PinDir is the node's pin directory, where the programs pin the ring.
	PinDir string
	// Node names the node in every flow.
	Node  string
	Names Names
	// Capacity is how many flows are kept (DefaultCapacity when 0).
	Capacity int
	Log      *slog.Logger

	once  sync.Once
	store *store

	mu       sync.Mutex
	counts   map[countKey]uint64
	bad      uint64
	lostMap  *ebpf.Map
	config   *ebpf.Map
	disabled bool
}

type countKey struct{ typ, verdict, direction, policy string }

func (o *Observer) init() {
	o.once.Do(func() {
		c := o.Capacity
		if c <= 0 {
			c = DefaultCapacity
		}
		o.store = newStore(c)
		o.counts = map[countKey]uint64{}
	})
}

// Run reads the ring until ctx ends. The ring is pinned by whichever of the node's programs
// load first; until it is, Run waits. Events are on while Run reads.
func (o *Observer) Run(ctx context.Context) error {
	o.init()
	ring, err := o.waitForRing(ctx)
	if ring == nil {
		return err
	}
	defer ring.Close()
	config, err := ebpf.LoadPinnedMap(filepath.Join(o.PinDir, ConfigMap), nil)
	if err != nil {
		return fmt.Errorf("flow events: %w", err)
	}
	defer config.Close()
	lost, err := ebpf.LoadPinnedMap(filepath.Join(o.PinDir, LostMap), nil)
	if err != nil {
		return fmt.Errorf("flow events: %w", err)
	}
	o.mu.Lock()
	o.lostMap, o.config = lost, config
	on := !o.disabled
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.lostMap, o.config = nil, nil
		o.mu.Unlock()
		_ = lost.Close()
	}()
	if err := setEnabled(config, on); err != nil {
		return err
	}
	// No reader, no events: what the programs would write could not be read.
	defer func() { _ = setEnabled(config, false) }()
	rd, err := ringbuf.NewReader(ring)
	if err != nil {
		return fmt.Errorf("flow events: %w", err)
	}
	go func() {
		<-ctx.Done()
		_ = rd.Close()
	}()
	boot := bootWallTime()
	if o.Log != nil {
		o.Log.Info("flow events on", "ring", filepath.Join(o.PinDir, RingMap), "kept", len(o.store.ring))
	}
	var rec ringbuf.Record
	for {
		// The programs wake the reader per batch: what waits is read at least this often.
		rd.SetDeadline(time.Now().Add(ReadInterval))
		if err := rd.ReadInto(&rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if errors.Is(err, os.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("reading flow events: %w", err)
		}
		e, err := Decode(rec.RawSample)
		if err != nil {
			o.mu.Lock()
			o.bad++
			o.mu.Unlock()
			continue
		}
		f := Describe(e, o.Names, o.Node, boot)
		o.count(&f)
		o.store.add(f)
	}
}

func (o *Observer) waitForRing(ctx context.Context) (*ebpf.Map, error) {
	path := filepath.Join(o.PinDir, RingMap)
	for {
		m, err := ebpf.LoadPinnedMap(path, nil)
		if err == nil {
			return m, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("flow events: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(time.Second):
		}
	}
}

// SetEnabled turns the programs' events on or off (`make bench` measures both).
func (o *Observer) SetEnabled(on bool) error {
	o.init()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.disabled = !on
	if o.config == nil {
		return nil
	}
	return setEnabled(o.config, on)
}

func setEnabled(config *ebpf.Map, on bool) error {
	v := uint64(0)
	if on {
		v = 1
	}
	if err := config.Put(uint32(0), v); err != nil {
		return fmt.Errorf("turning flow events on or off: %w", err)
	}
	return nil
}

// Last is the newest n flows filter picks, oldest first.
func (o *Observer) Last(n int, filter Filter) []Flow {
	o.init()
	return o.store.last(n, filter)
}

// Follow delivers the flows filter picks from now on until cancel is called; lost says how
// many were not delivered because the receiver fell behind.
func (o *Observer) Follow(filter Filter) (flows <-chan Flow, lost func() uint64, cancel func()) {
	o.init()
	fl, cancel := o.store.follow(filter, 1024)
	return fl.ch, fl.lost.Load, cancel
}

// bootWallTime is the wall time at which CLOCK_MONOTONIC read zero.
func bootWallTime() time.Time {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Now().Add(-time.Duration(ts.Nano()))
}

func (o *Observer) count(f *Flow) {
	k := countKey{typ: f.Type, verdict: f.Verdict, direction: f.Direction, policy: strings.Join(f.Policies, ",")}
	o.mu.Lock()
	o.counts[k]++
	o.mu.Unlock()
}

var (
	flowsDesc = prometheus.NewDesc("skiff_flows_total", "Flow events by type (policy-verdict, translation, drop), verdict (FORWARDED, DROPPED, AUDIT), direction (INGRESS, EGRESS of a policed pod) and the policies that decided.",
		[]string{"type", "verdict", "direction", "policy"}, nil)
	flowsLostDesc = prometheus.NewDesc("skiff_flow_events_lost_total", "Flow events lost: where=ring when the programs found the ring buffer full, where=follower when a reader of `skiff observe -f` fell behind.",
		[]string{"where"}, nil)
	flowsBadDesc = prometheus.NewDesc("skiff_flow_events_undecodable_total", "Flow events the agent could not decode (a program and agent of different builds).", nil, nil)
)

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	ch <- flowsDesc
	ch <- flowsLostDesc
	ch <- flowsBadDesc
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	o.init()
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, n := range o.counts {
		ch <- prometheus.MustNewConstMetric(flowsDesc, prometheus.CounterValue, float64(n), k.typ, k.verdict, k.direction, k.policy)
	}
	ch <- prometheus.MustNewConstMetric(flowsLostDesc, prometheus.CounterValue, float64(o.ringLostLocked()), "ring")
	ch <- prometheus.MustNewConstMetric(flowsLostDesc, prometheus.CounterValue, float64(o.store.followerLost.Load()), "follower")
	ch <- prometheus.MustNewConstMetric(flowsBadDesc, prometheus.CounterValue, float64(o.bad))
}

// RingLost is how many events the programs could not write because the ring was full.
func (o *Observer) RingLost() uint64 {
	o.init()
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ringLostLocked()
}

func (o *Observer) ringLostLocked() uint64 {
	if o.lostMap == nil {
		return 0
	}
	var perCPU []uint64
	if err := o.lostMap.Lookup(uint32(0), &perCPU); err != nil {
		return 0
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n
}
