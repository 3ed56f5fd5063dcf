package apiserver

import (
	"context"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/allocator"
	"github.com/skiff-sh/skiff/controlplane/registry"
)

// ipRepairPeriod is how often the ClusterIP repair runs (upstream's repair interval).
const ipRepairPeriod = 3 * time.Minute

// ipAddressWriter is the IPAddresses' registry store as the repair writes to it.
type ipAddressWriter interface {
	rest.Creater
	rest.GracefulDeleter
}

// ipRepair keeps the IPAddresses in step with the Services' ClusterIPs, as upstream's repairip
// controller: a ClusterIP without its IPAddress gets one (Services stored before skiff kept
// IPAddresses, whose reservations were etcd keys: those keys go once the IPAddress exists),
// and an IPAddress the allocator made for a Service that no longer holds it goes after two
// passes (a write that failed half-way). Every API server runs it; its writes are idempotent.
//
// It reads and writes through the registry's stores in process, as the allocator does (no
// loopback connection, no encoding), and reads from the watch cache: a stale view only delays
// a repair (orphans need two passes; a create that lost a race fails with AlreadyExists).
type ipRepair struct {
	services, addrs rest.Lister
	writer          ipAddressWriter
	legacy          allocator.EtcdStore
	ranges          []allocator.Range // the service CIDRs
	log             *slog.Logger
	suspects        map[string]bool
}

func (p *ipRepair) run(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := p.pass(ctx); err != nil {
			p.log.Warn("ClusterIP repair (IPAddresses)", "err", err)
		}
	}, ipRepairPeriod)
}

func (p *ipRepair) pass(ctx context.Context) error {
	cached := &metainternalversion.ListOptions{ResourceVersion: "0"}
	obj, err := p.services.List(genericapirequest.WithNamespace(ctx, metav1.NamespaceAll), cached)
	if err != nil {
		return err
	}
	svcs := ptrs(obj.(*corev1.ServiceList).Items)
	clusterCtx := genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	if obj, err = p.addrs.List(clusterCtx, cached); err != nil {
		return err
	}
	addrs := ptrs(obj.(*networkingv1.IPAddressList).Items)
	keys, err := p.legacy.Keys(ctx, registry.LegacyIPPrefix)
	if err != nil {
		return err
	}
	legacy := make([]string, 0, len(keys))
	for _, k := range keys {
		legacy = append(legacy, strings.TrimPrefix(k, registry.LegacyIPPrefix))
	}
	plan := allocator.PlanRepair(svcs, addrs, legacy, p.ranges, p.suspects)
	p.suspects = plan.Suspects
	failed := map[string]bool{}
	for _, a := range plan.Create {
		parent := a.Spec.ParentRef.Namespace + "/" + a.Spec.ParentRef.Name
		if _, err := p.writer.Create(clusterCtx, a, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			failed[a.Name] = true
			p.log.Warn("ClusterIP repair: creating the IPAddress", "ip", a.Name, "service", parent, "err", err)
			continue
		}
		p.log.Info("ClusterIP repair: made the missing IPAddress", "ip", a.Name, "service", parent)
	}
	for _, a := range plan.Delete {
		_, _, err := p.writer.Delete(clusterCtx, a.Name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &a.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			p.log.Warn("ClusterIP repair: deleting an orphaned IPAddress", "ip", a.Name, "err", err)
			continue
		}
		p.log.Info("ClusterIP repair: deleted an IPAddress no Service holds", "ip", a.Name)
	}
	for _, ip := range plan.DeleteLegacy {
		if failed[ip] {
			continue
		}
		if err := p.legacy.Release(ctx, registry.LegacyIPPrefix+ip); err != nil {
			p.log.Warn("ClusterIP repair: removing a legacy reservation", "ip", ip, "err", err)
		}
	}
	for _, c := range plan.Conflicts {
		p.log.Warn("ClusterIP repair: " + c)
	}
	return nil
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
