// Package metrics serves metrics.k8s.io/v1beta1 — the resource metrics API that `kubectl top`
// and the HPA controller read — from inside the API server, where upstream clusters run
// metrics-server as an add-on. A scraper reads every node agent's /metrics/resource once per
// resolution period; a container's CPU usage is the rate between its last two samples and its
// memory the working set of the latest, as metrics-server computes them.
package metrics

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// ContainerKey names a container on a node.
type ContainerKey struct{ Namespace, Pod, Container string }

// Sample is one reading of a cumulative CPU counter and a memory gauge.
type Sample struct {
	// CPU is core-seconds used since the container (or node) started, read at CPUTime.
	CPU     float64
	CPUTime time.Time
	// Memory is the working set in bytes.
	Memory uint64
	// Start is when the container started: a different start means the counter restarted.
	Start time.Time
}

// Scrape is what one read of a node's /metrics/resource gave.
type Scrape struct {
	Node       *Sample
	Containers map[ContainerKey]Sample
}

// Usage is a node's, pod's or container's usage over a window ending at Timestamp.
type Usage struct {
	Timestamp time.Time
	Window    time.Duration
	CPU       resource.Quantity // cores, in milli-units
	Memory    resource.Quantity // bytes
}

// ContainerUsage is one container's usage.
type ContainerUsage struct {
	Name string
	Usage
}

type nodeState struct{ prev, cur Scrape }

// Store keeps each node's last two scrapes. It is safe for concurrent use.
type Store struct {
	mu    sync.RWMutex
	nodes map[string]*nodeState
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{nodes: map[string]*nodeState{}} }

// Ingest records a node's scrape; the one before it becomes the rate's start.
func (s *Store) Ingest(node string, sc Scrape) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.nodes[node]
	if st == nil {
		st = &nodeState{}
		s.nodes[node] = st
	}
	st.prev, st.cur = st.cur, sc
}

// Retain forgets every node not in keep (deleted nodes).
func (s *Store) Retain(keep map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := range s.nodes {
		if !keep[n] {
			delete(s.nodes, n)
		}
	}
}

// Node is a node's usage, if two scrapes of it give a rate.
func (s *Store) Node(name string) (Usage, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := s.nodes[name]
	if st == nil || st.prev.Node == nil || st.cur.Node == nil {
		return Usage{}, false
	}
	return rate(*st.prev.Node, *st.cur.Node, false)
}

// Pods returns the usage of every pod in namespace ("" for all) whose every container has a
// rate, keyed by namespace/name. A pod that restarted a container within the window, or
// whose container has only one sample yet, is left out rather than reported low.
func (s *Store) Pods(namespace string) map[string][]ContainerUsage {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string][]ContainerUsage{}
	bad := map[string]bool{}
	for _, st := range s.nodes {
		for k, cur := range st.cur.Containers {
			if namespace != "" && k.Namespace != namespace {
				continue
			}
			key := k.Namespace + "/" + k.Pod
			prev, ok := st.prev.Containers[k]
			var u Usage
			if ok {
				u, ok = rate(prev, cur, true)
			}
			if !ok {
				bad[key] = true
				continue
			}
			out[key] = append(out[key], ContainerUsage{Name: k.Container, Usage: u})
		}
	}
	for k := range bad {
		delete(out, k)
	}
	return out
}

// rate is the CPU used between two samples per second of wall time, and the later memory.
// No rate comes from samples out of order, from a counter that went back, or (for a
// container) from two different starts.
func rate(prev, cur Sample, container bool) (Usage, bool) {
	dt := cur.CPUTime.Sub(prev.CPUTime)
	if dt <= 0 || cur.CPU < prev.CPU || (container && !cur.Start.Equal(prev.Start)) {
		return Usage{}, false
	}
	cores := (cur.CPU - prev.CPU) / dt.Seconds()
	return Usage{Timestamp: cur.CPUTime, Window: dt,
		CPU:    *resource.NewMilliQuantity(int64(cores*1000+0.5), resource.DecimalSI),
		Memory: *resource.NewQuantity(int64(cur.Memory), resource.BinarySI)}, true
}
