package cpumanager

import (
	"fmt"
	"sort"

	"k8s.io/utils/cpuset"
)

// NotEnoughError is a request for more CPUs than are free, in the kubelet's words.
type NotEnoughError struct{ Requested, Available int }

func (e NotEnoughError) Error() string {
	return fmt.Sprintf("not enough cpus available to satisfy request: requested=%d, available=%d", e.Requested, e.Available)
}

// core names a physical core: core IDs repeat from one socket to the next.
type core struct{ socket, id int }

// Take chooses n of the CPUs in avail and packs them as the kubelet's static policy does:
// whole sockets while n still covers one, then whole cores, then single CPUs on the cores
// with the fewest CPUs left free. A container's CPUs so share caches and do not share a core
// with another container's where that can be helped, and whole cores and sockets stay free
// for the requests that need them. Ties go to the socket with the fewest CPUs free, then to
// the lowest IDs. It does no I/O.
func Take(t Topology, avail cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	if n <= 0 {
		return cpuset.New(), nil
	}
	if avail.Size() < n {
		return cpuset.New(), NotEnoughError{Requested: n, Available: avail.Size()}
	}
	free := avail
	var taken []int
	take := func(ids []int) {
		taken = append(taken, ids...)
		free = free.Difference(cpuset.New(ids...))
		n -= len(ids)
	}
	sockets, cores := map[int][]int{}, map[core][]int{}
	coreOf, socketOf := map[int]core{}, map[int]int{}
	for _, c := range t.CPUs {
		sockets[c.Socket] = append(sockets[c.Socket], c.ID)
		k := core{c.Socket, c.Core}
		cores[k] = append(cores[k], c.ID)
		coreOf[c.ID], socketOf[c.ID] = k, c.Socket
	}
	allFree := func(ids []int) bool {
		for _, id := range ids {
			if !free.Contains(id) {
				return false
			}
		}
		return true
	}
	freeIn := func(ids []int) int {
		k := 0
		for _, id := range ids {
			if free.Contains(id) {
				k++
			}
		}
		return k
	}

	socketIDs := make([]int, 0, len(sockets))
	for s := range sockets {
		socketIDs = append(socketIDs, s)
	}
	sort.Ints(socketIDs)
	for _, s := range socketIDs {
		if ids := sockets[s]; len(ids) <= n && allFree(ids) {
			take(ids)
		}
	}

	for n > 0 {
		var best []int
		bestSocketFree := 0
		for k, ids := range cores {
			if len(ids) > n || !allFree(ids) {
				continue
			}
			sf := freeIn(sockets[k.socket])
			if best == nil || sf < bestSocketFree || (sf == bestSocketFree && ids[0] < best[0]) {
				best, bestSocketFree = ids, sf
			}
		}
		if best == nil {
			break
		}
		take(best)
	}

	for n > 0 {
		best, bestCore, bestSocket := -1, 0, 0
		for _, id := range free.List() {
			if _, known := coreOf[id]; !known {
				continue // not in the topology: never handed out
			}
			cf, sf := freeIn(cores[coreOf[id]]), freeIn(sockets[socketOf[id]])
			if best < 0 || cf < bestCore || (cf == bestCore && sf < bestSocket) {
				best, bestCore, bestSocket = id, cf, sf
			}
		}
		if best < 0 {
			return cpuset.New(), NotEnoughError{Requested: len(taken) + n, Available: avail.Size()}
		}
		take([]int{best})
	}
	return cpuset.New(taken...), nil
}
