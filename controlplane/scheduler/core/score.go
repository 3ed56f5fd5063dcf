package core

import (
	"math"
	"slices"
)

// Score weights of upstream's default profile.
const (
	maxNodeScore         = 100
	weightBalanced       = 1
	weightLeastAllocated = 1
	weightSpread         = 2
	weightImageLocality  = 1
	weightNodeAffinity   = 2
	weightTaint          = 3
)

// System-default topology spreading: per node with maxSkew 3, per zone with maxSkew 5. The
// maxSkew-1 offsets damp the score so small skews barely matter.
const (
	hostnameSkewOffset = 3 - 1
	zoneSkewOffset     = 5 - 1
)

// pickBest scores the feasible nodes and returns the index of the highest total. Ties go to
// the earliest node in search order; since callers rotate Start, that still spreads.
func (s *Snapshot) pickBest(q *podQuery, sc *scratch) int {
	feasible := sc.feasible
	scores := slices.Grow(sc.scores[:0], len(feasible))[:len(feasible)]
	sc.scores = scores

	spreading := q.owner != ""
	var hostWeight, zoneWeight float64
	zoned := false
	if spreading {
		// Upstream's normalizing weight, log(domains+2): the more domains there are, the more a
		// single extra pod in one of them matters relative to the maxSkew offset.
		hostWeight = math.Log(float64(len(feasible) + 2))
		zoned = s.countZoneOwners(q, sc)
		if zoned {
			zoneWeight = math.Log(float64(len(sc.zoneCounts) + 2))
		}
	}

	var minSpread, maxSpread int64 = math.MaxInt64, 0
	var maxAffinity, maxTaints int64
	for i, n := range feasible {
		ns := &scores[i]
		ns.base = weightLeastAllocated * leastAllocated(q, n)
		if !q.bestEffort {
			ns.base += weightBalanced * balancedAllocation(q, n)
		}
		if len(q.images) > 0 {
			ns.base += weightImageLocality * imageLocality(q, n)
		}
		if spreading {
			raw := float64(n.owners[q.owner])*hostWeight + hostnameSkewOffset
			if zoned && n.zone != "" {
				raw += float64(sc.zoneCounts[n.zone])*zoneWeight + zoneSkewOffset
			}
			ns.spread = int64(math.Round(raw))
			minSpread = min(minSpread, ns.spread)
			maxSpread = max(maxSpread, ns.spread)
		}
		if len(q.preferred) > 0 {
			ns.affinity = 0
			for j := range q.preferred {
				if q.preferred[j].term.matches(n.Node) {
					ns.affinity += q.preferred[j].weight
				}
			}
			maxAffinity = max(maxAffinity, ns.affinity)
		}
		ns.taints = 0
		for j := range n.softTaints {
			if !toleratedBy(q.preferTols, &n.softTaints[j]) {
				ns.taints++
			}
		}
		maxTaints = max(maxTaints, ns.taints)
	}

	best, bestTotal := 0, int64(math.MinInt64)
	for i := range scores {
		ns := &scores[i]
		total := ns.base
		if spreading {
			// Fewer matching pods -> lower raw -> higher score; min+max-raw keeps the range.
			norm := int64(maxNodeScore)
			if maxSpread > 0 {
				norm = maxNodeScore * (maxSpread + minSpread - ns.spread) / maxSpread
			}
			total += weightSpread * norm
		}
		if maxAffinity > 0 {
			total += weightNodeAffinity * (maxNodeScore * ns.affinity / maxAffinity)
		}
		taintScore := int64(maxNodeScore)
		if maxTaints > 0 {
			taintScore = maxNodeScore - maxNodeScore*ns.taints/maxTaints
		}
		total += weightTaint * taintScore
		if total > bestTotal {
			best, bestTotal = i, total
		}
	}
	return best
}

// countZoneOwners fills sc.zoneCounts with, for every zone among the feasible nodes, the
// number of the pod's siblings in that zone. Like upstream it counts over all nodes of the
// zone, not just the feasible ones, honouring the pod's required node affinity/selector (the
// default nodeAffinityPolicy). It reports whether any feasible node is zoned.
func (s *Snapshot) countZoneOwners(q *podQuery, sc *scratch) bool {
	if len(sc.zoneCounts) > 0 {
		clear(sc.zoneCounts)
	}
	for _, n := range sc.feasible {
		if n.zone != "" {
			sc.zoneCounts[n.zone] = 0
		}
	}
	if len(sc.zoneCounts) == 0 {
		return false
	}
	if q.required == nil {
		for z := range sc.zoneCounts {
			sc.zoneCounts[z] = int64(s.zoneOwners[zoneOwner{z, q.owner}])
		}
		return true
	}
	for _, n := range s.order {
		if n.zone == "" {
			continue
		}
		if _, ok := sc.zoneCounts[n.zone]; !ok {
			continue
		}
		if c := n.owners[q.owner]; c > 0 && q.required.matches(n.Node) {
			sc.zoneCounts[n.zone] += int64(c)
		}
	}
	return true
}

// leastAllocated favours nodes with more room left, cpu and memory weighted equally, on
// requests with the scoring defaults so best-effort pods still count.
func leastAllocated(q *podQuery, n *NodeInfo) int64 {
	var sum, weights int64
	if a := n.Allocatable.MilliCPU; a != 0 {
		sum += leastRequested(n.non0CPU+q.scoreCPU, a)
		weights++
	}
	if a := n.Allocatable.Memory; a != 0 {
		sum += leastRequested(n.non0Mem+q.scoreMem, a)
		weights++
	}
	if weights == 0 {
		return 0
	}
	return sum / weights
}

func leastRequested(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * maxNodeScore / capacity
}

// balancedAllocation favours nodes whose cpu and memory would be used in similar proportions,
// so neither is stranded: 1 minus the standard deviation of the two fractions (which for two
// values is half their difference). It works on real requests, like upstream.
func balancedAllocation(q *podQuery, n *NodeInfo) int64 {
	var fractions [2]float64
	k := 0
	if a := n.Allocatable.MilliCPU; a != 0 {
		fractions[k] = min(float64(n.Requested.MilliCPU+q.req.MilliCPU)/float64(a), 1)
		k++
	}
	if a := n.Allocatable.Memory; a != 0 {
		fractions[k] = min(float64(n.Requested.Memory+q.req.Memory)/float64(a), 1)
		k++
	}
	std := 0.0
	if k == 2 {
		std = math.Abs(fractions[0]-fractions[1]) / 2
	}
	return int64((1 - std) * maxNodeScore)
}

// imageLocality favours nodes that already have the pod's images, by size and by how widely
// the image is spread (an image on one node out of many should not attract every replica).
func imageLocality(q *podQuery, n *NodeInfo) int64 {
	var sum int64
	for _, img := range q.images {
		if _, ok := n.images[img.name]; ok {
			sum += img.scaled
		}
	}
	maxThreshold := imageMaxContainerThresh * int64(q.numContainers)
	if maxThreshold <= imageMinThreshold {
		return 0
	}
	sum = min(max(sum, imageMinThreshold), maxThreshold)
	return maxNodeScore * (sum - imageMinThreshold) / (maxThreshold - imageMinThreshold)
}
