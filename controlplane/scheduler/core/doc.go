// Package core is the scheduler's decision core: given a Snapshot of nodes and the pods already
// assigned to them, Schedule picks the node a pending pod should be bound to, or explains with a
// FitError why none fits.
//
// It owns the cluster model the decision reads (NodeInfo per node, with incrementally maintained
// requested resources, host ports, image sets and per-owner pod counts), the default filters
// (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, in
// upstream kube-scheduler's order), the default scorers with upstream's weights
// (NodeResourcesFit/LeastAllocated, NodeResourcesBalancedAllocation, PodTopologySpread's system
// defaults keyed on the controller owner, ImageLocality, preferred NodeAffinity and
// TaintToleration's PreferNoSchedule), and upstream's adaptive search that stops after enough
// feasible nodes were found in large clusters.
//
// Two inputs come from outside the node model: pods nominated to a node by an earlier
// preemption (Snapshot.AddNominatedPod), which decisions for pods of no higher priority count
// as if they were there, and Options.Volumes, the node constraints of the pod's
// PersistentVolumeClaims as VolumeBinding would apply them, which the caller resolves. When
// no node fits, Preempt is upstream's DefaultPreemption: it picks the node and the victims
// whose eviction lets the pod fit, honouring PodDisruptionBudgets where it can.
//
// The package is deliberately pure: no I/O, no goroutines, no clients. The scheduler loop that
// watches the API, keeps the Snapshot current, rotates Options.Start and binds pods lives
// elsewhere; keeping the decision here makes it cheap to test exhaustively and to benchmark.
// Messages and reason strings match upstream's so that `kubectl describe pod` reads the same as
// on any Kubernetes cluster.
package core
