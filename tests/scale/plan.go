package scale

import (
	"fmt"
	"math/rand/v2"
)

// The shape of ClusterLoader2's load test (testing/load/config.yaml): a namespace per 100
// nodes; in each, half the pods in small workloads, a quarter in medium and a quarter in big;
// one StatefulSet in ten small ones and one medium one; 200 Services a namespace (10,000 at
// 5,000 nodes, upstream's Service threshold), each workload with a ConfigMap and a Secret its
// pods mount.
const (
	NodesPerNamespace    = 100
	SmallReplicas        = 5
	MediumReplicas       = 30
	BigReplicas          = 250
	ServicesPerNamespace = 200
)

// Kind is the controller a workload's pods belong to.
type Kind string

const (
	Deployment  Kind = "Deployment"
	StatefulSet Kind = "StatefulSet"
)

// Workload is one Deployment or StatefulSet of the plan.
type Workload struct {
	Namespace string
	Name      string
	Kind      Kind
	Replicas  int
	// Service says the workload has a Service of its own name selecting its pods (headless for
	// a StatefulSet, whose serviceName it is).
	Service bool
}

// Plan is the whole workload of one size.
type Plan struct {
	Nodes      int
	Namespaces []string
	Workloads  []Workload
}

// Pods is the number of pods the plan asks for.
func (p Plan) Pods() int {
	n := 0
	for _, w := range p.Workloads {
		n += w.Replicas
	}
	return n
}

// Services is the number of Services the plan makes.
func (p Plan) Services() int {
	n := 0
	for _, w := range p.Workloads {
		if w.Service {
			n++
		}
	}
	return n
}

// PlanFor lays out podsPerNode × nodes pods over ceil(nodes/100) namespaces. Big and medium
// workloads come first in each namespace so they are the ones with Services, as in
// ClusterLoader2, where every big and medium Deployment has one.
func PlanFor(nodes, podsPerNode int) Plan {
	p := Plan{Nodes: nodes}
	namespaces := (nodes + NodesPerNamespace - 1) / NodesPerNamespace
	total := nodes * podsPerNode
	for i := 0; i < namespaces; i++ {
		ns := fmt.Sprintf("scale-%03d", i)
		p.Namespaces = append(p.Namespaces, ns)
		// The pods of this namespace: an even share, the remainder to the first ones.
		pods := total / namespaces
		if i < total%namespaces {
			pods++
		}
		var ws []Workload
		add := func(size string, replicas, count int, statefulEvery int) {
			for j := 0; j < count; j++ {
				kind := Deployment
				if statefulEvery > 0 && j%statefulEvery == statefulEvery-1 {
					kind = StatefulSet
				}
				ws = append(ws, Workload{Namespace: ns, Name: fmt.Sprintf("%s-%d", size, j), Kind: kind, Replicas: replicas})
			}
		}
		big := pods / 4 / BigReplicas
		medium := pods / 4 / MediumReplicas
		add("big", BigReplicas, big, 0)
		add("medium", MediumReplicas, medium, medium) // the last medium one is a StatefulSet
		rest := pods - big*BigReplicas - medium*MediumReplicas
		add("small", SmallReplicas, rest/SmallReplicas, 10)
		if r := rest % SmallReplicas; r > 0 {
			ws = append(ws, Workload{Namespace: ns, Name: "tail", Kind: Deployment, Replicas: r})
		}
		for j := range ws {
			ws[j].Service = j < ServicesPerNamespace
		}
		p.Workloads = append(p.Workloads, ws...)
	}
	return p
}

// Action is one mutation of the churn phase.
type Action int

const (
	// ScaleUp and ScaleDown change a Deployment's replicas by one or two pods.
	ScaleUp Action = iota
	ScaleDown
	// RollingUpdate changes a Deployment's pod template (an annotation), replacing its pods.
	RollingUpdate
	// DeletePod deletes one pod of a workload; its controller replaces it.
	DeletePod
)

func (a Action) String() string {
	return [...]string{"scale-up", "scale-down", "rolling-update", "delete-pod"}[a]
}

// Step is one churn mutation on one workload: Delta is the new replica count's change for
// ScaleUp and ScaleDown.
type Step struct {
	Action   Action
	Workload int // index into Plan.Workloads
	Delta    int
}

// Churn returns n churn steps for the plan, the same for the same seed, so skiff and upstream
// see the same mutations in the side-by-side run. Rolling updates are kept to small and medium
// Deployments (a big one's would replace 250 pods and swamp the 20 mutations/s budget the
// SLOs are stated at); a scale-down never goes below one replica, and replicas are tracked so
// a workload never drifts more than two pods from its planned size.
func Churn(p Plan, n int, seed uint64) []Step {
	r := rand.New(rand.NewPCG(seed, seed^0x5ca1e))
	var deployments []int
	for i, w := range p.Workloads {
		if w.Kind == Deployment && w.Replicas <= MediumReplicas {
			deployments = append(deployments, i)
		}
	}
	if len(deployments) == 0 {
		return nil
	}
	drift := map[int]int{}
	steps := make([]Step, 0, n)
	for len(steps) < n {
		i := deployments[r.IntN(len(deployments))]
		switch a := Action(r.IntN(4)); a {
		case ScaleUp, ScaleDown:
			d := 1 + r.IntN(2)
			if a == ScaleDown {
				d = -d
			}
			next := drift[i] + d
			if next > 2 || next < -2 || p.Workloads[i].Replicas+next < 1 {
				a, d = flip(a), -d
				next = drift[i] + d
				if next > 2 || next < -2 || p.Workloads[i].Replicas+next < 1 {
					continue
				}
			}
			drift[i] = next
			steps = append(steps, Step{Action: a, Workload: i, Delta: d})
		default:
			steps = append(steps, Step{Action: a, Workload: i})
		}
	}
	return steps
}

func flip(a Action) Action {
	if a == ScaleUp {
		return ScaleDown
	}
	return ScaleUp
}
