package cpumanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"
)

// PolicyStatic is the one policy Manager runs; "none" (the default) is no Manager at all.
const PolicyStatic = "static"

// checkpoint is the file's content, in the kubelet's format (without its checksum: the file
// is replaced by rename, never seen half written).
type checkpoint struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
}

// Manager keeps the static policy's assignments, saved to its checkpoint at every change.
// It is safe for concurrent use.
type Manager struct {
	topo Topology
	file string

	mu    sync.Mutex
	state State
}

// New starts the static policy on topo with the reserved CPUs, restoring the assignments in
// file (created at the first change). A checkpoint of another policy, or one that gives out
// CPUs now reserved or gone, is refused, as the kubelet refuses it: the node's pods must be
// drained and the file removed.
func New(topo Topology, reserved cpuset.CPUSet, file string) (*Manager, error) {
	all := topo.All()
	switch {
	case reserved.IsEmpty():
		return nil, errors.New("the static CPU manager policy needs CPUs reserved for the node's daemons: set --reserved-cpus, or cpu in --kube-reserved or --system-reserved")
	case !reserved.IsSubsetOf(all):
		return nil, fmt.Errorf("reserved CPUs %s are not all among the node's CPUs %s", reserved, all)
	case reserved.Equals(all):
		return nil, fmt.Errorf("reserved CPUs %s are every CPU of the node: none is left to give out", reserved)
	}
	m := &Manager{topo: topo, file: file, state: State{Reserved: reserved, Pods: map[string]Assignment{}}}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	refuse := func(why string) error {
		return fmt.Errorf("CPU manager checkpoint %s: %s; drain the node's pods and remove the file to start over", file, why)
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, refuse(err.Error())
	}
	if cp.PolicyName != PolicyStatic {
		return nil, refuse(fmt.Sprintf("it is policy %q's, not %q's", cp.PolicyName, PolicyStatic))
	}
	givable := all.Difference(reserved)
	owner := map[int]string{}
	for uid, containers := range cp.Entries {
		a := Assignment{}
		for name, list := range containers {
			cpus, err := cpuset.Parse(list)
			if err != nil {
				return nil, refuse(fmt.Sprintf("pod %s container %s: %v", uid, name, err))
			}
			if !cpus.IsSubsetOf(givable) {
				return nil, refuse(fmt.Sprintf("pod %s container %s has CPUs %s, outside the CPUs that may be given out (%s)", uid, name, cpus, givable))
			}
			for _, c := range cpus.List() {
				if o, ok := owner[c]; ok && o != uid {
					return nil, refuse(fmt.Sprintf("CPU %d is given to pods %s and %s", c, o, uid))
				}
				owner[c] = uid
			}
			a[name] = cpus
		}
		m.state.Pods[uid] = a
	}
	return m, nil
}

// Admit gives the pod's containers that get CPUs to themselves (Exclusive) their CPUs, once;
// it reports whether that took CPUs from the shared pool. The error is the kubelet's when
// the free CPUs fall short.
func (m *Manager) Admit(pod *corev1.Pod) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	if _, ok := m.state.Pods[uid]; ok {
		return false, nil
	}
	a, err := Plan(m.topo, m.state, pod)
	if err != nil || a == nil {
		return false, err
	}
	m.state.Pods[uid] = a
	if err := m.save(); err != nil {
		delete(m.state.Pods, uid)
		return false, fmt.Errorf("saving the CPU assignment: %w", err)
	}
	return true, nil
}

// CPUs is where the container runs: the CPUs it has to itself, else the shared pool.
func (m *Manager) CPUs(uid types.UID, container string) cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cpus, ok := m.state.Pods[string(uid)][container]; ok {
		return cpus
	}
	return m.state.Shared(m.topo)
}

// Exclusive is the CPUs the container has to itself; empty when it runs on the shared pool.
func (m *Manager) Exclusive(uid types.UID, container string) cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cpus, ok := m.state.Pods[string(uid)][container]; ok {
		return cpus
	}
	return cpuset.New()
}

// HasExclusive reports whether any container of the pod has CPUs to itself.
func (m *Manager) HasExclusive(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.state.Pods[string(uid)]) > 0
}

// Allocatable is the CPUs that may be given to containers: every CPU but the reserved.
func (m *Manager) Allocatable() cpuset.CPUSet {
	return m.topo.All().Difference(m.state.Reserved)
}

// Shared is the shared pool.
func (m *Manager) Shared() cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state.Shared(m.topo)
}

// Retain gives back to the shared pool the CPUs of every pod keep does not name (gone, or
// finished); it reports whether any were given back.
func (m *Manager) Retain(keep func(uid types.UID) bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var gone []string
	for uid := range m.state.Pods {
		if !keep(types.UID(uid)) {
			gone = append(gone, uid)
		}
	}
	if len(gone) == 0 {
		return false, nil
	}
	for _, uid := range gone {
		delete(m.state.Pods, uid)
	}
	return true, m.save()
}

// save writes the checkpoint; the caller holds mu.
func (m *Manager) save() error {
	cp := checkpoint{PolicyName: PolicyStatic, DefaultCPUSet: m.state.Shared(m.topo).String(), Entries: map[string]map[string]string{}}
	uids := make([]string, 0, len(m.state.Pods))
	for uid := range m.state.Pods {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	for _, uid := range uids {
		cp.Entries[uid] = map[string]string{}
		for name, cpus := range m.state.Pods[uid] {
			cp.Entries[uid][name] = cpus.String()
		}
	}
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(m.file), 0o755); err != nil {
		return err
	}
	tmp := m.file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, m.file)
}

// ReservedFor chooses the reserved CPUs when only a count is given (--kube-reserved and
// --system-reserved cpu, rounded up): packed from the lowest as Take packs them.
func ReservedFor(t Topology, n int) (cpuset.CPUSet, error) {
	if n == 0 {
		return cpuset.New(), nil
	}
	return Take(t, t.All(), n)
}
