package registry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/tools/cache"
)

// resource describes one served resource.
type resource struct {
	gr         schema.GroupResource
	singular   string
	newObj     func() runtime.Object
	newList    func() runtime.Object
	strategy   *strategy
	printer    rest.TableConvertor
	shortNames []string
	categories []string
	// fields returns the selectable fields beyond metadata.name/namespace.
	fields func(obj runtime.Object) fields.Set
	// triggers index watchers by a field (spec.nodeName for pods), so a node's watch is
	// woken only by its own pods; the watch cache also indexes its objects by these fields,
	// so a list selecting one value (a node's pods) reads only those, as upstream's pods.
	triggers storage.IndexerFuncs
	// ttl, if set, expires objects (events) after this many seconds.
	ttl uint64
}

// REST is a resource's main storage, with the short names and categories discovery lists.
type REST struct {
	*genericregistry.Store
	shortNames, categories []string
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// ShortNames implements rest.ShortNamesProvider.
func (r *REST) ShortNames() []string { return r.shortNames }

// Categories implements rest.CategoriesProvider.
func (r *REST) Categories() []string { return r.categories }

func newREST(opts generic.RESTOptionsGetter, r resource) (*REST, error) {
	namespaced := r.strategy.namespaced
	attrs := func(obj runtime.Object) (labels.Set, fields.Set, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil, err
		}
		f := fields.Set{"metadata.name": m.GetName()}
		if namespaced {
			f["metadata.namespace"] = m.GetNamespace()
		}
		if r.fields != nil {
			for k, v := range r.fields(obj) {
				f[k] = v
			}
		}
		return labels.Set(m.GetLabels()), f, nil
	}
	var indexFields []string
	var indexers *cache.Indexers
	for field, value := range r.triggers {
		if indexers == nil {
			indexers = &cache.Indexers{}
		}
		indexFields = append(indexFields, field)
		(*indexers)[storage.FieldIndex(field)] = func(obj any) ([]string, error) {
			o, ok := obj.(runtime.Object)
			if !ok {
				return nil, fmt.Errorf("not an object: %T", obj)
			}
			return []string{value(o)}, nil
		}
	}
	s := &genericregistry.Store{
		NewFunc:                   r.newObj,
		NewListFunc:               r.newList,
		DefaultQualifiedResource:  r.gr,
		SingularQualifiedResource: schema.GroupResource{Group: r.gr.Group, Resource: r.singular},
		CreateStrategy:            r.strategy,
		UpdateStrategy:            r.strategy,
		DeleteStrategy:            r.strategy,
		TableConvertor:            r.printer,
		PredicateFunc: func(l labels.Selector, f fields.Selector) storage.SelectionPredicate {
			return storage.SelectionPredicate{Label: l, Field: f, GetAttrs: attrs, IndexFields: indexFields}
		},
	}
	if r.ttl > 0 {
		s.TTLFunc = func(runtime.Object, uint64, bool) (uint64, error) { return r.ttl, nil }
	}
	if err := s.CompleteWithOptions(&generic.StoreOptions{RESTOptions: opts, AttrFunc: attrs, TriggerFunc: r.triggers, Indexers: indexers}); err != nil {
		return nil, err
	}
	return &REST{Store: s, shortNames: r.shortNames, categories: r.categories}, nil
}

// StatusREST serves the status subresource: updates persist only the status.
type StatusREST struct {
	store *genericregistry.Store
}

var _ rest.Patcher = &StatusREST{}

func newStatusREST(main *REST, s rest.RESTUpdateStrategy) *StatusREST {
	st := *main.Store
	st.CreateStrategy = nil
	st.DeleteStrategy = nil
	st.UpdateStrategy = s
	// The main resource's begin hooks act on the spec (a Service's allocations); a status
	// write keeps the stored spec, so they must not run on what its body carries.
	st.BeginCreate, st.BeginUpdate = nil, nil
	return &StatusREST{store: &st}
}

// New implements rest.Storage.
func (r *StatusREST) New() runtime.Object { return r.store.New() }

// Destroy implements rest.Storage; the main store owns the storage.
func (r *StatusREST) Destroy() {}

// Get implements rest.Getter.
func (r *StatusREST) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, opts)
}

// Update implements rest.Updater; a status update never creates.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// ConvertToTable implements rest.TableConvertor.
func (r *StatusREST) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, obj, opts)
}
