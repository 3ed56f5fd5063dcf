package bench

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/skiff-sh/skiff/dataplane/flows"
	"github.com/skiff-sh/skiff/dataplane/loader"
)

// BenchmarkFlowEvents measures what flow events cost the datapath (issue 45: within 5 %): in a
// lab of two workers with NetworkPolicy on and a policy admitting the client, conn/s and
// request p50 from a pod on node1 to one on node2 — every connection a new flow, so two
// events (egress on node1, ingress on node2) — with events off and on, alternated three times
// in this one run, the agents reading them as usual. (The flood — events lost when nothing
// keeps up, counted — is BenchmarkFlowEventsFlood in dataplane/netpol.)
func BenchmarkFlowEvents(b *testing.B) {
	e := newPolicyLab(b, "bfe", true)
	e.createPolicy(denyServers())
	e.createPolicy(allowClients())
	e.shells["client-1"].answered("the client admitted", func() string { return e.target("server-2") })
	configs := map[string]*ebpf.Map{}
	for _, node := range []string{"node1", "node2"} {
		m, err := ebpf.LoadPinnedMap(filepath.Join(loader.PinDir(e.name+"-"+node), flows.ConfigMap), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		configs[node] = m
	}
	set := func(on bool) {
		v := uint64(0)
		if on {
			v = 1
		}
		for node, m := range configs {
			if err := m.Put(uint32(0), v); err != nil {
				b.Fatalf("%s: %v", node, err)
			}
		}
	}
	defer set(true) // as the agents left them
	// Paired rounds, the order flipped each round so that drift (the machine is shared)
	// falls on both sides; the figure is the median of the rounds' ratios.
	var off, on []load
	var rates, p50s []float64
	for round := range 5 {
		var offRun, onRun load
		if round%2 == 0 {
			set(false)
			offRun = e.measure("client-1", "server-2")
			set(true)
			onRun = e.measure("client-1", "server-2")
		} else {
			set(true)
			onRun = e.measure("client-1", "server-2")
			set(false)
			offRun = e.measure("client-1", "server-2")
		}
		off, on = append(off, offRun), append(on, onRun)
		rates, p50s = append(rates, onRun.rate/offRun.rate), append(p50s, float64(onRun.p50)/float64(offRun.p50))
	}
	mOff, mOn := medianLoad(off), medianLoad(on)
	slices.Sort(rates)
	slices.Sort(p50s)
	rate, p50 := rates[len(rates)/2], p50s[len(p50s)/2]
	fmt.Printf("\nFlow events (policy verdicts on both nodes, every connection new)   conn/s        p50 µs\n")
	fmt.Printf("  events off (baseline)                                       %10.0f    %8d\n", mOff.rate, mOff.p50)
	fmt.Printf("  events on                                                   %10.0f    %8d\n", mOn.rate, mOn.p50)
	fmt.Printf("  on / off (median of 5 paired rounds)                        %10.3fx   %8.3fx\n", rate, p50)
	b.ReportMetric(rate, "conn/s-on/off")
	b.ReportMetric(p50, "p50-on/off")
}

// medianLoad is the run with the median rate.
func medianLoad(runs []load) load {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b load) int { return cmp.Compare(a.rate, b.rate) })
	return sorted[len(sorted)/2]
}
