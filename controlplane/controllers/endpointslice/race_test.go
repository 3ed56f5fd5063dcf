package endpointslice

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
)

// liveFixture is a controller over fake informers whose caches are refreshed from the fake
// API after every sync, as the real informers deliver the controller's writes, and whose API
// checks after every write that no pod is listed in two slices at once: a client reading the
// slices between two writes of one sync sees each pod once (the e2e spec "should create
// Endpoints and EndpointSlices for Pods matching a Service" counts distinct addresses at any
// moment it finds two endpoints).
type liveFixture struct {
	c       *Controller
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	writes  int
	// names generated for created slices, in order; a test can make them sort in any order
	// against creation, as the API server's random suffixes do.
	names []string
	t     *testing.T
}

func newLiveFixture(t *testing.T, names []string, objs ...runtime.Object) *liveFixture {
	t.Helper()
	f := &liveFixture{client: fake.NewSimpleClientset(objs...), names: names, t: t}
	rv := 100
	f.client.PrependReactor("*", "endpointslices", func(a ktesting.Action) (bool, runtime.Object, error) {
		var s *discoveryv1.EndpointSlice
		switch a.GetVerb() {
		case "create":
			s = a.(ktesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
			if s.Name == "" {
				if len(f.names) == 0 {
					t.Fatal("more slices created than the test named")
				}
				s.Name, f.names = f.names[0], f.names[1:]
			}
		case "update":
			s = a.(ktesting.UpdateAction).GetObject().(*discoveryv1.EndpointSlice)
		default:
			return false, nil, nil
		}
		rv++
		s.ResourceVersion = strconv.Itoa(rv)
		f.writes++
		f.checkNoPodTwice(s)
		return false, nil, nil
	})
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	inf := f.factory
	f.c = New(f.client, inf.Core().V1().Services(), inf.Core().V1().Pods(), inf.Discovery().V1().EndpointSlices(),
		inf.Core().V1().Endpoints(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.refresh()
	return f
}

// checkNoPodTwice looks at the API's slices as they will be once s is written.
func (f *liveFixture) checkNoPodTwice(s *discoveryv1.EndpointSlice) {
	objs, err := f.client.Tracker().List(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
		discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"), s.Namespace)
	if err != nil {
		f.t.Fatal(err)
	}
	slices := []*discoveryv1.EndpointSlice{s}
	for i := range objs.(*discoveryv1.EndpointSliceList).Items {
		if cur := &objs.(*discoveryv1.EndpointSliceList).Items[i]; cur.Name != s.Name {
			slices = append(slices, cur)
		}
	}
	seen := map[string]string{}
	for _, sl := range slices {
		for _, e := range sl.Endpoints {
			if prev, ok := seen[e.Addresses[0]]; ok {
				f.t.Errorf("write %d of slice %s: %s is listed in %s and %s", f.writes, s.Name, e.Addresses[0], prev, sl.Name)
			}
			seen[e.Addresses[0]] = sl.Name
		}
	}
}

// refresh makes the informers' caches what the fake API holds.
func (f *liveFixture) refresh() {
	f.t.Helper()
	tracker := f.client.Tracker()
	for _, c := range []struct {
		inf interface{ Replace([]any, string) error }
		gvr schema.GroupVersionResource
		gvk schema.GroupVersionKind
	}{
		{f.factory.Core().V1().Services().Informer().GetIndexer(), corev1.SchemeGroupVersion.WithResource("services"), corev1.SchemeGroupVersion.WithKind("Service")},
		{f.factory.Core().V1().Pods().Informer().GetIndexer(), corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod")},
		{f.factory.Discovery().V1().EndpointSlices().Informer().GetIndexer(), discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")},
		{f.factory.Core().V1().Endpoints().Informer().GetIndexer(), corev1.SchemeGroupVersion.WithResource("endpoints"), corev1.SchemeGroupVersion.WithKind("Endpoints")},
	} {
		list, err := tracker.List(c.gvr, c.gvk, "")
		if err != nil {
			f.t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			f.t.Fatal(err)
		}
		objs := make([]any, len(items))
		for i := range items {
			objs[i] = items[i]
		}
		if err := c.inf.Replace(objs, ""); err != nil {
			f.t.Fatal(err)
		}
	}
}

// syncAndSee runs one sync and lets the caches catch up with it.
func (f *liveFixture) syncAndSee(key string) {
	f.t.Helper()
	if err := f.c.sync(context.Background(), key); err != nil {
		f.t.Fatal(err)
	}
	f.refresh()
}

func (f *liveFixture) setPodIP(name, ip string) {
	f.t.Helper()
	p, err := f.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	p.Status.PodIP = ip
	if _, err := f.client.CoreV1().Pods("default").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.refresh()
}

// The e2e spec's Service: a named target port that resolves to a different number on each
// of two pods, so each pod's endpoint lives in a slice of its own port mapping. The pods get
// their addresses one after the other, and the slices' generated names sort against the order
// they were made in (the API server's suffixes are random). No pod may ever be listed twice,
// and a converged Service is left alone.
func TestSyncNeverListsAPodTwice(t *testing.T) {
	svc := newService("web")
	svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web"), Protocol: corev1.ProtocolTCP}}
	port := func(n int32) podOpt { return func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = n } }
	for _, order := range [][2]string{{"a", "b"}, {"b", "a"}} {
		for _, names := range [][]string{{"web-z", "web-y", "web-x"}, {"web-a", "web-b", "web-c"}} {
			t.Run(fmt.Sprint(order, names), func(t *testing.T) {
				f := newLiveFixture(t, names, svc, newPod("a", "", port(8080)), newPod("b", "", port(8081)))
				f.syncAndSee("default/web") // the placeholder
				f.setPodIP(order[0], "10.0.0.1")
				f.syncAndSee("default/web")
				f.setPodIP(order[1], "10.0.0.2")
				f.syncAndSee("default/web")
				before := f.writes
				f.syncAndSee("default/web")
				if f.writes != before {
					t.Errorf("a converged Service was written %d times", f.writes-before)
				}
				list, _ := f.client.DiscoveryV1().EndpointSlices("default").List(context.Background(), metav1.ListOptions{})
				got := map[int32]string{}
				for _, s := range list.Items {
					for _, e := range s.Endpoints {
						got[*s.Ports[0].Port] += e.TargetRef.Name
					}
				}
				if fmt.Sprint(got) != "map[8080:a 8081:b]" {
					t.Errorf("slices hold %v, want a on 8080 and b on 8081", got)
				}
			})
		}
	}
}
