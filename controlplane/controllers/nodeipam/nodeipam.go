// Package nodeipam gives every Node a spec.podCIDR block from the cluster CIDR (10.244.0.0/16,
// a /24 each by default), never the same block twice, and frees a block when its Node goes.
package nodeipam

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "node-ipam-controller"

// Controller assigns pod CIDRs.
type Controller struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
	synced cache.InformerSynced
	loop   *loop.Loop
	log    *slog.Logger

	mu   sync.Mutex
	set  *CIDRSet
	held map[string]string // node name -> block, as this controller knows it
}

// New wires the controller to the node informer.
func New(client kubernetes.Interface, nodes coreinformers.NodeInformer, clusterCIDR string, maskSize int, log *slog.Logger) (*Controller, error) {
	set, err := NewCIDRSet(clusterCIDR, maskSize)
	if err != nil {
		return nil, err
	}
	c := &Controller{client: client, nodes: nodes.Lister(), synced: nodes.Informer().HasSynced, set: set,
		held: map[string]string{}, log: log.With("controller", Name)}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = nodes.Informer().AddEventHandler(c.loop.Handler())
	return c, nil
}

// Run marks every block already on a Node as used, then assigns blocks to Nodes without one.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	nodes, _ := c.nodes.List(labels.Everything())
	c.mu.Lock()
	for _, n := range nodes {
		if n.Spec.PodCIDR != "" {
			if err := c.set.Occupy(n.Spec.PodCIDR); err != nil {
				c.log.Warn("node has a pod CIDR outside the cluster CIDR", "node", n.Name, "podCIDR", n.Spec.PodCIDR, "err", err)
				continue
			}
			c.held[n.Name] = n.Spec.PodCIDR
		}
	}
	c.mu.Unlock()
	// One worker: allocations are serialized, so no block is handed out twice.
	c.loop.Run(ctx, 1)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if apierrors.IsNotFound(err) {
		if block, ok := c.held[name]; ok {
			_ = c.set.Release(block)
			delete(c.held, name)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if node.Spec.PodCIDR != "" {
		if c.held[name] != node.Spec.PodCIDR {
			// A block held for an earlier node of this name (deleted and recreated with a
			// block of its own before the deletion was seen) is free again.
			if old, ok := c.held[name]; ok {
				_ = c.set.Release(old)
			}
			_ = c.set.Occupy(node.Spec.PodCIDR)
			c.held[name] = node.Spec.PodCIDR
		}
		return nil
	}
	block, ok := c.held[name]
	if !ok {
		if block, err = c.set.AllocateNext(); err != nil {
			return err
		}
		c.held[name] = block
	}
	patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, block, block)
	_, err = c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		_ = c.set.Release(block)
		delete(c.held, name)
		return nil
	}
	if err == nil {
		c.log.Info("assigned pod CIDR", "node", name, "podCIDR", block)
	}
	return err
}
