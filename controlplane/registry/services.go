package registry

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/skiff-sh/skiff/controlplane/validation"
)

// Allocators are what the Service registry reserves ClusterIPs and NodePorts from.
type Allocators struct {
	// IPs reserves ClusterIPs. Left nil, Storage makes it: addresses of IPRange reserved as
	// IPAddress objects (ipAddressStore), honouring LegacyIPs' reservations too.
	IPs       *allocator.Allocator
	IPRange   allocator.Range
	LegacyIPs LegacyStore
	NodePorts *allocator.Allocator
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
			h := serviceHooks{alloc: alloc, exists: func(ctx context.Context, name string) bool {
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
}

func (t *txn) finish(ctx context.Context, success bool) {
	ips, ports := t.ips, t.ports
	if success {
		ips, ports = t.freeIPs, t.freePorts
	}
	for _, ip := range ips {
		_ = t.alloc.IPs.Release(context.WithoutCancel(ctx), ip)
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

func (h serviceHooks) allocIP(ctx context.Context, t *txn, svc *corev1.Service, dryRun bool) error {
	fld := field.NewPath("spec", "clusterIPs").Index(0)
	switch {
	case dryRun:
		return nil
	case svc.Spec.ClusterIP != "":
		if err := h.alloc.IPs.Allocate(ctx, svc.Spec.ClusterIP, svc.Namespace+"/"+svc.Name); err != nil {
			return allocError(svc, fld, svc.Spec.ClusterIP, err)
		}
	default:
		ip, err := h.alloc.IPs.AllocateNext(ctx, svc.Namespace+"/"+svc.Name)
		if err != nil {
			return allocError(svc, fld, "", err)
		}
		svc.Spec.ClusterIP = ip
	}
	t.ips = append(t.ips, svc.Spec.ClusterIP)
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

func normalizeIPs(svc *corev1.Service) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs, svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = "", nil, nil, nil
		return
	}
	if svc.Spec.ClusterIP != "" {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
	single := corev1.IPFamilyPolicySingleStack
	svc.Spec.IPFamilyPolicy = &single
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
}

func (h serviceHooks) beginCreate(ctx context.Context, obj runtime.Object, options *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
	svc := obj.(*corev1.Service)
	dryRun := len(options.DryRun) > 0
	t := &txn{alloc: h.alloc}
	if svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) > 0 {
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	}
	if needsClusterIP(svc) {
		if err := h.allocIP(ctx, t, svc, dryRun); err != nil {
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
	normalizeIPs(svc)
	return t.finish, nil
}

func (h serviceHooks) beginUpdate(ctx context.Context, obj, oldObj runtime.Object, options *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
	svc, old := obj.(*corev1.Service), oldObj.(*corev1.Service)
	dryRun := len(options.DryRun) > 0
	t := &txn{alloc: h.alloc}
	switch {
	case needsClusterIP(svc) && !needsClusterIP(old):
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			break
		}
		if err := h.allocIP(ctx, t, svc, dryRun); err != nil {
			return nil, err
		}
	case !needsClusterIP(svc) && needsClusterIP(old):
		t.freeIPs = append(t.freeIPs, old.Spec.ClusterIP)
	case needsClusterIP(svc) && svc.Spec.ClusterIP == "":
		svc.Spec.ClusterIP = old.Spec.ClusterIP // a PUT that omits the allocated IP keeps it
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
	normalizeIPs(svc)
	return t.finish, nil
}

func (h serviceHooks) afterDelete(obj runtime.Object, options *metav1.DeleteOptions) {
	if len(options.DryRun) > 0 {
		return
	}
	svc := obj.(*corev1.Service)
	t := &txn{alloc: h.alloc}
	if needsClusterIP(svc) && svc.Spec.ClusterIP != "" {
		t.freeIPs = append(t.freeIPs, svc.Spec.ClusterIP)
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
