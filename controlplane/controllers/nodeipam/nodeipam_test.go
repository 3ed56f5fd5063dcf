package nodeipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
)

type fixture struct {
	c       *Controller
	client  *fake.Clientset
	factory informers.SharedInformerFactory
}

func newFixture(t *testing.T, clusterCIDR string, objs ...runtime.Object) *fixture {
	t.Helper()
	return newPoolsFixture(t, []Pool{{CIDR: clusterCIDR, MaskSize: 24}}, objs...)
}

func newPoolsFixture(t *testing.T, pools []Pool, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory.Core().V1().Nodes(), pools, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{c: c, client: client, factory: factory}
	for _, o := range objs {
		f.cache(o.(*corev1.Node))
	}
	return f
}

func (f *fixture) cache(n *corev1.Node) {
	_ = f.factory.Core().V1().Nodes().Informer().GetIndexer().Update(n)
}

func (f *fixture) uncache(name string) {
	_ = f.factory.Core().V1().Nodes().Informer().GetIndexer().Delete(node(name, ""))
}

func (f *fixture) sync(t *testing.T, name string) error {
	t.Helper()
	return f.c.sync(context.Background(), name)
}

// patched returns the podCIDR each node was patched with, in order (single-stack patches).
func (f *fixture) patched(t *testing.T) [][2]string {
	t.Helper()
	var out [][2]string
	for _, p := range f.patchedAll(t) {
		if len(p.podCIDRs) != 1 {
			t.Errorf("single-stack patch with podCIDRs %v", p.podCIDRs)
		}
		out = append(out, [2]string{p.node, p.podCIDR})
	}
	return out
}

type nodePatch struct {
	node, podCIDR string
	podCIDRs      []string
}

// patchedAll returns every node patch, in order, checking podCIDR is podCIDRs[0].
func (f *fixture) patchedAll(t *testing.T) []nodePatch {
	t.Helper()
	var out []nodePatch
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "patch" || a.GetResource().Resource != "nodes" {
			continue
		}
		p := a.(ktesting.PatchAction)
		if p.GetPatchType() != types.MergePatchType {
			t.Errorf("patch type %s", p.GetPatchType())
		}
		var body struct {
			Spec struct {
				PodCIDR  string   `json:"podCIDR"`
				PodCIDRs []string `json:"podCIDRs"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		if len(body.Spec.PodCIDRs) == 0 || body.Spec.PodCIDRs[0] != body.Spec.PodCIDR {
			t.Errorf("podCIDRs %v do not start with podCIDR %s", body.Spec.PodCIDRs, body.Spec.PodCIDR)
		}
		out = append(out, nodePatch{p.GetName(), body.Spec.PodCIDR, body.Spec.PodCIDRs})
	}
	return out
}

func node(name, podCIDR string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: podCIDR}}
}

func TestSyncAssignsBlock(t *testing.T) {
	f := newFixture(t, "10.244.0.0/16", node("n1", ""))
	if err := f.sync(t, "n1"); err != nil {
		t.Fatal(err)
	}
	got := f.patched(t)
	if len(got) != 1 || got[0] != [2]string{"n1", "10.244.0.0/24"} {
		t.Fatalf("patches %v, want n1 -> 10.244.0.0/24", got)
	}
	stored, err := f.client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil || stored.Spec.PodCIDR != "10.244.0.0/24" || len(stored.Spec.PodCIDRs) != 1 {
		t.Fatalf("stored node %+v %v", stored.Spec, err)
	}
}

func TestSyncNeverHandsOutABlockTwice(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	var objs []runtime.Object
	for _, n := range names {
		objs = append(objs, node(n, ""))
	}
	f := newFixture(t, "10.244.0.0/16", objs...)
	for _, n := range names {
		if err := f.sync(t, n); err != nil {
			t.Fatal(err)
		}
	}
	// Syncs again before the informer delivered the patched nodes: the same block again.
	for _, n := range names {
		if err := f.sync(t, n); err != nil {
			t.Fatal(err)
		}
	}
	byNode := map[string]string{}
	owner := map[string]string{}
	for _, p := range f.patched(t) {
		if prev, ok := byNode[p[0]]; ok && prev != p[1] {
			t.Fatalf("node %s patched with %s and %s", p[0], prev, p[1])
		}
		if o, ok := owner[p[1]]; ok && o != p[0] {
			t.Fatalf("block %s handed to %s and %s", p[1], o, p[0])
		}
		byNode[p[0]], owner[p[1]] = p[1], p[0]
	}
	if len(owner) != len(names) {
		t.Fatalf("blocks %v", byNode)
	}
}

func TestSyncNodeWithBlockIsLeftAloneAndItsBlockIsUsed(t *testing.T) {
	f := newFixture(t, "10.244.0.0/16", node("old", "10.244.0.0/24"), node("new", ""))
	if err := f.sync(t, "old"); err != nil {
		t.Fatal(err)
	}
	if p := f.patched(t); len(p) != 0 {
		t.Fatalf("a node with a block was patched: %v", p)
	}
	if err := f.sync(t, "new"); err != nil {
		t.Fatal(err)
	}
	if p := f.patched(t); len(p) != 1 || p[0][1] != "10.244.1.0/24" {
		t.Fatalf("patches %v, want new -> 10.244.1.0/24", p)
	}
}

func TestSyncReleasesOnNodeDeletion(t *testing.T) {
	// A /23 holds two /24 blocks.
	f := newFixture(t, "10.244.0.0/23", node("n1", ""), node("n2", ""), node("n3", ""))
	for _, n := range []string{"n1", "n2"} {
		if err := f.sync(t, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.sync(t, "n3"); !errors.Is(err, ErrCIDRSetFull) {
		t.Fatalf("third node: %v, want ErrCIDRSetFull", err)
	}
	f.uncache("n1")
	if err := f.sync(t, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.c.held["n1"]; ok {
		t.Fatal("deleted node still holds its block")
	}
	f.client.ClearActions()
	if err := f.sync(t, "n3"); err != nil {
		t.Fatal(err)
	}
	if p := f.patched(t); len(p) != 1 || p[0] != [2]string{"n3", "10.244.0.0/24"} {
		t.Fatalf("patches %v, want n3 to get n1's freed block", p)
	}
}

func TestSyncNodeGoneFromAPIReleasesBlock(t *testing.T) {
	f := newFixture(t, "10.244.0.0/23")
	f.cache(node("ghost", "")) // in the cache, already deleted from the API
	if err := f.sync(t, "ghost"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if len(f.c.held) != 0 {
		t.Fatalf("held %v", f.c.held)
	}
	for i := range f.c.sets[0].used {
		if f.c.sets[0].used[i] {
			t.Fatalf("block %d still used", i)
		}
	}
}

func TestSyncRecreatedNodeWithOwnBlockFreesTheOldOne(t *testing.T) {
	f := newFixture(t, "10.244.0.0/23", node("n1", ""), node("n2", ""))
	if err := f.sync(t, "n1"); err != nil { // n1 gets 10.244.0.0/24
		t.Fatal(err)
	}
	// n1 is deleted and recreated, with a block of its own, before the controller saw the
	// deletion: the block it held is free again.
	f.cache(node("n1", "10.244.1.0/24"))
	if err := f.sync(t, "n1"); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	if err := f.sync(t, "n2"); err != nil {
		t.Fatalf("n2: %v", err)
	}
	if p := f.patched(t); len(p) != 1 || p[0][1] != "10.244.0.0/24" {
		t.Fatalf("patches %v, want n2 -> 10.244.0.0/24", p)
	}
}

func TestRunRespectsExistingBlocks(t *testing.T) {
	client := fake.NewSimpleClientset(node("a", "10.244.0.0/24"), node("b", "10.244.1.0/24"), node("c", "192.168.0.0/24"), node("new", ""))
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory.Core().V1().Nodes(), []Pool{{CIDR: "10.244.0.0/16", MaskSize: 24}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() { defer close(done); c.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()
	var got string
	deadline := time.Now().Add(10 * time.Second)
	for got == "" && time.Now().Before(deadline) {
		n, err := client.CoreV1().Nodes().Get(ctx, "new", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = n.Spec.PodCIDR
		time.Sleep(10 * time.Millisecond)
	}
	if got != "10.244.2.0/24" {
		t.Fatalf("new node got %q, want 10.244.2.0/24 (the first block not on a node)", got)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if fmt.Sprint(c.held["a"]) != "[10.244.0.0/24]" || fmt.Sprint(c.held["b"]) != "[10.244.1.0/24]" {
		t.Fatalf("held %v", c.held)
	}
}

func TestNewRejectsBadCIDR(t *testing.T) {
	client := fake.NewSimpleClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	for _, cidr := range []string{"junk", "fd00::/48"} {
		if _, err := New(client, factory.Core().V1().Nodes(), []Pool{{CIDR: cidr, MaskSize: 24}}, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
			t.Errorf("New accepted %q", cidr)
		}
	}
}

func TestDualStackNodesGetABlockPerFamily(t *testing.T) {
	pools := []Pool{{CIDR: "fd00:10:244::/56", MaskSize: 64}, {CIDR: "10.244.0.0/16", MaskSize: 24}}
	taken := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old"},
		Spec: corev1.NodeSpec{PodCIDR: "fd00:10:244::/64", PodCIDRs: []string{"fd00:10:244::/64", "10.244.0.0/24"}}}
	f := newPoolsFixture(t, pools, node("n1", ""), node("n2", ""), taken)
	f.c.occupy("old", taken.Spec.PodCIDRs) // as Run does from the informer
	for _, n := range []string{"n1", "n2"} {
		if err := f.sync(t, n); err != nil {
			t.Fatal(err)
		}
	}
	got := f.patchedAll(t)
	want := []nodePatch{{"n1", "fd00:10:244:1::/64", []string{"fd00:10:244:1::/64", "10.244.1.0/24"}},
		{"n2", "fd00:10:244:2::/64", []string{"fd00:10:244:2::/64", "10.244.2.0/24"}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("patches %v, want %v", got, want)
	}
	// The old node goes: both its blocks are free again.
	f.uncache("old")
	if err := f.sync(t, "old"); err != nil {
		t.Fatal(err)
	}
	for _, set := range f.c.sets {
		if set.used[0] {
			t.Errorf("the %d block of the deleted node is still used", set.Family())
		}
	}
}

func TestDualStackPoolsMustDifferInFamily(t *testing.T) {
	client := fake.NewSimpleClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	_, err := New(client, factory.Core().V1().Nodes(), []Pool{{"10.244.0.0/16", 24}, {"10.245.0.0/16", 24}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "one IP family") {
		t.Fatalf("two IPv4 pools: %v", err)
	}
}
