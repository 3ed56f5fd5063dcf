// Package scale is skiff's scale harness (`make scale`, issue "Scale 1"), built the way upstream
// measures itself: simulated nodes from kwok (sigs.k8s.io/kwok, built in the throwaway module
// tests/scale/kwok) against a real API server, and a load driver shaped like ClusterLoader2's
// load test — namespaces of Deployments and StatefulSets of three sizes, Services, ConfigMaps and
// Secrets mounted by the pods, a creation burst, then steady churn at no more than 20
// mutations/s. It reports per size the API latency per verb and resource (the server's own
// histograms and the client's), pod start-up (created → scheduled → Running), scheduler pods/s,
// the server's memory and CPU over time, etcd's database size and the number of watches, and
// each of upstream's SLOs as pass or fail.
//
// The same load runs against upstream's kube-apiserver, kube-scheduler, kube-controller-manager
// and etcd (tests/scale/upstream, `make scale-upstream`) in the same run when they are built, so
// memory, CPU and latency are reported as ratios measured on the same machine at the same time.
//
// Pure parts — the workload plan, quantiles over histograms, SLO verdicts — are unit tested;
// TestScale is the harness itself: 100 nodes in `make test`, every size in `make scale`.
package scale
