package core

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const benchPods = 10000

// benchCluster is a realistic-looking cluster: three zones, hostname labels, and a few images
// per node so image locality has work to do.
func benchCluster(numNodes int) []*corev1.Node {
	nodes := make([]*corev1.Node, numNodes)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("node-%05d", i), "32", "128Gi",
			nodeLabels(corev1.LabelTopologyZone, fmt.Sprintf("zone-%d", i%3), "kubernetes.io/os", "linux"),
			images(300*mb, fmt.Sprintf("registry.example/app-%d:1.0", i%10)),
			images(50*mb, fmt.Sprintf("registry.example/app-%d:1.0", (i+1)%10)),
			images(20*mb, "registry.k8s.io/pause:3.10"),
		)
	}
	return nodes
}

// benchWorkload is 10,000 small pods from 10 ReplicaSets, each with its own image.
func benchWorkload() []*corev1.Pod {
	pods := make([]*corev1.Pod, benchPods)
	for i := range pods {
		owner := i % 10
		pods[i] = pod(fmt.Sprintf("app-%d-%05d", owner, i), "100m", "128Mi",
			ownedBy(fmt.Sprintf("rs-%d", owner)),
			func(p *corev1.Pod) { p.Spec.Containers[0].Image = fmt.Sprintf("registry.example/app-%d:1.0", owner) })
	}
	return pods
}

// BenchmarkSchedule schedules 10,000 pods one after another into one snapshot, the way the
// scheduler loop does: decide, bind (AddPod), rotate Start. Each b.N iteration is one full run
// on a fresh snapshot; pods/s is computed over all scheduled pods.
func BenchmarkSchedule(b *testing.B) {
	for _, numNodes := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", numNodes), func(b *testing.B) {
			nodes := benchCluster(numNodes)
			pods := benchWorkload()
			b.ReportAllocs()
			b.ResetTimer()
			var elapsed time.Duration
			for range b.N {
				b.StopTimer()
				for _, p := range pods {
					p.Spec.NodeName = ""
				}
				s := NewSnapshot(nodes, nil)
				b.StartTimer()

				began := time.Now()
				start := 0
				for _, p := range pods {
					res, err := Schedule(s, p, Options{Start: start})
					if err != nil {
						b.Fatalf("%s: %v", p.Name, err)
					}
					start = res.NextStart
					p.Spec.NodeName = res.Node
					s.AddPod(p)
				}
				elapsed += time.Since(began)

				b.StopTimer()
				checkBenchPlacement(b, s, numNodes)
				b.StartTimer()
			}
			b.ReportMetric(float64(benchPods*b.N)/elapsed.Seconds(), "pods/s")
		})
	}
}

// checkBenchPlacement guards the benchmark against measuring a degenerate scheduler: every pod
// landed, and no node got far more than its share.
func checkBenchPlacement(b *testing.B, s *Snapshot, numNodes int) {
	var total, busiest int64
	for _, n := range s.Nodes() {
		total += n.Requested.Pods
		busiest = max(busiest, n.Requested.Pods)
	}
	if total != benchPods {
		b.Fatalf("%d pods placed, want %d", total, benchPods)
	}
	if fair := int64(benchPods / numNodes); busiest > 2*fair+2 {
		b.Fatalf("busiest node has %d pods, fair share is %d", busiest, fair)
	}
}

// BenchmarkPreempt is one preemption decision in a full cluster: every node is packed with
// low-priority pods of mixed priorities and a high-priority pod needs a node's worth of room.
func BenchmarkPreempt(b *testing.B) {
	for _, numNodes := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", numNodes), func(b *testing.B) {
			s := NewSnapshot(benchCluster(numNodes), nil)
			for i, n := range s.Nodes() {
				for j := range 8 {
					s.AddPod(pod(fmt.Sprintf("low-%d-%d", i, j), "4", "16Gi", on(n.name), prio(int32((i+j)%5))))
				}
			}
			high := pod("high", "8", "32Gi", prio(100))
			if _, err := Schedule(s, high, Options{}); err == nil {
				b.Fatal("the high-priority pod fits without preemption")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if res, ok := Preempt(s, high, nil, Options{}); !ok || len(res.Victims) != 2 {
					b.Fatalf("Preempt: %+v", res)
				}
			}
		})
	}
}
