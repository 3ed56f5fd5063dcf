package endpointslicemirroring

import (
	"context"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func endpoints(name string, subsets ...corev1.EndpointSubset) *corev1.Endpoints {
	return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "eps-uid", Labels: map[string]string{"team": "db"}}, Subsets: subsets}
}

func TestDesired(t *testing.T) {
	eps := endpoints("db",
		corev1.EndpointSubset{
			Addresses:         []corev1.EndpointAddress{{IP: "10.1.2.3", Hostname: "db-0", NodeName: ptr.To("n1")}, {IP: "fd00::1"}, {IP: "not-an-ip"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.1.2.4"}},
			Ports:             []corev1.EndpointPort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}},
		},
		corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}, Ports: []corev1.EndpointPort{{Name: "metrics", Port: 9187, Protocol: corev1.ProtocolTCP}}},
	)
	got := Desired(eps)
	if len(got) != 3 {
		t.Fatalf("%d slices, want 3 (v4 and v6 of the first subset, v4 of the second): %+v", len(got), got)
	}
	v4 := got[0]
	if v4.AddressType != discoveryv1.AddressTypeIPv4 || len(v4.Endpoints) != 2 || len(v4.Ports) != 1 || *v4.Ports[0].Port != 5432 || *v4.Ports[0].Name != "pg" {
		t.Fatalf("first slice %+v", v4)
	}
	if e := v4.Endpoints[0]; e.Addresses[0] != "10.1.2.3" || !*e.Conditions.Ready || *e.Hostname != "db-0" || *e.NodeName != "n1" {
		t.Errorf("ready endpoint %+v", e)
	}
	if e := v4.Endpoints[1]; e.Addresses[0] != "10.1.2.4" || *e.Conditions.Ready {
		t.Errorf("not-ready endpoint %+v", e)
	}
	if got[1].AddressType != discoveryv1.AddressTypeIPv6 || got[1].Endpoints[0].Addresses[0] != "fd00::1" {
		t.Errorf("IPv6 slice %+v", got[1])
	}
	if *got[2].Ports[0].Port != 9187 {
		t.Errorf("second subset %+v", got[2])
	}
	var many []corev1.EndpointAddress
	for i := 0; i < MaxEndpoints+5; i++ {
		many = append(many, corev1.EndpointAddress{IP: "10.9." + string(rune('0'+i/250%10)) + "." + string(rune('0'+i%10))})
	}
	if got := Desired(endpoints("big", corev1.EndpointSubset{Addresses: many})); len(got) != 1 || len(got[0].Endpoints) != MaxEndpoints {
		t.Errorf("a huge subset is not capped at %d", MaxEndpoints)
	}
}

type fixture struct {
	c      *Controller
	client *fake.Clientset
}

func newFixture(objs ...runtime.Object) *fixture {
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory.Core().V1().Services(), factory.Core().V1().Endpoints(), factory.Discovery().V1().EndpointSlices(),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Service:
			_ = factory.Core().V1().Services().Informer().GetIndexer().Add(o)
		case *corev1.Endpoints:
			_ = factory.Core().V1().Endpoints().Informer().GetIndexer().Add(o)
		case *discoveryv1.EndpointSlice:
			_ = factory.Discovery().V1().EndpointSlices().Informer().GetIndexer().Add(o)
		}
	}
	return &fixture{c: c, client: client}
}

func (f *fixture) count(verb string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "endpointslices" {
			n++
		}
	}
	return n
}

func service(name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.ServiceSpec{Selector: selector}}
}

func mirrored(name, service string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
		Labels: map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: ManagedBy}}, AddressType: discoveryv1.AddressTypeIPv4}
}

var subset = corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}, Ports: []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}}}

func TestSyncMirrorsSelectorlessServices(t *testing.T) {
	f := newFixture(service("db", nil), endpoints("db", subset))
	if err := f.c.sync(context.Background(), "default/db"); err != nil {
		t.Fatal(err)
	}
	var created *discoveryv1.EndpointSlice
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" {
			created = a.(ktesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
		}
	}
	if created == nil || created.Labels[discoveryv1.LabelServiceName] != "db" || created.Labels[discoveryv1.LabelManagedBy] != ManagedBy ||
		created.Labels["team"] != "db" || len(created.Endpoints) != 1 || created.Endpoints[0].Addresses[0] != "10.1.2.3" {
		t.Fatalf("created %+v", created)
	}
	if ref := metav1.GetControllerOf(created); ref == nil || ref.Kind != "Endpoints" || ref.UID != "eps-uid" {
		t.Errorf("owner %+v", created.OwnerReferences)
	}
}

func TestSyncLeavesOthersAlone(t *testing.T) {
	for name, objs := range map[string][]runtime.Object{
		"a Service with a selector": {service("web", map[string]string{"app": "web"}), endpoints("web", subset)},
		"skip-mirror": {service("db", nil), func() *corev1.Endpoints {
			e := endpoints("db", subset)
			e.Labels[SkipMirror] = "true"
			return e
		}()},
		"no Service": {endpoints("db", subset)},
	} {
		f := newFixture(objs...)
		key := "default/" + objs[len(objs)-1].(*corev1.Endpoints).Name
		if err := f.c.sync(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		if n := f.count("create"); n != 0 {
			t.Errorf("%s: %d slices created", name, n)
		}
	}
}

func TestSyncRemovesMirrorsOfDeletedEndpoints(t *testing.T) {
	f := newFixture(service("db", nil), mirrored("db-1", "db"), mirrored("db-2", "db"), mirrored("web-1", "web"))
	if err := f.c.sync(context.Background(), "default/db"); err != nil {
		t.Fatal(err)
	}
	if n := f.count("delete"); n != 2 {
		t.Errorf("%d slices deleted, want the 2 mirrors of db", n)
	}
}

func TestSyncUpdatesInPlace(t *testing.T) {
	old := mirrored("db-1", "db")
	old.Labels["team"] = "db"
	f := newFixture(service("db", nil), endpoints("db", subset), old)
	if err := f.c.sync(context.Background(), "default/db"); err != nil {
		t.Fatal(err)
	}
	if f.count("update") != 1 || f.count("create") != 0 || f.count("delete") != 0 {
		t.Errorf("actions %v", f.client.Actions())
	}
}

// Mirrors of two subsets whose slices' names sort against the subsets' order are left alone
// (matched by address type and ports, not by position); a change to one subset rewrites only
// its slice.
func TestSyncMatchesSlicesByMapping(t *testing.T) {
	web := corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "10.1.2.4"}}, Ports: []corev1.EndpointPort{{Port: 443, Protocol: corev1.ProtocolTCP}}}
	eps := endpoints("db", subset, web)
	want := Desired(eps)
	slice := func(name string, d discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
		s := mirrored(name, "db")
		s.Labels["team"] = "db"
		s.Endpoints, s.Ports = d.Endpoints, d.Ports
		return s
	}
	f := newFixture(service("db", nil), eps, slice("db-b", want[0]), slice("db-a", want[1]))
	if err := f.c.sync(context.Background(), "default/db"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.client.Actions()); n != 0 {
		t.Fatalf("converged mirrors written: %v", f.client.Actions())
	}
	web.Addresses = append(web.Addresses, corev1.EndpointAddress{IP: "10.1.2.5"})
	f = newFixture(service("db", nil), endpoints("db", subset, web), slice("db-b", want[0]), slice("db-a", want[1]))
	if err := f.c.sync(context.Background(), "default/db"); err != nil {
		t.Fatal(err)
	}
	var updated []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "update" {
			updated = append(updated, a.(ktesting.UpdateAction).GetObject().(*discoveryv1.EndpointSlice).Name)
		}
	}
	if f.count("create")+f.count("delete") != 0 || len(updated) != 1 || updated[0] != "db-a" {
		t.Fatalf("actions %v, want one update of db-a", f.client.Actions())
	}
}
