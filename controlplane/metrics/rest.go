package metrics

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// Storage is metrics.k8s.io/v1beta1's resources: nodes and pods, read from store. nodes and
// pods are the core resources' storage: a metric carries its object's labels, and label
// selectors choose among the objects, as metrics-server does.
func Storage(store *Store, nodes, pods rest.Lister) map[string]rest.Storage {
	return map[string]rest.Storage{
		"nodes": &NodeREST{store: store, nodes: nodes},
		"pods":  &PodREST{store: store, pods: pods},
	}
}

// NodeREST serves NodeMetrics.
type NodeREST struct {
	store *Store
	nodes rest.Lister
}

var (
	_ rest.Getter               = &NodeREST{}
	_ rest.Lister               = &NodeREST{}
	_ rest.Scoper               = &NodeREST{}
	_ rest.SingularNameProvider = &NodeREST{}
	_ rest.Getter               = &PodREST{}
	_ rest.Lister               = &PodREST{}
	_ rest.Scoper               = &PodREST{}
	_ rest.SingularNameProvider = &PodREST{}
)

func (r *NodeREST) New() runtime.Object     { return &metricsv1beta1.NodeMetrics{} }
func (r *NodeREST) NewList() runtime.Object { return &metricsv1beta1.NodeMetricsList{} }
func (r *NodeREST) Destroy()                {}
func (r *NodeREST) NamespaceScoped() bool   { return false }
func (r *NodeREST) GetSingularName() string { return "nodemetrics" }

// List returns the metrics of the nodes the options select that have them.
func (r *NodeREST) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	nodes, err := listed[*corev1.Node](ctx, r.nodes, opts)
	if err != nil {
		return nil, err
	}
	out := &metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{}}
	for _, n := range nodes {
		if m, ok := r.metrics(n); ok {
			out.Items = append(out.Items, *m)
		}
	}
	return out, nil
}

// Get returns one node's metrics; a node without them (not scraped twice yet, or its agent
// unreachable) is NotFound, as from metrics-server.
func (r *NodeREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	nodes, err := listed[*corev1.Node](ctx, r.nodes, &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		return nil, err
	}
	if len(nodes) == 1 {
		if m, ok := r.metrics(nodes[0]); ok {
			return m, nil
		}
	}
	return nil, apierrors.NewNotFound(metricsv1beta1.Resource("nodes"), name)
}

func (r *NodeREST) metrics(n *corev1.Node) (*metricsv1beta1.NodeMetrics, bool) {
	u, ok := r.store.Node(n.Name)
	if !ok {
		return nil, false
	}
	return &metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, CreationTimestamp: metav1.NewTime(time.Now())},
		Timestamp:  metav1.NewTime(u.Timestamp), Window: metav1.Duration{Duration: u.Window},
		Usage: corev1.ResourceList{corev1.ResourceCPU: u.CPU, corev1.ResourceMemory: u.Memory},
	}, true
}

func (r *NodeREST) ConvertToTable(ctx context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "CPU", Type: "string", Description: "CPU usage in cores"},
		{Name: "Memory", Type: "string", Description: "Memory working set in bytes"},
		{Name: "Window", Type: "string", Description: "The span the usage is measured over"},
	}}
	var items []metricsv1beta1.NodeMetrics
	switch o := obj.(type) {
	case *metricsv1beta1.NodeMetricsList:
		items = o.Items
	case *metricsv1beta1.NodeMetrics:
		items = []metricsv1beta1.NodeMetrics{*o}
	default:
		return nil, fmt.Errorf("unexpected %T", obj)
	}
	for i := range items {
		m := &items[i]
		t.Rows = append(t.Rows, metav1.TableRow{Object: runtime.RawExtension{Object: m},
			Cells: []any{m.Name, m.Usage.Cpu().String(), m.Usage.Memory().String(), m.Window.Duration.String()}})
	}
	return t, nil
}

// PodREST serves PodMetrics.
type PodREST struct {
	store *Store
	pods  rest.Lister
}

func (r *PodREST) New() runtime.Object     { return &metricsv1beta1.PodMetrics{} }
func (r *PodREST) NewList() runtime.Object { return &metricsv1beta1.PodMetricsList{} }
func (r *PodREST) Destroy()                {}
func (r *PodREST) NamespaceScoped() bool   { return true }
func (r *PodREST) GetSingularName() string { return "podmetrics" }

// List returns the metrics of the pods the options select (in the request's namespace, or
// all) that have them.
func (r *PodREST) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	pods, err := listed[*corev1.Pod](ctx, r.pods, opts)
	if err != nil {
		return nil, err
	}
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	usage := r.store.Pods(ns)
	out := &metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{}}
	for _, p := range pods {
		if m, ok := podMetrics(p, usage); ok {
			out.Items = append(out.Items, *m)
		}
	}
	return out, nil
}

// Get returns one pod's metrics, NotFound if it has none.
func (r *PodREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	pods, err := listed[*corev1.Pod](ctx, r.pods, &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		return nil, err
	}
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	if len(pods) == 1 {
		if m, ok := podMetrics(pods[0], r.store.Pods(ns)); ok {
			return m, nil
		}
	}
	return nil, apierrors.NewNotFound(metricsv1beta1.Resource("pods"), name)
}

// podMetrics is a running pod's metrics: every container it has now, in its spec's order.
func podMetrics(p *corev1.Pod, usage map[string][]ContainerUsage) (*metricsv1beta1.PodMetrics, bool) {
	cs, ok := usage[p.Namespace+"/"+p.Name]
	if !ok || p.Status.Phase != corev1.PodRunning {
		return nil, false
	}
	order := map[string]int{}
	for i, c := range p.Spec.Containers {
		order[c.Name] = i
	}
	m := &metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels,
		CreationTimestamp: metav1.NewTime(time.Now())}}
	var latest time.Time
	var window time.Duration
	for _, c := range cs {
		if _, known := order[c.Name]; !known {
			continue // an init or ephemeral container's last figures
		}
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name,
			Usage: corev1.ResourceList{corev1.ResourceCPU: c.CPU, corev1.ResourceMemory: c.Memory}})
		if c.Timestamp.After(latest) {
			latest, window = c.Timestamp, c.Window
		}
	}
	if len(m.Containers) == 0 {
		return nil, false
	}
	sort.Slice(m.Containers, func(i, j int) bool { return order[m.Containers[i].Name] < order[m.Containers[j].Name] })
	m.Timestamp, m.Window = metav1.NewTime(latest), metav1.Duration{Duration: window}
	return m, true
}

func (r *PodREST) ConvertToTable(ctx context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "CPU", Type: "string", Description: "CPU usage of all containers, in cores"},
		{Name: "Memory", Type: "string", Description: "Memory working set of all containers, in bytes"},
		{Name: "Window", Type: "string", Description: "The span the usage is measured over"},
	}}
	var items []metricsv1beta1.PodMetrics
	switch o := obj.(type) {
	case *metricsv1beta1.PodMetricsList:
		items = o.Items
	case *metricsv1beta1.PodMetrics:
		items = []metricsv1beta1.PodMetrics{*o}
	default:
		return nil, fmt.Errorf("unexpected %T", obj)
	}
	for i := range items {
		m := &items[i]
		cpu, mem := corev1.ResourceList{}, corev1.ResourceList{}
		for _, c := range m.Containers {
			addTo(cpu, corev1.ResourceCPU, c.Usage)
			addTo(mem, corev1.ResourceMemory, c.Usage)
		}
		t.Rows = append(t.Rows, metav1.TableRow{Object: runtime.RawExtension{Object: m},
			Cells: []any{m.Name, cpu.Cpu().String(), mem.Memory().String(), m.Window.Duration.String()}})
	}
	return t, nil
}

func addTo(sum corev1.ResourceList, name corev1.ResourceName, from corev1.ResourceList) {
	q := sum[name]
	q.Add(from[name])
	sum[name] = q
}

// listed lists objects of type T through l. The field selector may only name metadata.name
// (all metrics-server accepts); the label selector is the objects'.
func listed[T runtime.Object](ctx context.Context, l rest.Lister, opts *metainternalversion.ListOptions) ([]T, error) {
	in := &metainternalversion.ListOptions{}
	if opts != nil {
		if opts.LabelSelector != nil {
			in.LabelSelector = opts.LabelSelector
		}
		if opts.FieldSelector != nil {
			for _, req := range opts.FieldSelector.Requirements() {
				if req.Field != "metadata.name" {
					return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector: %q is not a supported field; only metadata.name is", req.Field))
				}
			}
			in.FieldSelector = opts.FieldSelector
		}
	}
	obj, err := l.List(ctx, in)
	if err != nil {
		return nil, err
	}
	var out []T
	switch list := obj.(type) {
	case *corev1.NodeList:
		for i := range list.Items {
			out = append(out, any(&list.Items[i]).(T))
		}
	case *corev1.PodList:
		for i := range list.Items {
			out = append(out, any(&list.Items[i]).(T))
		}
	default:
		return nil, fmt.Errorf("metrics: unexpected list %T", obj)
	}
	return out, nil
}
