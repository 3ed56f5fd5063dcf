package registry

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/allocator"
	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/servicefamily"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

// Allocators are what the Service registry reserves ClusterIPs and NodePorts from.
type Allocators struct {
	// IPRanges are the service CIDRs, the primary family first (--service-cidr): one for a
	// single-stack cluster, one per family for dual-stack.
	IPRanges []*allocator.IPRange
	// IPs reserves ClusterIPs in each family of IPRanges. Left nil, Storage makes them:
	// addresses reserved as IPAddress objects (ipAddressStore), honouring LegacyIPs'
	// reservations too.
	IPs       map[corev1.IPFamily]*allocator.Allocator
	LegacyIPs LegacyStore
	NodePorts *allocator.Allocator
}

// Cluster is the families ClusterIPs are allocated in, primary first.
func (a Allocators) Cluster() servicefamily.Cluster {
	var prefixes []netip.Prefix
	for _, r := range a.IPRanges {
		prefixes = append(prefixes, r.Prefix())
	}
	return servicefamily.ClusterOf(prefixes)
}

// ipsOf is the allocator of ip's family (nil when the cluster has none).
func (a Allocators) ipsOf(ip string) *allocator.Allocator {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return nil
	}
	if addr.Unmap().Is4() {
		return a.IPs[corev1.IPv4Protocol]
	}
	return a.IPs[corev1.IPv6Protocol]
}

func services(opts generic.RESTOptionsGetter, alloc Allocators) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*corev1.Service]{
		resource: resource{gr: corev1.Resource("services"), singular: "service",
			newObj: func() runtime.Object { return &corev1.Service{} }, newList: func() runtime.Object { return &corev1.ServiceList{} },
			printer: printers.Services, shortNames: []string{"svc"}, categories: []string{"all"},
			fields: func(obj runtime.Object) fields.Set {
				svc := obj.(*corev1.Service)
				return fields.Set{"spec.clusterIP": svc.Spec.ClusterIP, "spec.type": string(svc.Spec.Type)}
			}},
		namespaced: true, status: true,
		validate:       validation.Service,
		validateUpdate: validation.ServiceUpdate,
		adjust: func(main *REST, _ *strategy) {
			h := serviceHooks{alloc: alloc, cluster: alloc.Cluster(), exists: func(ctx context.Context, name string) bool {
				_, err := main.Store.Get(ctx, name, &metav1.GetOptions{})
				return err == nil
			}}
			main.Store.BeginCreate = h.beginCreate
			main.Store.BeginUpdate = h.beginUpdate
			main.Store.AfterDelete = h.afterDelete
		},
	}))
}

// serviceHooks reserve a Service's ClusterIP and NodePorts before it is stored and release
// them when it is deleted or the write fails.
type serviceHooks struct {
	alloc Allocators
	// cluster is the families alloc serves, derived once.
	cluster servicefamily.Cluster
	// exists reports whether a Service of that name is stored, so creating it twice says
	// AlreadyExists rather than that its ClusterIP is taken.
	exists func(ctx context.Context, name string) bool
}

// needsClusterIP is false for ExternalName and headless Services.
func needsClusterIP(s *corev1.Service) bool {
	return s.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.ClusterIP != corev1.ClusterIPNone
}

func needsNodePorts(s *corev1.Service) bool {
	switch s.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return s.Spec.AllocateLoadBalancerNodePorts == nil || *s.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

// needsHealthCheck: a LoadBalancer Service with externalTrafficPolicy Local gets a
// healthCheckNodePort, on which every node says whether it has local endpoints.
func needsHealthCheck(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// txn tracks what one write reserved, to undo on failure, and what it frees, to release on
// success.
type txn struct {
	alloc      Allocators
	ips, ports []string // reserved by this write
	freeIPs    []string // to release once the write succeeded
	freePorts  []string
	// dryRun: the write is not stored, so what it would free stays held.
	dryRun bool
}

func (t *txn) finish(ctx context.Context, success bool) {
	ips, ports := t.ips, t.ports
	if success {
		ips, ports = t.freeIPs, t.freePorts
		if t.dryRun {
			ips, ports = nil, nil
		}
	}
	for _, ip := range ips {
		if a := t.alloc.ipsOf(ip); a != nil {
			_ = a.Release(context.WithoutCancel(ctx), ip)
		}
	}
	for _, p := range ports {
		_ = t.alloc.NodePorts.Release(context.WithoutCancel(ctx), p)
	}
}

func allocError(svc *corev1.Service, fld *field.Path, value any, err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, allocator.ErrAllocated):
		msg = fmt.Sprintf("failed to allocate %v: provided value is already allocated", value)
	case errors.Is(err, allocator.ErrNotInRange):
		msg = fmt.Sprintf("failed to allocate %v: provided value is not in the valid range", value)
	case errors.Is(err, allocator.ErrFull):
		msg = "failed to allocate a value: range is full"
	default:
		return apierrors.NewInternalError(err)
	}
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name,
		field.ErrorList{field.Invalid(fld, value, msg)})
}

// allocIPs reserves a cluster IP for each family of svc that has none yet, or the address
// asked for in clusterIPs; old (nil on create) says which are held already.
func (h serviceHooks) allocIPs(ctx context.Context, t *txn, svc, old *corev1.Service, dryRun bool) error {
	held := map[string]bool{}
	if old != nil && needsClusterIP(old) {
		for _, ip := range old.Spec.ClusterIPs {
			held[ip] = true
		}
	}
	for i, f := range svc.Spec.IPFamilies {
		fld := field.NewPath("spec", "clusterIPs").Index(i)
		if i < len(svc.Spec.ClusterIPs) && held[svc.Spec.ClusterIPs[i]] {
			continue
		}
		if dryRun {
			continue // a dry run allocates nothing; the address stays unset, as it was asked
		}
		ips := h.alloc.IPs[f]
		if ips == nil {
			return allocError(svc, fld, f, fmt.Errorf("%s is not configured on this cluster", f))
		}
		if i < len(svc.Spec.ClusterIPs) && svc.Spec.ClusterIPs[i] != "" {
			ip := svc.Spec.ClusterIPs[i]
			if err := ips.Allocate(ctx, ip, svc.Namespace+"/"+svc.Name); err != nil {
				return allocError(svc, fld, ip, err)
			}
			t.ips = append(t.ips, ip)
			continue
		}
		ip, err := ips.AllocateNext(ctx, svc.Namespace+"/"+svc.Name)
		if err != nil {
			return allocError(svc, fld, "", err)
		}
		if i < len(svc.Spec.ClusterIPs) {
			svc.Spec.ClusterIPs[i] = ip
		} else {
			svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, ip)
		}
		t.ips = append(t.ips, ip)
	}
	if len(svc.Spec.ClusterIPs) > 0 {
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	}
	return nil
}

// allocPorts reserves node ports for svc that old (nil on create) did not hold.
func (h serviceHooks) allocPorts(ctx context.Context, t *txn, svc, old *corev1.Service, dryRun bool) error {
	held := map[int32]bool{}
	if old != nil && needsNodePorts(old) {
		for _, p := range old.Spec.Ports {
			if p.NodePort != 0 {
				held[p.NodePort] = true
			}
		}
	}
	kept := map[int32]bool{}
	if needsNodePorts(svc) && !dryRun {
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			fld := field.NewPath("spec", "ports").Index(i).Child("nodePort")
			switch {
			case p.NodePort != 0 && held[p.NodePort]:
			case p.NodePort != 0:
				if err := h.alloc.NodePorts.Allocate(ctx, strconv.Itoa(int(p.NodePort)), svc.Namespace); err != nil {
					return allocError(svc, fld, p.NodePort, err)
				}
				t.ports = append(t.ports, strconv.Itoa(int(p.NodePort)))
			default:
				v, err := h.alloc.NodePorts.AllocateNext(ctx, svc.Namespace)
				if err != nil {
					return allocError(svc, fld, 0, err)
				}
				n, _ := strconv.Atoi(v)
				p.NodePort = int32(n)
				t.ports = append(t.ports, v)
			}
			kept[p.NodePort] = true
		}
	} else if !needsNodePorts(svc) {
		for i := range svc.Spec.Ports {
			if old != nil && held[svc.Spec.Ports[i].NodePort] {
				svc.Spec.Ports[i].NodePort = 0 // type changed away from NodePort: drop them
			}
		}
	}
	for p := range held {
		if !kept[p] {
			t.freePorts = append(t.freePorts, strconv.Itoa(int(p)))
		}
	}
	return h.allocHealthCheck(ctx, t, svc, old, dryRun)
}

// allocHealthCheck reserves, keeps or frees the healthCheckNodePort, as upstream: kept across
// updates (a PUT that omits it keeps it), dropped when the Service stops needing one.
func (h serviceHooks) allocHealthCheck(ctx context.Context, t *txn, svc, old *corev1.Service, dryRun bool) error {
	var oldHC int32
	if old != nil && needsHealthCheck(old) {
		oldHC = old.Spec.HealthCheckNodePort
	}
	fld := field.NewPath("spec", "healthCheckNodePort")
	switch hc := svc.Spec.HealthCheckNodePort; {
	case !needsHealthCheck(svc):
		svc.Spec.HealthCheckNodePort = 0
	case dryRun:
	case hc != 0 && hc == oldHC:
	case hc == 0 && oldHC != 0:
		svc.Spec.HealthCheckNodePort = oldHC
	case hc != 0:
		if err := h.alloc.NodePorts.Allocate(ctx, strconv.Itoa(int(hc)), svc.Namespace); err != nil {
			return allocError(svc, fld, hc, err)
		}
		t.ports = append(t.ports, strconv.Itoa(int(hc)))
	default:
		v, err := h.alloc.NodePorts.AllocateNext(ctx, svc.Namespace)
		if err != nil {
			return allocError(svc, fld, 0, err)
		}
		n, _ := strconv.Atoi(v)
		svc.Spec.HealthCheckNodePort = int32(n)
		t.ports = append(t.ports, v)
	}
	if oldHC != 0 && svc.Spec.HealthCheckNodePort != oldHC {
		t.freePorts = append(t.freePorts, strconv.Itoa(int(oldHC)))
	}
	return nil
}

// syncClusterIPs makes clusterIP and clusterIPs say the same, from whichever the client set,
// as upstream's strategy does; an ExternalName Service has neither, nor families.
func syncClusterIPs(svc *corev1.Service) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs, svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = "", nil, nil, nil
		return
	}
	switch {
	case svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) > 0:
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	case svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0:
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
}

// decide fills svc's IP family fields for this cluster, or says why it cannot.
func (h serviceHooks) decide(svc, old *corev1.Service) error {
	if errs := servicefamily.Decide(svc, old, h.cluster); len(errs) > 0 {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, errs)
	}
	return nil
}

func (h serviceHooks) beginCreate(ctx context.Context, obj runtime.Object, options *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
	svc := obj.(*corev1.Service)
	dryRun := len(options.DryRun) > 0
	t := &txn{alloc: h.alloc, dryRun: dryRun}
	syncClusterIPs(svc)
	if err := h.decide(svc, nil); err != nil {
		return nil, err
	}
	if needsClusterIP(svc) {
		if err := h.allocIPs(ctx, t, svc, nil, dryRun); err != nil {
			t.finish(ctx, false)
			if svc.Name != "" && h.exists(ctx, svc.Name) {
				return nil, apierrors.NewAlreadyExists(corev1.Resource("services"), svc.Name)
			}
			return nil, err
		}
	}
	if err := h.allocPorts(ctx, t, svc, nil, dryRun); err != nil {
		t.finish(ctx, false)
		return nil, err
	}
	return t.finish, nil
}

func (h serviceHooks) beginUpdate(ctx context.Context, obj, oldObj runtime.Object, options *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
	svc, old := obj.(*corev1.Service), oldObj.(*corev1.Service)
	dryRun := len(options.DryRun) > 0
	t := &txn{alloc: h.alloc, dryRun: dryRun}
	// A PUT that omits the allocated addresses keeps them, as upstream: clusterIP and
	// clusterIPs each, so one that names only the primary keeps the secondary too.
	if needsClusterIP(svc) && needsClusterIP(old) {
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = old.Spec.ClusterIP
		}
		if len(svc.Spec.ClusterIPs) == 0 && svc.Spec.ClusterIP == old.Spec.ClusterIP {
			svc.Spec.ClusterIPs = slices.Clone(old.Spec.ClusterIPs)
		}
	}
	syncClusterIPs(svc)
	if err := h.decide(svc, old); err != nil {
		return nil, err
	}
	if needsClusterIP(svc) && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		if err := h.allocIPs(ctx, t, svc, old, dryRun); err != nil {
			t.finish(ctx, false)
			return nil, err
		}
	}
	// What the old Service held and the new one does not (a type or headless change, a
	// secondary family released) is freed once the write succeeds.
	if needsClusterIP(old) {
		for _, ip := range old.Spec.ClusterIPs {
			if !needsClusterIP(svc) || !slices.Contains(svc.Spec.ClusterIPs, ip) {
				t.freeIPs = append(t.freeIPs, ip)
			}
		}
	}
	// A PUT that omits allocated node ports keeps them, as upstream.
	if needsNodePorts(svc) && needsNodePorts(old) {
		for i := range svc.Spec.Ports {
			if svc.Spec.Ports[i].NodePort == 0 {
				for _, op := range old.Spec.Ports {
					if op.Port == svc.Spec.Ports[i].Port && op.Protocol == svc.Spec.Ports[i].Protocol {
						svc.Spec.Ports[i].NodePort = op.NodePort
					}
				}
			}
		}
	}
	if err := h.allocPorts(ctx, t, svc, old, dryRun); err != nil {
		t.finish(ctx, false)
		return nil, err
	}
	return t.finish, nil
}

func (h serviceHooks) afterDelete(obj runtime.Object, options *metav1.DeleteOptions) {
	if len(options.DryRun) > 0 {
		return
	}
	svc := obj.(*corev1.Service)
	t := &txn{alloc: h.alloc}
	if needsClusterIP(svc) {
		for _, ip := range svc.Spec.ClusterIPs {
			if ip != "" {
				t.freeIPs = append(t.freeIPs, ip)
			}
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			t.freePorts = append(t.freePorts, strconv.Itoa(int(p.NodePort)))
		}
	}
	if needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort != 0 {
		t.freePorts = append(t.freePorts, strconv.Itoa(int(svc.Spec.HealthCheckNodePort)))
	}
	t.finish(context.Background(), true)
}
