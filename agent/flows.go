package agent

import (
	"io/fs"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/dataplane/flows"
	"github.com/skiff-sh/skiff/dataplane/loader"
	"github.com/skiff-sh/skiff/dataplane/netpol"
	"github.com/skiff-sh/skiff/dataplane/policy"
)

// flowNames names the node's flow events from what the agent already holds: pods by address
// from the policy enforcer's view of the cluster, policies from its last compilation,
// Services from the pinned service maps, and the pod of a socket's cgroup from the node's
// pod cgroups. Each source may be missing (policy or proxy turned off): flows then show
// addresses.
type flowNames struct {
	enforcer   *netpol.Enforcer
	proxy      *atomic.Pointer[loader.Dataplane]
	pods       func() []*corev1.Pod // the node's
	cgroupRoot string               // the directory holding every pod cgroup

	mu       sync.Mutex
	cgroups  map[uint64]types.UID // cgroup id (its directory's inode) → pod
	scanned  time.Time
	services map[serviceKey]string
	cleared  time.Time
}

type serviceKey struct {
	frontend netip.AddrPort
	proto    uint8
}

var _ flows.Names = (*flowNames)(nil)

func (n *flowNames) PodAt(addr netip.Addr) (flows.Pod, bool) {
	if n.enforcer == nil {
		return flows.Pod{}, false
	}
	ref, labels, ok := n.enforcer.PodAt(addr)
	return flows.Pod{Namespace: ref.Namespace, Name: ref.Name, Labels: labels}, ok
}

func (n *flowNames) Policy(i uint32) string {
	if n.enforcer == nil {
		return ""
	}
	return n.enforcer.PolicyName(i)
}

func (n *flowNames) Isolating(endpoint netip.Addr, dir uint8, audit bool) []string {
	if n.enforcer == nil {
		return nil
	}
	return n.enforcer.Isolating(endpoint, policy.Direction(dir), audit)
}

func (n *flowNames) TierRule(rank uint32) (string, string) {
	if n.enforcer == nil {
		return "", ""
	}
	return n.enforcer.TierRule(rank)
}

// Service reads the frontend's name from the service maps, remembered for a minute (a
// translation is an event per connection).
func (n *flowNames) Service(frontend netip.AddrPort, proto uint8) string {
	d := n.proxy.Load()
	if d == nil {
		return ""
	}
	k := serviceKey{frontend, proto}
	n.mu.Lock()
	if time.Since(n.cleared) > time.Minute {
		n.services, n.cleared = map[serviceKey]string{}, time.Now()
	}
	name, ok := n.services[k]
	n.mu.Unlock()
	if ok {
		return name
	}
	e, found, err := d.Maps.Lookup(frontend, corev1.Protocol(flows.ProtocolName(proto)))
	if err != nil || !found {
		return ""
	}
	// Entry names are namespace/name:port; a flow names the Service.
	name, _, _ = strings.Cut(e.Name, ":")
	n.mu.Lock()
	n.services[k] = name
	n.mu.Unlock()
	return name
}

// PodOfCgroup finds the pod cgroup holding cgroup id, scanning the pod cgroups again (at
// most every 5 s) when id is one it has not seen.
func (n *flowNames) PodOfCgroup(id uint64) (flows.Pod, bool) {
	n.mu.Lock()
	uid, ok := n.cgroups[id]
	if !ok && time.Since(n.scanned) > 5*time.Second {
		n.cgroups, n.scanned = scanPodCgroups(n.cgroupRoot), time.Now()
		uid, ok = n.cgroups[id]
	}
	n.mu.Unlock()
	if !ok || n.pods == nil {
		return flows.Pod{}, false
	}
	for _, p := range n.pods() {
		if p.UID == uid {
			return flows.Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels}, true
		}
	}
	return flows.Pod{}, false
}

// scanPodCgroups maps every cgroup at or under a pod cgroup ("pod<uid>", as agent/cgroups
// names them) to the pod's UID.
func scanPodCgroups(root string) map[uint64]types.UID {
	out := map[uint64]types.UID{}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		var uid string
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			if u, ok := strings.CutPrefix(part, "pod"); ok && len(u) >= 32 {
				uid = u
				break
			}
		}
		if uid == "" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			out[st.Ino] = types.UID(uid)
		}
		return nil
	})
	return out
}
