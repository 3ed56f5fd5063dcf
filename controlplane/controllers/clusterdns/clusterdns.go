// Package clusterdns keeps the cluster DNS Service reachable: kube-system/kube-dns at the
// cluster DNS address (ports 53/UDP and 53/TCP, internalTrafficPolicy Local, no selector),
// and one EndpointSlice per node whose agent serves DNS — the address the agent publishes in
// its Node's dns.skiff.sh/address annotation, ready while the node is Ready. With Local, the
// socket-level balancer on each node sends its pods' queries to that node's own resolver.
package clusterdns

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/loop"
	"github.com/skiff-sh/skiff/internal/wellknown"
)

// Name is the controller's name (and its service account's).
const Name = "cluster-dns-controller"

const (
	// ServiceName is the cluster DNS Service in kube-system, named as kubeadm's CoreDNS
	// add-on names it (tools and tests look it up by name and by its k8s-app label).
	ServiceName = "kube-dns"
	// AddressAnnotation is where an agent publishes its resolver's address (IP:port).
	AddressAnnotation = wellknown.DNSAddressAnnotation
	// ManagedBy marks the EndpointSlices this controller owns.
	ManagedBy = "cluster-dns.skiff.sh"
)

// Controller keeps the Service and the slices.
type Controller struct {
	client    kubernetes.Interface
	serviceIP string
	nodes     corelisters.NodeLister
	services  corelisters.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	loop      *loop.Loop
	synced    []cache.InformerSynced
}

// New wires the controller; serviceIP is the cluster DNS address (10.96.0.10).
func New(client kubernetes.Interface, nodes coreinformers.NodeInformer, services coreinformers.ServiceInformer,
	slices discoveryinformers.EndpointSliceInformer, serviceIP string, log *slog.Logger) (*Controller, error) {
	if _, err := netip.ParseAddr(serviceIP); err != nil {
		return nil, fmt.Errorf("cluster DNS address %q: %w", serviceIP, err)
	}
	c := &Controller{client: client, serviceIP: serviceIP, nodes: nodes.Lister(), services: services.Lister(), slices: slices.Lister(),
		synced: []cache.InformerSynced{nodes.Informer().HasSynced, services.Informer().HasSynced, slices.Informer().HasSynced}}
	c.loop = loop.New(Name, c.sync, log)
	// One key: every change reconciles the Service and all slices (one per node).
	kick := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.loop.Add(ServiceName) },
		UpdateFunc: func(_, _ any) { c.loop.Add(ServiceName) },
		DeleteFunc: func(any) { c.loop.Add(ServiceName) },
	}
	_, _ = nodes.Informer().AddEventHandler(kick)
	ours := func(obj any) bool {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, err := metaOf(obj)
		return err == nil && m.GetNamespace() == metav1.NamespaceSystem &&
			(m.GetName() == ServiceName || m.GetLabels()[discoveryv1.LabelServiceName] == ServiceName)
	}
	filtered := cache.FilteringResourceEventHandler{FilterFunc: ours, Handler: kick}
	_, _ = services.Informer().AddEventHandler(filtered)
	_, _ = slices.Informer().AddEventHandler(filtered)
	return c, nil
}

func metaOf(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return m, nil
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Add(ServiceName)
	c.loop.Run(ctx, 1)
}

// Service is the kube-dns Service as it must be.
func Service(ip string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName, Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "skiff-dns"}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
		},
	}
}

// Desired is the slice of each node serving DNS, by node name: a pure function of the nodes.
func Desired(nodes []*corev1.Node) map[string]*discoveryv1.EndpointSlice {
	out := map[string]*discoveryv1.EndpointSlice{}
	for _, n := range nodes {
		host, portText, err := net.SplitHostPort(n.Annotations[AddressAnnotation])
		if err != nil {
			continue
		}
		ip, err := netip.ParseAddr(host)
		port, perr := strconv.ParseUint(portText, 10, 16)
		if err != nil || perr != nil || port == 0 {
			continue
		}
		family := discoveryv1.AddressTypeIPv4
		if ip.Is6() {
			family = discoveryv1.AddressTypeIPv6
		}
		ready := nodeReady(n) && n.DeletionTimestamp == nil
		p := int32(port)
		out[n.Name] = &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: sliceName(n.Name), Namespace: metav1.NamespaceSystem,
				Labels: map[string]string{discoveryv1.LabelServiceName: ServiceName, discoveryv1.LabelManagedBy: ManagedBy}},
			AddressType: family,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip.String()}, NodeName: ptr.To(n.Name),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false)}}},
			Ports: []discoveryv1.EndpointPort{
				{Name: ptr.To("dns"), Port: &p, Protocol: ptr.To(corev1.ProtocolUDP)},
				{Name: ptr.To("dns-tcp"), Port: &p, Protocol: ptr.To(corev1.ProtocolTCP)},
			},
		}
	}
	return out
}

// sliceName is kube-dns-<node>, cut to a valid name.
func sliceName(node string) string {
	name := ServiceName + "-" + node
	if len(name) > 253 {
		name = strings.TrimRight(name[:253], "-.")
	}
	return name
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *Controller) sync(ctx context.Context, _ string) error {
	if err := c.ensureService(ctx); err != nil {
		return err
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	want := Desired(nodes)
	have, err := c.slices.EndpointSlices(metav1.NamespaceSystem).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: ManagedBy}))
	if err != nil {
		return err
	}
	api := c.client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem)
	kept := map[string]bool{}
	for _, s := range have {
		node := ""
		if len(s.Endpoints) == 1 && s.Endpoints[0].NodeName != nil {
			node = *s.Endpoints[0].NodeName
		}
		w, ok := want[node]
		if !ok || s.Name != w.Name || kept[node] {
			if err := api.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			continue
		}
		kept[node] = true
		if sameSlice(s, w) {
			continue
		}
		u := s.DeepCopy()
		u.Labels, u.AddressType, u.Endpoints, u.Ports = w.Labels, w.AddressType, w.Endpoints, w.Ports
		if u.AddressType != s.AddressType {
			// The address type is immutable: replace the slice.
			if err := api.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			kept[node] = false
			continue
		}
		if _, err := api.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	for node, w := range want {
		if kept[node] {
			continue
		}
		if _, err := api.Create(ctx, w, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func sameSlice(a, b *discoveryv1.EndpointSlice) bool {
	return a.AddressType == b.AddressType && apiequality.Semantic.DeepEqual(a.Labels, b.Labels) &&
		apiequality.Semantic.DeepEqual(a.Endpoints, b.Endpoints) && apiequality.Semantic.DeepEqual(a.Ports, b.Ports)
}

// ensureService creates the Service when it is missing and restores its ports and traffic
// policy when they were changed; its address is immutable, so one at another address (the
// flag changed) is left as it is, with a warning in the error.
func (c *Controller) ensureService(ctx context.Context) error {
	want := Service(c.serviceIP)
	have, err := c.services.Services(metav1.NamespaceSystem).Get(ServiceName)
	if apierrors.IsNotFound(err) {
		_, err = c.client.CoreV1().Services(metav1.NamespaceSystem).Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	if have.Spec.ClusterIP != c.serviceIP {
		return fmt.Errorf("service kube-system/%s has address %s, not the cluster DNS address %s: delete it to have it recreated", ServiceName, have.Spec.ClusterIP, c.serviceIP)
	}
	if apiequality.Semantic.DeepEqual(have.Spec.Ports, want.Spec.Ports) && ptr.Deref(have.Spec.InternalTrafficPolicy, "") == corev1.ServiceInternalTrafficPolicyLocal && len(have.Spec.Selector) == 0 {
		return nil
	}
	u := have.DeepCopy()
	u.Spec.Ports, u.Spec.InternalTrafficPolicy, u.Spec.Selector = want.Spec.Ports, want.Spec.InternalTrafficPolicy, nil
	_, err = c.client.CoreV1().Services(metav1.NamespaceSystem).Update(ctx, u, metav1.UpdateOptions{})
	return err
}
