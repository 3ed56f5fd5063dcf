package endpointslice

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

type fixture struct {
	c      *Controller
	client *fake.Clientset
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	n := 0
	client.PrependReactor("create", "endpointslices", func(a ktesting.Action) (bool, runtime.Object, error) {
		s := a.(ktesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
		if s.Name == "" {
			n++
			s.Name = fmt.Sprintf("%s%d", s.GenerateName, n)
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory.Core().V1().Services(), factory.Core().V1().Pods(), factory.Discovery().V1().EndpointSlices(),
		factory.Core().V1().Endpoints(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Service:
			_ = factory.Core().V1().Services().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *discoveryv1.EndpointSlice:
			_ = factory.Discovery().V1().EndpointSlices().Informer().GetIndexer().Add(o)
		case *corev1.Endpoints:
			_ = factory.Core().V1().Endpoints().Informer().GetIndexer().Add(o)
		}
	}
	return &fixture{c: c, client: client}
}

func (f *fixture) sync(t *testing.T, key string) {
	t.Helper()
	if err := f.c.sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) actions(verb, resource string) []ktesting.Action {
	var out []ktesting.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) slices(verb string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, a := range f.actions(verb, "endpointslices") {
		out = append(out, a.(interface{ GetObject() runtime.Object }).GetObject().(*discoveryv1.EndpointSlice))
	}
	return out
}

func newService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"), Labels: map[string]string{"team": "a"}},
		Spec: corev1.ServiceSpec{
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, // as the API server fills them
			Selector:   map[string]string{"app": "web"},
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
}

type podOpt func(*corev1.Pod)

func newPod(name, ip string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c",
			Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
func terminating(p *corev1.Pod) {
	ts := metav1.Now()
	p.DeletionTimestamp = &ts
}

type conds struct{ ready, serving, terminating bool }

func condsOf(e discoveryv1.Endpoint) conds {
	return conds{ptr.Deref(e.Conditions.Ready, false), ptr.Deref(e.Conditions.Serving, false), ptr.Deref(e.Conditions.Terminating, false)}
}

func TestDesiredConditions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []podOpt
		publish bool
		want    conds
	}{
		{"ready", nil, false, conds{true, true, false}},
		{"not ready", []podOpt{notReady}, false, conds{false, false, false}},
		{"ready and terminating", []podOpt{terminating}, false, conds{false, true, true}},
		{"not ready and terminating", []podOpt{notReady, terminating}, false, conds{false, false, true}},
		{"not ready, publishNotReadyAddresses", []podOpt{notReady}, true, conds{true, true, false}},
		{"terminating, publishNotReadyAddresses", []podOpt{notReady, terminating}, true, conds{true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService("web")
			svc.Spec.PublishNotReadyAddresses = tc.publish
			groups := Desired(svc, []*corev1.Pod{newPod("p", "10.0.0.1", tc.opts...)})
			if len(groups) != 1 || len(groups[0].Endpoints) != 1 {
				t.Fatalf("groups %+v", groups)
			}
			if got := condsOf(groups[0].Endpoints[0]); got != tc.want {
				t.Fatalf("conditions %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDesiredEndpointFields(t *testing.T) {
	svc := newService("web")
	pods := []*corev1.Pod{
		newPod("b", "10.0.0.2", func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "host-b", "web" }),
		newPod("a", "10.0.0.1", func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "host-a", "other" }),
		newPod("no-ip", ""),
		newPod("succeeded", "10.0.0.3", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		newPod("failed", "10.0.0.4", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
		newPod("unscheduled", "10.0.0.5", func(p *corev1.Pod) { p.Spec.NodeName = "" }),
	}
	groups := Desired(svc, pods)
	if len(groups) != 1 {
		t.Fatalf("%d groups, want 1", len(groups))
	}
	g := groups[0]
	var names []string
	for _, e := range g.Endpoints {
		names = append(names, e.TargetRef.Name)
	}
	if fmt.Sprint(names) != "[a b unscheduled]" {
		t.Fatalf("endpoints for %v, want [a b unscheduled] in name order", names)
	}
	a, b, u := g.Endpoints[0], g.Endpoints[1], g.Endpoints[2]
	if len(a.Addresses) != 1 || a.Addresses[0] != "10.0.0.1" {
		t.Errorf("addresses %v", a.Addresses)
	}
	if a.TargetRef.Kind != "Pod" || a.TargetRef.Namespace != "default" || a.TargetRef.UID != "a-uid" {
		t.Errorf("targetRef %+v", a.TargetRef)
	}
	if ptr.Deref(a.NodeName, "") != "node-1" || u.NodeName != nil {
		t.Errorf("nodeName %v / %v", a.NodeName, u.NodeName)
	}
	if a.Hostname != nil || ptr.Deref(b.Hostname, "") != "host-b" {
		t.Errorf("hostname a=%v b=%v: only a pod of the service's subdomain has one", a.Hostname, b.Hostname)
	}
	if len(g.Ports) != 1 || ptr.Deref(g.Ports[0].Port, 0) != 8080 || ptr.Deref(g.Ports[0].Name, "-") != "http" ||
		ptr.Deref(g.Ports[0].Protocol, "") != corev1.ProtocolTCP {
		t.Errorf("ports %+v", g.Ports)
	}
}

func TestDesiredNamedTargetPort(t *testing.T) {
	svc := newService("web")
	svc.Spec.Ports = []corev1.ServicePort{
		{Name: "http", Port: 80, TargetPort: intstr.FromString("web"), Protocol: corev1.ProtocolTCP},
		{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, // targetPort 0: the service port
	}
	port := func(n int32) podOpt {
		return func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = n }
	}
	pods := []*corev1.Pod{
		newPod("a1", "10.0.0.1", port(8080)),
		newPod("b1", "10.0.0.2", port(9090)),
		newPod("a2", "10.0.0.3", port(8080)),
		newPod("udp-named", "10.0.0.4", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolUDP }),
	}
	groups := Desired(svc, pods)
	byPort := map[string][]string{}
	for _, g := range groups {
		var ps []string
		for _, p := range g.Ports {
			ps = append(ps, fmt.Sprintf("%s=%d/%s", *p.Name, *p.Port, *p.Protocol))
		}
		var eps []string
		for _, e := range g.Endpoints {
			eps = append(eps, e.TargetRef.Name)
		}
		byPort[fmt.Sprint(ps)] = eps
	}
	want := map[string][]string{
		"[http=8080/TCP dns=53/UDP]": {"a1", "a2"},
		"[http=9090/TCP dns=53/UDP]": {"b1"},
		// The named port exists only for UDP: that pod serves just the dns port.
		"[dns=53/UDP]": {"udp-named"},
	}
	if fmt.Sprint(byPort) != fmt.Sprint(want) {
		t.Fatalf("groups %v, want %v", byPort, want)
	}
	// Stable order: sorted by port key.
	again := Desired(svc, []*corev1.Pod{pods[3], pods[2], pods[1], pods[0]})
	if !apiequality.Semantic.DeepEqual(again, groups) {
		t.Fatal("Desired depends on pod order")
	}
}

func TestTargetPort(t *testing.T) {
	pod := newPod("p", "10.0.0.1")
	for _, tc := range []struct {
		sp   corev1.ServicePort
		want int32
		ok   bool
	}{
		{corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP}, 80, true},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(81), Protocol: corev1.ProtocolTCP}, 81, true},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("web"), Protocol: corev1.ProtocolTCP}, 8080, true},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("web"), Protocol: corev1.ProtocolUDP}, 0, false},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("nope"), Protocol: corev1.ProtocolTCP}, 0, false},
	} {
		got, ok := targetPort(tc.sp, pod)
		if got != tc.want || ok != tc.ok {
			t.Errorf("targetPort(%+v) = %d %v, want %d %v", tc.sp, got, ok, tc.want, tc.ok)
		}
	}
}

// From no slices, endpoints are packed MaxEndpointsPerSlice to a slice, one port mapping per
// slice.
func TestPlaceFresh(t *testing.T) {
	mk := func(n int) []discoveryv1.Endpoint {
		out := make([]discoveryv1.Endpoint, n)
		for i := range out {
			out[i].Addresses = []string{fmt.Sprintf("10.0.%d.%d", i/256, i%256)}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		sizes []int
		want  []int
	}{
		{"one small group", []int{3}, []int{3}},
		{"exactly 100", []int{100}, []int{100}},
		{"101", []int{101}, []int{100, 1}},
		{"250", []int{250}, []int{100, 100, 50}},
		{"empty group kept", []int{0}, []int{0}},
		{"two groups are never mixed", []int{120, 30}, []int{100, 20, 30}},
		{"no groups", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var groups []Group
			for i, n := range tc.sizes { // each group a port mapping of its own
				ports := []discoveryv1.EndpointPort{{Port: ptr.To(int32(80 + i))}}
				groups = append(groups, Group{Ports: ports, Endpoints: mk(n)})
			}
			plan := Place(nil, groups, MaxEndpointsPerSlice, func(g Group) *discoveryv1.EndpointSlice {
				return &discoveryv1.EndpointSlice{AddressType: g.AddressType, Endpoints: g.Endpoints, Ports: g.Ports}
			})
			if len(plan.Update)+len(plan.Delete) != 0 {
				t.Fatalf("plan from nothing updates or deletes: %+v", plan)
			}
			var got []int
			seen := map[string]bool{}
			for _, g := range plan.Create {
				got = append(got, len(g.Endpoints))
				if len(g.Ports) != 1 {
					t.Errorf("chunk lost its ports")
				}
				for _, e := range g.Endpoints {
					seen[e.Addresses[0]] = true
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("chunk sizes %v, want %v", got, tc.want)
			}
			distinct := 0 // every group reuses the same addresses
			for _, n := range tc.sizes {
				distinct = max(distinct, n)
			}
			if len(seen) != distinct {
				t.Fatalf("%d distinct endpoints, want %d", len(seen), distinct)
			}
		})
	}
}

func TestLegacyEndpoints(t *testing.T) {
	svc := newService("web")
	svc.Spec.Ports[0].AppProtocol = ptr.To("http")
	groups := Desired(svc, []*corev1.Pod{
		newPod("ready", "10.0.0.1"),
		newPod("not-ready", "10.0.0.2", notReady),
		newPod("terminating", "10.0.0.3", terminating),
		newPod("hosted", "10.0.0.4", func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "h", "web" }),
	})
	subsets := LegacyEndpoints(groups)
	if len(subsets) != 1 {
		t.Fatalf("%d subsets, want 1", len(subsets))
	}
	s := subsets[0]
	var ready, notReadyIPs []string
	for _, a := range s.Addresses {
		ready = append(ready, a.IP)
	}
	for _, a := range s.NotReadyAddresses {
		notReadyIPs = append(notReadyIPs, a.IP)
	}
	if fmt.Sprint(ready) != "[10.0.0.4 10.0.0.1]" || fmt.Sprint(notReadyIPs) != "[10.0.0.2]" {
		t.Fatalf("addresses %v notReady %v; the terminating pod must be left out", ready, notReadyIPs)
	}
	if s.Addresses[0].Hostname != "h" || s.Addresses[0].TargetRef == nil || s.Addresses[0].TargetRef.Name != "hosted" ||
		ptr.Deref(s.Addresses[0].NodeName, "") != "node-1" {
		t.Errorf("address %+v", s.Addresses[0])
	}
	if len(s.Ports) != 1 || s.Ports[0].Port != 8080 || s.Ports[0].Name != "http" || s.Ports[0].Protocol != corev1.ProtocolTCP ||
		ptr.Deref(s.Ports[0].AppProtocol, "") != "http" {
		t.Errorf("ports %+v", s.Ports)
	}
	// Only terminating endpoints: no subset at all.
	if got := LegacyEndpoints(Desired(svc, []*corev1.Pod{newPod("t", "10.0.0.9", notReady, terminating)})); len(got) != 0 {
		t.Errorf("subsets %+v for a terminating-only service", got)
	}
	// Missing protocol defaults to TCP.
	legacy := LegacyEndpoints([]Group{{Ports: []discoveryv1.EndpointPort{{Port: ptr.To[int32](1)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"1.1.1.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}}})
	if legacy[0].Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("protocol %q, want TCP", legacy[0].Ports[0].Protocol)
	}
}

func TestSyncCreatesSliceAndEndpoints(t *testing.T) {
	svc := newService("web")
	f := newFixture(t, svc, newPod("a", "10.0.0.1"), newPod("b", "10.0.0.2", notReady),
		newPod("other-app", "10.0.0.3", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }))
	f.sync(t, "default/web")
	created := f.slices("create")
	if len(created) != 1 {
		t.Fatalf("%d slices created, want 1", len(created))
	}
	s := created[0]
	if s.GenerateName != "web-" || s.Namespace != "default" {
		t.Errorf("generateName %q namespace %q", s.GenerateName, s.Namespace)
	}
	if s.Labels[discoveryv1.LabelServiceName] != "web" || s.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" ||
		s.Labels["team"] != "a" {
		t.Errorf("labels %v", s.Labels)
	}
	ref := metav1.GetControllerOf(s)
	if ref == nil || ref.Kind != "Service" || ref.APIVersion != "v1" || ref.Name != "web" || ref.UID != svc.UID {
		t.Errorf("owner %+v", ref)
	}
	if s.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("addressType %s", s.AddressType)
	}
	if len(s.Endpoints) != 2 || s.Endpoints[0].Addresses[0] != "10.0.0.1" || s.Endpoints[1].Addresses[0] != "10.0.0.2" {
		t.Fatalf("endpoints %+v", s.Endpoints)
	}
	if !*s.Endpoints[0].Conditions.Ready || *s.Endpoints[1].Conditions.Ready {
		t.Errorf("ready conditions wrong: %+v", s.Endpoints)
	}
	if len(s.Ports) != 1 || *s.Ports[0].Port != 8080 {
		t.Errorf("ports %+v", s.Ports)
	}
	eps := f.actions("create", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("%d endpoints created, want 1", len(eps))
	}
	ep := eps[0].(ktesting.CreateAction).GetObject().(*corev1.Endpoints)
	if ep.Name != "web" || len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || ep.Subsets[0].Addresses[0].IP != "10.0.0.1" ||
		len(ep.Subsets[0].NotReadyAddresses) != 1 || ep.Subsets[0].NotReadyAddresses[0].IP != "10.0.0.2" {
		t.Fatalf("endpoints %+v", ep)
	}
}

// converged runs a sync on a fresh fixture and returns the objects it created, named.
func converged(t *testing.T, objs ...runtime.Object) []runtime.Object {
	t.Helper()
	f := newFixture(t, objs...)
	f.sync(t, "default/web")
	var out []runtime.Object
	list, err := f.client.DiscoveryV1().EndpointSlices("default").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("slices after the first sync: %v %v", list, err)
	}
	out = append(out, &list.Items[0])
	ep, err := f.client.CoreV1().Endpoints("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return append(out, ep)
}

func TestSyncSteadyStateDoesNothing(t *testing.T) {
	objs := []runtime.Object{newService("web"), newPod("a", "10.0.0.1"), newPod("b", "10.0.0.2", notReady)}
	state := converged(t, objs...)
	f := newFixture(t, append(objs, state...)...)
	f.sync(t, "default/web")
	if acts := f.client.Actions(); len(acts) != 0 {
		t.Fatalf("converged state produced %v", acts)
	}
}

func TestSyncUpdatesInPlace(t *testing.T) {
	objs := []runtime.Object{newService("web"), newPod("a", "10.0.0.1")}
	state := converged(t, objs...)
	// Pod a becomes not ready, pod c appears.
	a := newPod("a", "10.0.0.1", notReady)
	f := newFixture(t, append([]runtime.Object{newService("web"), a, newPod("c", "10.0.0.3")}, state...)...)
	f.sync(t, "default/web")
	if n := len(f.slices("create")) + len(f.actions("delete", "endpointslices")); n != 0 {
		t.Fatalf("%d slice creations/deletions, want an in-place update", n)
	}
	upd := f.slices("update")
	if len(upd) != 1 || upd[0].Name != state[0].(*discoveryv1.EndpointSlice).Name {
		t.Fatalf("updated %v", upd)
	}
	if len(upd[0].Endpoints) != 2 || *upd[0].Endpoints[0].Conditions.Ready || !*upd[0].Endpoints[1].Conditions.Ready {
		t.Fatalf("endpoints %+v", upd[0].Endpoints)
	}
	if ref := metav1.GetControllerOf(upd[0]); ref == nil || ref.UID != "web-uid" {
		t.Fatalf("owner lost on update: %+v", upd[0].OwnerReferences)
	}
	epu := f.actions("update", "endpoints")
	if len(epu) != 1 {
		t.Fatalf("%d endpoints updates, want 1", len(epu))
	}
	ep := epu[0].(ktesting.UpdateAction).GetObject().(*corev1.Endpoints)
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || ep.Subsets[0].Addresses[0].IP != "10.0.0.3" ||
		len(ep.Subsets[0].NotReadyAddresses) != 1 || ep.Subsets[0].NotReadyAddresses[0].IP != "10.0.0.1" {
		t.Fatalf("endpoints %+v", ep.Subsets)
	}
}

func managedSlice(name, service string, managedBy string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
		Labels: map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: managedBy}},
		AddressType: discoveryv1.AddressTypeIPv4}
}

func TestSyncDeletesSurplusSlices(t *testing.T) {
	f := newFixture(t, newService("web"), newPod("a", "10.0.0.1"),
		managedSlice("web-1", "web", ManagedBy),
		managedSlice("web-2", "web", ManagedBy),
		managedSlice("web-3", "web", ManagedBy),
		managedSlice("web-foreign", "web", "someone-else"),
		managedSlice("db-1", "db", ManagedBy),
	)
	f.sync(t, "default/web")
	var deleted []string
	for _, a := range f.actions("delete", "endpointslices") {
		deleted = append(deleted, a.(ktesting.DeleteAction).GetName())
	}
	sort.Strings(deleted)
	if fmt.Sprint(deleted) != "[web-2 web-3]" {
		t.Fatalf("deleted %v, want [web-2 web-3]", deleted)
	}
	if upd := f.slices("update"); len(upd) != 1 || upd[0].Name != "web-1" || len(upd[0].Endpoints) != 1 {
		t.Fatalf("updated %v, want web-1 reused", upd)
	}
	if n := len(f.slices("create")); n != 0 {
		t.Fatalf("%d created", n)
	}
}

func TestSyncManySlices(t *testing.T) {
	objs := []runtime.Object{newService("web")}
	for i := 0; i < 150; i++ {
		objs = append(objs, newPod(fmt.Sprintf("p%03d", i), fmt.Sprintf("10.0.%d.%d", i/200, i%200+1)))
	}
	f := newFixture(t, objs...)
	f.sync(t, "default/web")
	created := f.slices("create")
	if len(created) != 2 || len(created[0].Endpoints) != 100 || len(created[1].Endpoints) != 50 {
		t.Fatalf("slices %d", len(created))
	}
	// Legacy Endpoints keep everything in one subset.
	ep := f.actions("create", "endpoints")[0].(ktesting.CreateAction).GetObject().(*corev1.Endpoints)
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 150 {
		t.Fatalf("endpoints subsets %d", len(ep.Subsets))
	}
}

func TestSyncNoPodsKeepsOneEmptySlice(t *testing.T) {
	f := newFixture(t, newService("web"))
	f.sync(t, "default/web")
	created := f.slices("create")
	if len(created) != 1 || len(created[0].Endpoints) != 0 || len(created[0].Ports) != 1 || *created[0].Ports[0].Port != 8080 {
		t.Fatalf("created %+v, want one empty slice with the service port", created)
	}
	eps := f.actions("create", "endpoints")
	if len(eps) != 1 || len(eps[0].(ktesting.CreateAction).GetObject().(*corev1.Endpoints).Subsets) != 0 {
		t.Fatalf("endpoints %v", eps)
	}
}

func TestSyncLeavesServicesAlone(t *testing.T) {
	noSelector := newService("web")
	noSelector.Spec.Selector = nil
	deleting := newService("web")
	ts := metav1.Now()
	deleting.DeletionTimestamp = &ts
	for name, objs := range map[string][]runtime.Object{
		"without selector": {noSelector, newPod("a", "10.0.0.1"), managedSlice("web-1", "web", ManagedBy)},
		"being deleted":    {deleting, newPod("a", "10.0.0.1")},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, objs...)
			f.sync(t, "default/web")
			if acts := f.client.Actions(); len(acts) != 0 {
				t.Fatalf("actions %v", acts)
			}
		})
	}
	// Gone: only its Endpoints are deleted (the informer may not have seen them yet, so
	// upstream's controller asks regardless); no slice is written.
	f := newFixture(t, newPod("a", "10.0.0.1"))
	f.sync(t, "default/web")
	if acts := f.client.Actions(); len(acts) != 1 || acts[0].GetVerb() != "delete" || acts[0].GetResource().Resource != "endpoints" {
		t.Fatalf("actions %v, want the Endpoints' delete alone", acts)
	}
}

// A deleted Service's Endpoints go with it (its slices go by their owner references).
func TestSyncDeletedServiceDeletesEndpoints(t *testing.T) {
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}
	other := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}}
	f := newFixture(t, ep, other)
	f.sync(t, "default/web")
	deletes := f.actions("delete", "endpoints")
	if len(deletes) != 1 || deletes[0].(ktesting.DeleteAction).GetName() != "web" {
		t.Fatalf("deletes %v, want the Endpoints default/web", deletes)
	}
	if _, err := f.client.CoreV1().Endpoints("default").Get(context.Background(), "other", metav1.GetOptions{}); err != nil {
		t.Fatalf("another Service's Endpoints: %v", err)
	}
	// Already gone (or never made): nothing to do, no error.
	f.sync(t, "default/web")
}

func TestAddressTypes(t *testing.T) {
	svc := newService("web")
	for _, c := range []struct {
		families  []corev1.IPFamily
		clusterIP string
		want      string
	}{
		{[]corev1.IPFamily{corev1.IPv4Protocol}, "10.96.0.10", "[IPv4]"},
		{[]corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, "fd00::10", "[IPv6 IPv4]"},
		{nil, "fd00::10", "[IPv6]"},
		{nil, "10.96.0.10", "[IPv4]"},
		{nil, corev1.ClusterIPNone, "[IPv4 IPv6]"},
	} {
		svc.Spec.IPFamilies, svc.Spec.ClusterIP = c.families, c.clusterIP
		if got := fmt.Sprint(AddressTypes(svc)); got != c.want {
			t.Errorf("families %v clusterIP %s: %s, want %s", c.families, c.clusterIP, got, c.want)
		}
	}
}

// TestDesiredDualStack: a dual-stack Service gets a group per family, each holding the pods'
// address of that family; a pod with one family's address is in that group only.
func TestDesiredDualStack(t *testing.T) {
	svc := newService("web")
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	both := newPod("both", "10.0.0.1", func(p *corev1.Pod) {
		p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
	})
	four := newPod("four", "10.0.0.2")
	groups := Desired(svc, []*corev1.Pod{four, both})
	got := map[discoveryv1.AddressType][]string{}
	for _, g := range groups {
		for _, e := range g.Endpoints {
			got[g.AddressType] = append(got[g.AddressType], e.Addresses[0])
		}
	}
	if fmt.Sprint(got[discoveryv1.AddressTypeIPv4]) != "[10.0.0.1 10.0.0.2]" || fmt.Sprint(got[discoveryv1.AddressTypeIPv6]) != "[fd00::1]" || len(groups) != 2 {
		t.Fatalf("groups %+v", got)
	}
	single := newService("web")
	single.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	if g := Desired(single, []*corev1.Pod{both}); len(g) != 1 || g[0].AddressType != discoveryv1.AddressTypeIPv4 {
		t.Fatalf("an IPv4 Service's groups: %+v", g)
	}
}

// TestSyncDualStack: a slice per family, and the v1 Endpoints in the primary family only.
func TestSyncDualStack(t *testing.T) {
	svc := newService("web")
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	f := newFixture(t, svc, newPod("a", "10.0.0.1", func(p *corev1.Pod) {
		p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
	}))
	f.sync(t, "default/web")
	byType := map[discoveryv1.AddressType]string{}
	for _, s := range f.slices("create") {
		for _, e := range s.Endpoints {
			byType[s.AddressType] += e.Addresses[0]
		}
	}
	if byType[discoveryv1.AddressTypeIPv4] != "10.0.0.1" || byType[discoveryv1.AddressTypeIPv6] != "fd00::1" || len(byType) != 2 {
		t.Fatalf("slices by address type %v", byType)
	}
	eps := f.actions("create", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("%d endpoints created, want 1", len(eps))
	}
	ep := eps[0].(ktesting.CreateAction).GetObject().(*corev1.Endpoints)
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || ep.Subsets[0].Addresses[0].IP != "fd00::1" {
		t.Fatalf("v1 Endpoints %+v, want the primary (IPv6) address alone", ep.Subsets)
	}
}

func TestEndpointsChangedSeesPodIPs(t *testing.T) {
	old := newPod("a", "10.0.0.1")
	old.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}}
	cur := old.DeepCopy()
	cur.Status.PodIPs = append(cur.Status.PodIPs, corev1.PodIP{IP: "fd00::1"})
	if !EndpointsChanged(old, cur) {
		t.Error("a pod that gained its IPv6 address did not change its endpoints")
	}
}
