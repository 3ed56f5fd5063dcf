package podindex

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func names(ps []*corev1.Pod) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out
}

// TestListerMatchesBruteForce: on random pods, relabelled and re-owned as they go, the
// indexed answers equal a scan of every pod, with and without the indexes.
func TestListerMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	indexed := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := indexed.AddIndexers(indexers); err != nil {
		t.Fatal(err)
	}
	plain := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	owners := []types.UID{"rs-1", "rs-2", "rs-3"}
	randomPod := func(i int) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Namespace: fmt.Sprint("ns", r.IntN(2)), Labels: map[string]string{}}}
		for _, k := range []string{"app", "tier", "hash"} {
			if r.IntN(3) > 0 {
				p.Labels[k] = fmt.Sprint(k, r.IntN(3))
			}
		}
		if r.IntN(3) > 0 {
			p.OwnerReferences = []metav1.OwnerReference{{UID: owners[r.IntN(len(owners))], Controller: ptr.To(r.IntN(4) > 0)}}
		}
		return p
	}
	for step := 0; step < 400; step++ {
		p := randomPod(r.IntN(60))
		if r.IntN(5) == 0 {
			_ = indexed.Delete(p)
			_ = plain.Delete(p)
		} else {
			_ = indexed.Update(p)
			_ = plain.Update(p)
		}
		set := map[string]string{}
		for _, k := range []string{"app", "tier"} {
			if r.IntN(2) == 0 {
				set[k] = fmt.Sprint(k, r.IntN(3))
			}
		}
		ns := fmt.Sprint("ns", r.IntN(2))
		var want []*corev1.Pod
		for _, o := range plain.List() {
			q := o.(*corev1.Pod)
			if q.Namespace == ns && labels.SelectorFromSet(set).Matches(labels.Set(q.Labels)) {
				want = append(want, q)
			}
		}
		for name, l := range map[string]Lister{"indexed": {indexed}, "plain": {plain}} {
			got, err := l.Selected(ns, set)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := names(got), names(want); fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("step %d %s: Selected(%s, %v) = %v, want %v", step, name, ns, set, a, b)
			}
			uid := owners[r.IntN(len(owners))]
			var wantOwned []*corev1.Pod
			for _, o := range plain.List() {
				q := o.(*corev1.Pod)
				if q.Namespace == ns && len(q.OwnerReferences) == 1 && *q.OwnerReferences[0].Controller && q.OwnerReferences[0].UID == uid {
					wantOwned = append(wantOwned, q)
				}
			}
			owned, err := l.Controlled(ns, uid)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := names(owned), names(wantOwned); fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("step %d %s: Controlled(%s, %s) = %v, want %v", step, name, ns, uid, a, b)
			}
		}
	}
}

func TestAddIsIdempotent(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{})
	for i := 0; i < 2; i++ {
		if err := Add(inf); err != nil {
			t.Fatalf("Add #%d: %v", i+1, err)
		}
	}
	if _, ok := inf.GetIndexer().GetIndexers()[ByLabel]; !ok {
		t.Fatal("no label index")
	}
}
