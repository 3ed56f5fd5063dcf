package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/skiff-sh/skiff/agent/stats"
)

var t0 = time.Unix(1700000000, 0)

func TestRate(t *testing.T) {
	start := t0.Add(-time.Hour)
	for _, c := range []struct {
		name       string
		prev, cur  Sample
		container  bool
		ok         bool
		milli, mem int64
	}{
		{"half a core", Sample{CPU: 10, CPUTime: t0, Start: start}, Sample{CPU: 17.5, CPUTime: t0.Add(15 * time.Second), Memory: 4096, Start: start}, true, true, 500, 4096},
		{"idle", Sample{CPU: 10, CPUTime: t0}, Sample{CPU: 10, CPUTime: t0.Add(15 * time.Second), Memory: 1}, false, true, 0, 1},
		{"rounds to the nearest millicore", Sample{CPU: 0, CPUTime: t0}, Sample{CPU: 0.0155, CPUTime: t0.Add(time.Second)}, false, true, 16, 0},
		{"same time", Sample{CPU: 1, CPUTime: t0}, Sample{CPU: 2, CPUTime: t0}, false, false, 0, 0},
		{"out of order", Sample{CPU: 1, CPUTime: t0}, Sample{CPU: 2, CPUTime: t0.Add(-time.Second)}, false, false, 0, 0},
		{"counter went back", Sample{CPU: 5, CPUTime: t0}, Sample{CPU: 1, CPUTime: t0.Add(time.Second)}, false, false, 0, 0},
		{"container restarted", Sample{CPU: 1, CPUTime: t0, Start: start}, Sample{CPU: 2, CPUTime: t0.Add(time.Second), Start: start.Add(time.Minute)}, true, false, 0, 0},
		{"a node's start is not compared", Sample{CPU: 1, CPUTime: t0, Start: start}, Sample{CPU: 2, CPUTime: t0.Add(time.Second), Start: start.Add(time.Minute)}, false, true, 1000, 0},
	} {
		u, ok := rate(c.prev, c.cur, c.container)
		if ok != c.ok {
			t.Errorf("%s: ok = %v", c.name, ok)
			continue
		}
		if !ok {
			continue
		}
		if u.CPU.MilliValue() != c.milli || u.Memory.Value() != c.mem {
			t.Errorf("%s: cpu %dm memory %d, want %dm %d", c.name, u.CPU.MilliValue(), u.Memory.Value(), c.milli, c.mem)
		}
		if !u.Timestamp.Equal(c.cur.CPUTime) || u.Window != c.cur.CPUTime.Sub(c.prev.CPUTime) {
			t.Errorf("%s: timestamp %v window %v", c.name, u.Timestamp, u.Window)
		}
	}
}

func key(ns, pod, c string) ContainerKey { return ContainerKey{ns, pod, c} }

func TestStore(t *testing.T) {
	s := NewStore()
	start := t0.Add(-time.Hour)
	first := Scrape{Node: &Sample{CPU: 100, CPUTime: t0, Memory: 1 << 30}, Containers: map[ContainerKey]Sample{
		key("default", "web", "app"):     {CPU: 1, CPUTime: t0, Memory: 10, Start: start},
		key("default", "web", "sidecar"): {CPU: 1, CPUTime: t0, Memory: 10, Start: start},
		key("kube-system", "dns", "dns"): {CPU: 1, CPUTime: t0, Memory: 10, Start: start},
		key("default", "flap", "c"):      {CPU: 1, CPUTime: t0, Memory: 10, Start: start},
	}}
	s.Ingest("n1", first)
	if _, ok := s.Node("n1"); ok {
		t.Error("a node scraped once has a rate")
	}
	if got := s.Pods(""); len(got) != 0 {
		t.Errorf("pods after one scrape: %v", got)
	}
	t1 := t0.Add(10 * time.Second)
	s.Ingest("n1", Scrape{Node: &Sample{CPU: 115, CPUTime: t1, Memory: 2 << 30}, Containers: map[ContainerKey]Sample{
		key("default", "web", "app"):     {CPU: 3, CPUTime: t1, Memory: 20, Start: start},
		key("default", "web", "sidecar"): {CPU: 1.5, CPUTime: t1, Memory: 30, Start: start},
		key("kube-system", "dns", "dns"): {CPU: 1.1, CPUTime: t1, Memory: 10, Start: start},
		key("default", "flap", "c"):      {CPU: 0.1, CPUTime: t1, Memory: 10, Start: t1.Add(-time.Second)},
		key("default", "new", "c"):       {CPU: 0.1, CPUTime: t1, Memory: 10, Start: t1},
	}})
	n, ok := s.Node("n1")
	if !ok || n.CPU.MilliValue() != 1500 || n.Memory.Value() != 2<<30 {
		t.Errorf("node: %v %v", n, ok)
	}
	pods := s.Pods("default")
	if len(pods) != 1 || len(pods["default/web"]) != 2 {
		t.Fatalf("default's pods: %v (a restarted or new container has no rate; another namespace is not listed)", pods)
	}
	for _, c := range pods["default/web"] {
		want := map[string]int64{"app": 200, "sidecar": 50}[c.Name]
		if c.CPU.MilliValue() != want {
			t.Errorf("web/%s: %dm, want %dm", c.Name, c.CPU.MilliValue(), want)
		}
	}
	if all := s.Pods(""); len(all) != 2 {
		t.Errorf("all pods: %v", all)
	}
	// A failed scrape (recorded empty) leaves no rate across the gap.
	s.Ingest("n1", Scrape{})
	if _, ok := s.Node("n1"); ok {
		t.Error("a rate across a failed scrape")
	}
	s.Retain(map[string]bool{})
	if len(s.nodes) != 0 {
		t.Error("Retain kept a deleted node")
	}
}

func TestParse(t *testing.T) {
	// The agent's own rendering, so the two ends cannot drift apart.
	ts := t0.UnixNano()
	n, err := stats.ParseNode([]byte("cpu 100 0 50 1000 0 0 0 0 0 0\n"), []byte("MemTotal: 1000 kB\nMemAvailable: 400 kB\n"), t0)
	if err != nil {
		t.Fatal(err)
	}
	sum := stats.Build(n, nil, nil)
	text := string(stats.Resource(&sum, false)) + `container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2.5 1700000000000
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 4096 1700000000000
container_start_time_seconds{container="app",namespace="default",pod="web"} 1.6999e+09 1700000000000
container_cpu_usage_seconds_total{container="nomem",namespace="default",pod="web"} 1 1700000000000
`
	// The families were already declared above; join the samples to them as one exposition.
	text = regroup(text)
	sc, err := Parse(strings.NewReader(text), time.Now())
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if sc.Node == nil || sc.Node.CPU != 1.5 || sc.Node.Memory != 600*1024 || sc.Node.CPUTime.UnixNano() != ts {
		t.Errorf("node %+v", sc.Node)
	}
	app, ok := sc.Containers[key("default", "web", "app")]
	if !ok || app.CPU != 2.5 || app.Memory != 4096 || app.Start.Unix() != 1699900000 {
		t.Errorf("app %+v", app)
	}
	if _, ok := sc.Containers[key("default", "web", "nomem")]; ok || len(sc.Containers) != 1 {
		t.Errorf("a container without memory is kept: %v", sc.Containers)
	}

	for name, bad := range map[string]string{
		"scrape error": "resource_scrape_error 1\n",
		"negative":     "# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total -1\n",
		"NaN":          "# TYPE node_memory_working_set_bytes gauge\nnode_memory_working_set_bytes NaN\n",
		"garbage":      "node_cpu_usage_seconds_total{ 1\n",
	} {
		if _, err := Parse(strings.NewReader(bad), time.Now()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// regroup moves each sample line under its family's TYPE line, as an exposition must have
// them (a family's samples together).
func regroup(text string) string {
	var order []string
	lines := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		name := l
		if strings.HasPrefix(l, "# ") {
			name = strings.Fields(l)[2]
		} else if i := strings.IndexAny(l, "{ "); i > 0 {
			name = l[:i]
		}
		if _, seen := lines[name]; !seen {
			order = append(order, name)
		}
		lines[name] = append(lines[name], l)
	}
	var b strings.Builder
	for _, n := range order {
		b.WriteString(strings.Join(lines[n], "\n") + "\n")
	}
	return b.String()
}

// fakeLister lists a fixed set of nodes or pods, honouring label and metadata.name selectors.
type fakeLister struct {
	rest.Lister
	nodes []corev1.Node
	pods  []corev1.Pod
}

func (f fakeLister) List(ctx context.Context, o *metainternalversion.ListOptions) (runtime.Object, error) {
	match := func(m metav1.ObjectMeta) bool {
		if o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(m.Labels)) {
			return false
		}
		return o.FieldSelector == nil || o.FieldSelector.Matches(fields.Set{"metadata.name": m.Name})
	}
	if f.nodes != nil {
		out := &corev1.NodeList{}
		for _, n := range f.nodes {
			if match(n.ObjectMeta) {
				out.Items = append(out.Items, n)
			}
		}
		return out, nil
	}
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	out := &corev1.PodList{}
	for _, p := range f.pods {
		if (ns == "" || p.Namespace == ns) && match(p.ObjectMeta) {
			out.Items = append(out.Items, p)
		}
	}
	return out, nil
}

func TestREST(t *testing.T) {
	s := NewStore()
	start := t0.Add(-time.Hour)
	t1 := t0.Add(15 * time.Second)
	for i, at := range []time.Time{t0, t1} {
		cpu := float64(i) * 3 // 200m over 15 s
		s.Ingest("n1", Scrape{Node: &Sample{CPU: cpu * 10, CPUTime: at, Memory: 1 << 20}, Containers: map[ContainerKey]Sample{
			key("default", "web", "app"):     {CPU: cpu, CPUTime: at, Memory: 100, Start: start},
			key("default", "web", "sidecar"): {CPU: cpu, CPUTime: at, Memory: 50, Start: start},
			key("default", "job", "c"):       {CPU: cpu, CPUTime: at, Memory: 50, Start: start},
		}})
	}
	running := corev1.PodStatus{Phase: corev1.PodRunning}
	nodes := fakeLister{nodes: []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"zone": "a"}}}, // never scraped
	}}
	pods := fakeLister{pods: []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar"}, {Name: "app"}}}, Status: running},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "job", Labels: map[string]string{"app": "job"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "web"}, Status: running},
	}}
	st := Storage(s, nodes, pods)
	nr, pr := st["nodes"].(*NodeREST), st["pods"].(*PodREST)
	ctx := context.Background()

	list, err := nr.List(ctx, &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"zone": "a"})})
	if err != nil {
		t.Fatal(err)
	}
	items := list.(*metricsv1beta1.NodeMetricsList).Items
	if len(items) != 1 || items[0].Name != "n1" || items[0].Usage.Cpu().MilliValue() != 2000 || items[0].Window.Duration != 15*time.Second ||
		items[0].Labels["zone"] != "a" {
		t.Errorf("node metrics %+v", items)
	}
	if _, err := nr.Get(ctx, "n2", nil); !apierrors.IsNotFound(err) {
		t.Errorf("n2 (never scraped): %v", err)
	}
	if _, err := nr.Get(ctx, "n1", nil); err != nil {
		t.Errorf("n1: %v", err)
	}
	if _, err := nr.List(ctx, &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.unschedulable", "true")}); !apierrors.IsBadRequest(err) {
		t.Errorf("an unsupported field selector: %v", err)
	}

	dctx := genericapirequest.WithNamespace(ctx, "default")
	obj, err := pr.Get(dctx, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	web := obj.(*metricsv1beta1.PodMetrics)
	if len(web.Containers) != 2 || web.Containers[0].Name != "sidecar" || web.Containers[1].Usage.Cpu().MilliValue() != 200 ||
		web.Containers[1].Usage.Memory().Value() != 100 || web.Labels["app"] != "web" {
		t.Errorf("web's metrics %+v (containers in the spec's order)", web)
	}
	if _, err := pr.Get(dctx, "job", nil); !apierrors.IsNotFound(err) {
		t.Errorf("a finished pod has metrics: %v", err)
	}
	plist, err := pr.List(dctx, &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"app": "web"})})
	if err != nil {
		t.Fatal(err)
	}
	if got := plist.(*metricsv1beta1.PodMetricsList).Items; len(got) != 1 || got[0].Namespace != "default" {
		t.Errorf("pods listed %+v", got)
	}
	table, err := pr.ConvertToTable(dctx, plist, nil)
	if err != nil || len(table.Rows) != 1 || table.Rows[0].Cells[1] != "400m" || table.Rows[0].Cells[2] != "150" {
		t.Errorf("table %+v %v", table, err)
	}
}

// FuzzParse: whatever a node answers, Parse returns a scrape or an error, never a panic, and
// never a negative or non-finite figure.
func FuzzParse(f *testing.F) {
	n, _ := stats.ParseNode([]byte("cpu 1 2 3 4 5 6 7 8 9 10\n"), []byte("MemTotal: 10 kB\nMemAvailable: 5 kB\n"), t0)
	sum := stats.Build(n, nil, nil)
	f.Add(string(stats.Resource(&sum, false)))
	f.Add("container_cpu_usage_seconds_total{container=\"a\",namespace=\"b\",pod=\"c\"} 1e308 1\n")
	f.Add("resource_scrape_error 0\n")
	f.Fuzz(func(t *testing.T, text string) {
		sc, err := Parse(strings.NewReader(text), t0)
		if err != nil {
			return
		}
		for k, c := range sc.Containers {
			if c.CPU < 0 || c.CPU != c.CPU {
				t.Errorf("%v: cpu %v", k, c.CPU)
			}
		}
	})
}
