package apiserver

import (
	"context"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/controlplane/allocator"
	"github.com/skiff-sh/skiff/controlplane/registry"
)

// ipRepairPeriod is how often the ClusterIP repair runs (upstream's repair interval).
const ipRepairPeriod = 3 * time.Minute

// ipRepair keeps the IPAddresses in step with the Services' ClusterIPs, as upstream's repairip
// controller: a ClusterIP without its IPAddress gets one (Services stored before skiff kept
// IPAddresses, whose reservations were etcd keys: those keys go once the IPAddress exists),
// and an IPAddress the allocator made for a Service that no longer holds it goes after two
// passes (a write that failed half-way). Every API server runs it; its writes are idempotent.
type ipRepair struct {
	client   kubernetes.Interface
	legacy   allocator.EtcdStore
	r        allocator.Range
	log      *slog.Logger
	suspects map[string]bool
}

func (p *ipRepair) run(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := p.pass(ctx); err != nil {
			p.log.Warn("ClusterIP repair (IPAddresses)", "err", err)
		}
	}, ipRepairPeriod)
}

func (p *ipRepair) pass(ctx context.Context) error {
	svcs, err := p.client.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	addrs, err := p.client.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	keys, err := p.legacy.Keys(ctx, registry.LegacyIPPrefix)
	if err != nil {
		return err
	}
	legacy := make([]string, 0, len(keys))
	for _, k := range keys {
		legacy = append(legacy, strings.TrimPrefix(k, registry.LegacyIPPrefix))
	}
	plan := allocator.PlanRepair(ptrs(svcs.Items), ptrs(addrs.Items), legacy, p.r, p.suspects)
	p.suspects = plan.Suspects
	failed := map[string]bool{}
	for _, a := range plan.Create {
		if _, err := p.client.NetworkingV1().IPAddresses().Create(ctx, a, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			failed[a.Name] = true
			p.log.Warn("ClusterIP repair: creating the IPAddress", "ip", a.Name, "service", a.Spec.ParentRef.Namespace+"/"+a.Spec.ParentRef.Name, "err", err)
			continue
		}
		p.log.Info("ClusterIP repair: made the missing IPAddress", "ip", a.Name, "service", a.Spec.ParentRef.Namespace+"/"+a.Spec.ParentRef.Name)
	}
	for _, a := range plan.Delete {
		err := p.client.NetworkingV1().IPAddresses().Delete(ctx, a.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &a.UID}})
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
