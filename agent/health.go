package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	gobgpmetrics "github.com/osrg/gobgp/v3/pkg/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/agent/clusterdns"
	"github.com/skiff-sh/skiff/agent/runtime"
	"github.com/skiff-sh/skiff/bgp"
	"github.com/skiff-sh/skiff/dataplane/flows"
	"github.com/skiff-sh/skiff/dataplane/loader"
	"github.com/skiff-sh/skiff/dataplane/netpol"
	"github.com/skiff-sh/skiff/dataplane/services"
	"github.com/skiff-sh/skiff/internal/supervisor"
)

// serveHealthz serves /healthz, as the kubelet's 10248 — ok while the runtime answers CRI and
// every supervised part runs; `?verbose` lists each — /metrics (the BGP speaker's session
// states and route counts, the service tables, each part's state) and /debug/pprof on the
// agent's loopback address.
func serveHealthz(ctx context.Context, addr string, ctr *runtime.Containerd, sup *supervisor.Supervisor, speaker *atomic.Pointer[bgp.Speaker],
	proxy proxyCollector, policy *netpol.Enforcer, dnsServer *clusterdns.Server, flowObserver *flows.Observer) error {
	mux := http.NewServeMux()
	reg := prometheus.NewRegistry()
	reg.MustRegister(bgpCollector{speaker}, proxy, partsCollector{sup}, flowObserver)
	if policy != nil {
		reg.MustRegister(policyCollector{policy})
	}
	if dnsServer != nil {
		reg.MustRegister(dnsServer.Metrics().Collectors()...)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// Go's profiles, as the kubelet serves them (enableProfilingHandler): on this loopback
	// address only, for `go tool pprof http://127.0.0.1:10248/debug/pprof/heap` on the node.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		cctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		report := "[+]containerd ok\n"
		healthy := true
		if _, err := ctr.Version(cctx); err != nil {
			report, healthy = "[-]containerd failed: "+err.Error()+"\n", false
		}
		report += sup.Report()
		if sup.Health() != nil {
			healthy = false
		}
		if !healthy {
			http.Error(w, report+"healthz check failed", http.StatusInternalServerError)
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprint(w, report+"healthz check passed\n")
			return
		}
		fmt.Fprint(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}

var (
	partUpDesc = prometheus.NewDesc("skiff_agent_part_up",
		"1 while a supervised part of the agent runs, 0 while it is down (restarting, or ended).", []string{"part"}, nil)
	partRestartsDesc = prometheus.NewDesc("skiff_agent_part_restarts_total",
		"How often a supervised part of the agent failed and was restarted.", []string{"part"}, nil)
)

// partsCollector exports each supervised part's state.
type partsCollector struct{ sup *supervisor.Supervisor }

func (c partsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- partUpDesc
	ch <- partRestartsDesc
}

func (c partsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.sup.Statuses() {
		up := 0.0
		if st.Running {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(partUpDesc, prometheus.GaugeValue, up, st.Name)
		ch <- prometheus.MustNewConstMetric(partRestartsDesc, prometheus.CounterValue, float64(st.Restarts), st.Name)
	}
}

// bgpCollector exposes GoBGP's collector (bgp_peer_state, bgp_routes_received/accepted/
// advertised per peer) once the speaker runs; before that it reports nothing.
type bgpCollector struct{ speaker *atomic.Pointer[bgp.Speaker] }

func (c bgpCollector) Describe(ch chan<- *prometheus.Desc) {}

func (c bgpCollector) Collect(ch chan<- prometheus.Metric) {
	if s := c.speaker.Load(); s != nil {
		gobgpmetrics.NewBgpCollector(s.Server()).Collect(ch)
	}
}

var (
	socketsDesc = prometheus.NewDesc("skiff_service_sockets",
		"Live sockets balanced to a Service backend: the exact entry count of the socket translation tables (skiff_sock_nat, skiff_sock_nat6).", nil, nil)
	socketsCapDesc = prometheus.NewDesc("skiff_service_sockets_capacity",
		"Capacity of the socket translation tables, both families together.", nil, nil)
	ctDesc = prometheus.NewDesc("skiff_conntrack_entries",
		"NodePort connection-tracking entries: the exact entry count of skiff_ct and skiff_ct6.", nil, nil)
	ctCapDesc = prometheus.NewDesc("skiff_conntrack_capacity",
		"Capacity of the NodePort connection-tracking tables, both families together.", nil, nil)
)

var (
	mapEntriesDesc = prometheus.NewDesc("skiff_bpf_map_entries",
		"Entries the cluster's Services need in each service map after the last sync (more than the capacity when it is full).", []string{"map"}, nil)
	mapCapacityDesc = prometheus.NewDesc("skiff_bpf_map_capacity",
		"Capacity of each service map (--bpf-map-services, --bpf-map-backends, --bpf-map-maglev).", []string{"map"}, nil)
	unprogrammedDesc = prometheus.NewDesc("skiff_service_frontends_unprogrammed",
		"Service frontends left out of the maps because a map is full (0 when everything fits).", nil, nil)
)

// ServiceMapsFull is the Node condition that says a service map is full: True names the
// map and the first frontend left out, as NetworkUnavailable names a broken network.
const ServiceMapsFull corev1.NodeConditionType = "SkiffServiceMapsFull"

// serviceMapsCondition is the node's ServiceMapsFull condition; none before the first sync
// or without the service proxy.
func serviceMapsCondition(proxy bool, s *services.MapStatus) []corev1.NodeCondition {
	if !proxy || s == nil {
		return nil
	}
	now := metav1.Now()
	c := corev1.NodeCondition{Type: ServiceMapsFull, Status: corev1.ConditionFalse, Reason: "ServiceMapsHaveRoom",
		Message: "every Service frontend is programmed", LastHeartbeatTime: now, LastTransitionTime: now}
	if msg := s.Full(); msg != "" {
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, "ServiceMapFull", msg
	}
	return []corev1.NodeCondition{c}
}

// proxyCollector exports the service dataplane's table occupancy, counted exactly at scrape,
// and the service maps' fill as of the last sync.
type proxyCollector struct {
	proxy *atomic.Pointer[loader.Dataplane]
	maps  *atomic.Pointer[services.MapStatus]
	syncs *prometheus.HistogramVec // skiff_service_proxy_sync_seconds
}

// newProxySyncSeconds is how long each sync of the service maps took, by how it ran (see
// services.SyncChanges, SyncWhole, SyncResync): kube-proxy's sync_proxy_rules_duration_seconds.
func newProxySyncSeconds() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "skiff_service_proxy_sync_seconds",
		Help:    "Time a sync of the service maps took, by kind: changes (the changed Services alone), whole (the whole state for a change), resync (everything rewritten, periodically).",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}}, []string{"kind"})
}

func (c proxyCollector) Describe(ch chan<- *prometheus.Desc) {
	c.syncs.Describe(ch)
	ch <- socketsDesc
	ch <- socketsCapDesc
	ch <- ctDesc
	ch <- ctCapDesc
	ch <- mapEntriesDesc
	ch <- mapCapacityDesc
	ch <- unprogrammedDesc
}

func (c proxyCollector) Collect(ch chan<- prometheus.Metric) {
	c.syncs.Collect(ch)
	if s := c.maps.Load(); s != nil {
		for _, f := range s.Fill {
			ch <- prometheus.MustNewConstMetric(mapEntriesDesc, prometheus.GaugeValue, float64(f.Entries), f.Map)
			ch <- prometheus.MustNewConstMetric(mapCapacityDesc, prometheus.GaugeValue, float64(f.Capacity), f.Map)
		}
		ch <- prometheus.MustNewConstMetric(unprogrammedDesc, prometheus.GaugeValue, float64(len(s.Dropped)))
	}
	d := c.proxy.Load()
	if d == nil {
		return
	}
	n, capacity, err := d.Maps.SocketCount()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(socketsDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(socketsCapDesc, prometheus.GaugeValue, float64(capacity))
	if n, capacity, err := services.ConntrackCount(d.Maps.CT, d.Maps.CT6); err == nil {
		ch <- prometheus.MustNewConstMetric(ctDesc, prometheus.GaugeValue, float64(n))
		ch <- prometheus.MustNewConstMetric(ctCapDesc, prometheus.GaugeValue, float64(capacity))
	}
}

var policyDropsDesc = prometheus.NewDesc("skiff_network_policy_drops_total",
	"Packets dropped by network policy, by pod and direction (ingress: to the pod, egress: from it).",
	[]string{"pod", "direction"}, nil)

// policyCollector exports the policy program's drop counters, named by pod.
type policyCollector struct{ e *netpol.Enforcer }

func (c policyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- policyDropsDesc }

func (c policyCollector) Collect(ch chan<- prometheus.Metric) {
	drops, err := c.e.Drops()
	if err != nil {
		return
	}
	res := c.e.Last()
	for _, d := range drops {
		pod := d.Endpoint.String()
		if res != nil {
			if ep, ok := res.Endpoints[d.Endpoint]; ok {
				pod = ep.Pod
			}
		}
		ch <- prometheus.MustNewConstMetric(policyDropsDesc, prometheus.CounterValue, float64(d.Packets), pod, d.Direction.String())
	}
}

// MetricDescriptions are the agent's own metrics (beside GoBGP's bgp_* ones), described by
// the collectors /metrics registers, for the reference docs (`make docs`).
func MetricDescriptions() []*prometheus.Desc {
	collectors := []prometheus.Collector{partsCollector{}, proxyCollector{syncs: newProxySyncSeconds()}, policyCollector{}, &flows.Observer{}}
	collectors = append(collectors, clusterdns.NewMetrics().Collectors()...)
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	var out []*prometheus.Desc
	for d := range ch {
		out = append(out, d)
	}
	return out
}
