package etcd

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ControlPlaneLabel marks a server's node (node-role.kubernetes.io/control-plane).
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// MemberController keeps an embedded etcd cluster's membership in step with its servers, on
// every server (the calls are idempotent, so no leader is needed): learners that have caught
// up are promoted to voting members, and when a server's Node is deleted (`kubectl delete
// node`) its member leaves the cluster, as k3s's etcd member controller does. Only deletion
// removes a member: a server that is down, or joining and not yet registered, keeps its place.
type MemberController struct {
	Members Membership
	// Self is this server's member name (its node name), never removed from here.
	Self string
	Log  *slog.Logger
}

// Run promotes learners every PromoteInterval and removes the members of deleted control-plane
// Nodes until ctx ends. It watches only Nodes labelled as control plane, so a server's memory
// does not grow with its agents. A removal etcd refuses for now ("unhealthy cluster": a member
// reconnected less than five seconds ago) is tried again at each tick until it is done.
func (c MemberController) Run(ctx context.Context, client kubernetes.Interface) error {
	deleted := make(chan string, 16)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = ControlPlaneLabel
	}))
	nodes := factory.Core().V1().Nodes().Informer()
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if node, ok := obj.(*corev1.Node); ok {
			select {
			case deleted <- node.Name:
			case <-ctx.Done():
			}
		}
	}}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	t := time.NewTicker(PromoteInterval)
	defer t.Stop()
	pending := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case name := <-deleted:
			pending[name] = true
		case <-t.C:
			c.promote(ctx)
		}
		for name := range pending {
			if c.remove(ctx, name) {
				delete(pending, name)
			}
		}
	}
}

func (c MemberController) promote(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	promoted, err := PromoteLearners(ctx, c.Members)
	for _, name := range promoted {
		c.Log.Info("etcd learner promoted to voting member", "member", name)
	}
	if err != nil {
		c.Log.Warn("promoting etcd learners", "err", err)
	}
}

// remove removes the member of a deleted node and says whether it is gone (or was never one).
func (c MemberController) remove(ctx context.Context, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	removed, err := RemoveByName(ctx, c.Members, name, c.Self)
	switch {
	case err != nil:
		c.Log.Warn("removing the etcd member of a deleted server node; trying again", "node", name, "err", err)
		return false
	case removed:
		c.Log.Info("etcd member removed: its server's node was deleted", "member", name)
	}
	return true
}
