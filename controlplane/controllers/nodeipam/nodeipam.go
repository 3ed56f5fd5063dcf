// Package nodeipam gives every Node a spec.podCIDRs block from each cluster CIDR
// (10.244.0.0/16, a /24 each by default; with an IPv6 CIDR beside it, a /64 of that too, in
// the order the CIDRs are given), never the same block twice, and frees the blocks when
// their Node goes. spec.podCIDR is the first.
package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
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
	"github.com/skiff-sh/skiff/internal/podcidr"
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
	sets []*CIDRSet          // one per cluster CIDR, in order
	held map[string][]string // node name -> its blocks, as this controller knows them
}

// Pool is one cluster CIDR and the prefix length of each node's block in it.
type Pool struct {
	CIDR     string
	MaskSize int
}

// New wires the controller to the node informer; pools are the cluster CIDRs (one, or an
// IPv4 and an IPv6 one for a dual-stack cluster).
func New(client kubernetes.Interface, nodes coreinformers.NodeInformer, pools []Pool, log *slog.Logger) (*Controller, error) {
	if len(pools) == 0 || len(pools) > 2 {
		return nil, fmt.Errorf("node IPAM takes one cluster CIDR, or one per IP family; got %d", len(pools))
	}
	var sets []*CIDRSet
	for _, p := range pools {
		set, err := NewCIDRSet(p.CIDR, p.MaskSize)
		if err != nil {
			return nil, err
		}
		sets = append(sets, set)
	}
	if len(sets) == 2 && sets[0].Family() == sets[1].Family() {
		return nil, fmt.Errorf("cluster CIDRs %s and %s are of one IP family; a dual-stack cluster has one IPv4 and one IPv6", pools[0].CIDR, pools[1].CIDR)
	}
	c := &Controller{client: client, nodes: nodes.Lister(), synced: nodes.Informer().HasSynced, sets: sets,
		held: map[string][]string{}, log: log.With("controller", Name)}
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
		if blocks := podcidr.All(n); len(blocks) > 0 {
			c.occupy(n.Name, blocks)
		}
	}
	c.mu.Unlock()
	// One worker: allocations are serialized, so no block is handed out twice.
	c.loop.Run(ctx, 1)
}

// setOf is the set of a block's family, or nil.
func (c *Controller) setOf(block string) *CIDRSet {
	p, err := netip.ParsePrefix(block)
	if err != nil {
		return nil
	}
	for _, s := range c.sets {
		if (s.Family() == 4) == p.Addr().Is4() {
			return s
		}
	}
	return nil
}

// occupy marks a node's blocks used and remembers them as its own.
func (c *Controller) occupy(node string, blocks []string) {
	var held []string
	for _, b := range blocks {
		set := c.setOf(b)
		if set == nil {
			c.log.Warn("node has a pod CIDR of a family the cluster CIDRs lack", "node", node, "podCIDR", b)
			continue
		}
		if err := set.Occupy(b); err != nil {
			c.log.Warn("node has a pod CIDR outside the cluster CIDR", "node", node, "podCIDR", b, "err", err)
			continue
		}
		held = append(held, b)
	}
	c.held[node] = held
}

// release frees a node's blocks.
func (c *Controller) release(node string) {
	for _, b := range c.held[node] {
		if set := c.setOf(b); set != nil {
			_ = set.Release(b)
		}
	}
	delete(c.held, node)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if apierrors.IsNotFound(err) {
		c.release(name)
		return nil
	}
	if err != nil {
		return err
	}
	if blocks := podcidr.All(node); len(blocks) > 0 {
		// A node with blocks keeps them (a cluster turned dual-stack does not add a family
		// to existing nodes, as upstream); blocks held for an earlier node of this name
		// (deleted and recreated before the deletion was seen) are free again.
		if !slices.Equal(c.held[name], blocks) {
			c.release(name)
			c.occupy(name, blocks)
		}
		return nil
	}
	blocks, ok := c.held[name]
	if !ok {
		for _, set := range c.sets {
			b, err := set.AllocateNext()
			if err != nil {
				c.held[name] = blocks
				c.release(name)
				return err
			}
			blocks = append(blocks, b)
		}
		c.held[name] = blocks
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": blocks[0], "podCIDRs": blocks}})
	_, err = c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		c.release(name)
		return nil
	}
	if err == nil {
		c.log.Info("assigned pod CIDRs", "node", name, "podCIDRs", blocks)
	}
	return err
}
