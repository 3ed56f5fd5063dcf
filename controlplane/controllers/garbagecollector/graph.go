package garbagecollector

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// object is what the graph knows of one API object: identity, owners, and deletion state.
type object struct {
	gvr        schema.GroupVersionResource
	namespace  string
	name       string
	uid        types.UID
	owners     []metav1.OwnerReference
	finalizers []string
	deleting   bool
	// resourceVersion is set only on an object read from the API server to write it
	// conditionally (the graph's copies leave it empty).
	resourceVersion string
}

// graph is the ownership graph over every watched object: who owns whom, by UID.
type graph struct {
	mu         sync.Mutex
	objects    map[types.UID]*object
	dependents map[types.UID]map[types.UID]bool // owner UID -> dependent UIDs
}

func newGraph() *graph {
	return &graph{objects: map[types.UID]*object{}, dependents: map[types.UID]map[types.UID]bool{}}
}

// upsert records an object and returns its previous state (nil if new).
func (g *graph) upsert(o *object) *object {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.objects[o.uid]
	if old != nil {
		for _, ref := range old.owners {
			delete(g.dependents[ref.UID], o.uid)
		}
	}
	g.objects[o.uid] = o
	for _, ref := range o.owners {
		if g.dependents[ref.UID] == nil {
			g.dependents[ref.UID] = map[types.UID]bool{}
		}
		g.dependents[ref.UID][o.uid] = true
	}
	return old
}

// remove forgets an object; its dependents stay (they now point at a missing owner).
func (g *graph) remove(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if o := g.objects[uid]; o != nil {
		for _, ref := range o.owners {
			delete(g.dependents[ref.UID], uid)
		}
	}
	delete(g.objects, uid)
}

func (g *graph) get(uid types.UID) (object, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	o, ok := g.objects[uid]
	if !ok {
		return object{}, false
	}
	return *o, true
}

// dependentsOf returns the dependents of owner.
func (g *graph) dependentsOf(owner types.UID) []object {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []object
	for uid := range g.dependents[owner] {
		if o, ok := g.objects[uid]; ok {
			out = append(out, *o)
		}
	}
	return out
}

// blockingDependents counts dependents that block the owner's foreground deletion.
func (g *graph) blockingDependents(owner types.UID) int {
	n := 0
	for _, d := range g.dependentsOf(owner) {
		for _, ref := range d.owners {
			if ref.UID == owner && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				n++
			}
		}
	}
	return n
}

func (o object) hasFinalizer(f string) bool { return slices.Contains(o.finalizers, f) }
