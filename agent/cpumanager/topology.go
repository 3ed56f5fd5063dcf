// Package cpumanager gives containers of Guaranteed pods that ask for whole CPUs those CPUs
// to themselves, as the kubelet's CPU manager does with its static policy: a network function
// pinned to its cores is not preempted by its neighbours, and keeps its caches warm. Every
// other container runs on the shared pool, the node's CPUs less those given out; the CPUs
// reserved for the node's daemons (--reserved-cpus, or as many as --kube-reserved and
// --system-reserved name) stay in the shared pool and are never given out.
//
// The choice of CPUs (Take, Plan) is a decision core without I/O; Manager keeps the
// assignments, in a checkpoint file in the kubelet's format so they outlive an agent restart.
package cpumanager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// CPU is one logical CPU and where it sits: its core (shared by hyperthreads), socket and
// NUMA node.
type CPU struct {
	ID, Core, Socket, NUMA int
}

// Topology is the node's online CPUs, by ID.
type Topology struct {
	CPUs []CPU
}

// All is every CPU of the topology.
func (t Topology) All() cpuset.CPUSet {
	ids := make([]int, len(t.CPUs))
	for i, c := range t.CPUs {
		ids[i] = c.ID
	}
	return cpuset.New(ids...)
}

// Discover reads the online CPUs' topology under sysfs (/sys on a node): each CPU's core and
// socket from devices/system/cpu/cpuN/topology, its NUMA node from devices/system/node (node
// 0 where the kernel has no NUMA).
func Discover(sysfs string) (Topology, error) {
	cpuDir := filepath.Join(sysfs, "devices/system/cpu")
	b, err := os.ReadFile(filepath.Join(cpuDir, "online"))
	if err != nil {
		return Topology{}, fmt.Errorf("reading the online CPUs: %w", err)
	}
	online, err := cpuset.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return Topology{}, fmt.Errorf("%s: %w", filepath.Join(cpuDir, "online"), err)
	}
	numa := map[int]int{}
	nodes, _ := filepath.Glob(filepath.Join(sysfs, "devices/system/node/node[0-9]*"))
	for _, n := range nodes {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(n), "node"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(n, "cpulist"))
		if err != nil {
			return Topology{}, err
		}
		cpus, err := cpuset.Parse(strings.TrimSpace(string(b)))
		if err != nil {
			return Topology{}, fmt.Errorf("%s: %w", filepath.Join(n, "cpulist"), err)
		}
		for _, c := range cpus.UnsortedList() {
			numa[c] = id
		}
	}
	var t Topology
	for _, id := range online.List() {
		dir := filepath.Join(cpuDir, "cpu"+strconv.Itoa(id), "topology")
		core, err := readInt(filepath.Join(dir, "core_id"))
		if err != nil {
			return Topology{}, err
		}
		socket, err := readInt(filepath.Join(dir, "physical_package_id"))
		if err != nil {
			return Topology{}, err
		}
		t.CPUs = append(t.CPUs, CPU{ID: id, Core: core, Socket: socket, NUMA: numa[id]})
	}
	if len(t.CPUs) == 0 {
		return Topology{}, errors.New("no online CPUs")
	}
	sort.Slice(t.CPUs, func(i, j int) bool { return t.CPUs[i].ID < t.CPUs[j].ID })
	return t, nil
}

func readInt(p string) (int, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	return n, nil
}
