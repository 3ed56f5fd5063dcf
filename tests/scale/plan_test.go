package scale

import (
	"reflect"
	"testing"
)

func TestPlanForSizes(t *testing.T) {
	for _, tc := range []struct {
		nodes, podsPerNode, namespaces, services int
	}{
		{100, 30, 1, 200},
		{1000, 30, 10, 2000},
		{5000, 30, 50, 10000},
		{150, 30, 2, 400},
		{3, 10, 1, 6}, // 30 pods: six small Deployments
	} {
		p := PlanFor(tc.nodes, tc.podsPerNode)
		if got, want := p.Pods(), tc.nodes*tc.podsPerNode; got != want {
			t.Errorf("%d nodes: %d pods planned, want %d", tc.nodes, got, want)
		}
		if len(p.Namespaces) != tc.namespaces {
			t.Errorf("%d nodes: %d namespaces, want %d", tc.nodes, len(p.Namespaces), tc.namespaces)
		}
		if got := p.Services(); got != tc.services {
			t.Errorf("%d nodes: %d Services, want %d", tc.nodes, got, tc.services)
		}
		names := map[string]bool{}
		kinds := map[Kind]int{}
		for _, w := range p.Workloads {
			key := w.Namespace + "/" + w.Name
			if names[key] {
				t.Fatalf("%d nodes: workload %s twice", tc.nodes, key)
			}
			names[key] = true
			if w.Replicas < 1 {
				t.Errorf("%s has %d replicas", key, w.Replicas)
			}
			kinds[w.Kind]++
		}
		if tc.nodes >= 100 && (kinds[StatefulSet] == 0 || kinds[Deployment] == 0) {
			t.Errorf("%d nodes: kinds %v, want both", tc.nodes, kinds)
		}
	}
}

func TestPlanShareOfSizes(t *testing.T) {
	p := PlanFor(100, 30)
	by := map[int]int{}
	for _, w := range p.Workloads {
		by[w.Replicas] += w.Replicas
	}
	// ClusterLoader2's split: a quarter big, a quarter medium, half small.
	if by[BigReplicas] != 750 || by[MediumReplicas] != 750 || by[SmallReplicas] != 1500 {
		t.Fatalf("pods by workload size = %v, want 750 big, 750 medium, 1500 small", by)
	}
}

func TestChurnIsBoundedAndRepeatable(t *testing.T) {
	p := PlanFor(100, 30)
	steps := Churn(p, 5000, 7)
	if len(steps) != 5000 {
		t.Fatalf("%d steps, want 5000", len(steps))
	}
	if !reflect.DeepEqual(steps, Churn(p, 5000, 7)) {
		t.Fatal("the same seed gave other steps")
	}
	if reflect.DeepEqual(steps, Churn(p, 5000, 8)) {
		t.Fatal("another seed gave the same steps")
	}
	drift := map[int]int{}
	seen := map[Action]int{}
	for _, s := range steps {
		w := p.Workloads[s.Workload]
		if w.Kind != Deployment || w.Replicas > MediumReplicas {
			t.Fatalf("step %v on %s (%s, %d replicas): churn is for small and medium Deployments", s.Action, w.Name, w.Kind, w.Replicas)
		}
		seen[s.Action]++
		switch s.Action {
		case ScaleUp, ScaleDown:
			if (s.Action == ScaleUp) != (s.Delta > 0) || s.Delta == 0 {
				t.Fatalf("%v with delta %d", s.Action, s.Delta)
			}
			drift[s.Workload] += s.Delta
			if d := drift[s.Workload]; d > 2 || d < -2 || w.Replicas+d < 1 {
				t.Fatalf("%s drifted %d from %d replicas", w.Name, d, w.Replicas)
			}
		default:
			if s.Delta != 0 {
				t.Fatalf("%v with delta %d", s.Action, s.Delta)
			}
		}
	}
	for a := ScaleUp; a <= DeletePod; a++ {
		if seen[a] < 500 {
			t.Errorf("%v only %d times in 5000 steps", a, seen[a])
		}
	}
}
