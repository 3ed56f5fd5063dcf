package registry

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/printers"
)

// EventsV1REST serves events.k8s.io/v1 events as a view of the core/v1 events storage, as
// upstream does: both APIs read and write the same /registry/events keys, so `kubectl get
// events` shows what the new event recorder writes.
type EventsV1REST struct {
	core *REST
}

var (
	_ rest.StandardStorage      = &EventsV1REST{}
	_ rest.Scoper               = &EventsV1REST{}
	_ rest.SingularNameProvider = &EventsV1REST{}
)

// New implements rest.Storage.
func (r *EventsV1REST) New() runtime.Object { return &eventsv1.Event{} }

// NewList implements rest.Lister.
func (r *EventsV1REST) NewList() runtime.Object { return &eventsv1.EventList{} }

// Destroy implements rest.Storage; the core store owns the storage.
func (r *EventsV1REST) Destroy() {}

// NamespaceScoped implements rest.Scoper.
func (r *EventsV1REST) NamespaceScoped() bool { return true }

// GetSingularName implements rest.SingularNameProvider.
func (r *EventsV1REST) GetSingularName() string { return "event" }

// ConvertToTable implements rest.TableConvertor.
func (r *EventsV1REST) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return printers.EventsV1.ConvertToTable(ctx, obj, opts)
}

// Get implements rest.Getter.
func (r *EventsV1REST) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.core.Get(ctx, name, opts)
	return toV1(obj), err
}

// v1FieldToCore maps events.k8s.io field selectors onto the core event's fields.
var v1FieldToCore = map[string]string{
	"regarding.kind": "involvedObject.kind", "regarding.namespace": "involvedObject.namespace",
	"regarding.name": "involvedObject.name", "regarding.uid": "involvedObject.uid",
	"regarding.apiVersion": "involvedObject.apiVersion", "regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath": "involvedObject.fieldPath", "reportingController": "reportingComponent",
}

func coreListOptions(opts *metainternalversion.ListOptions) (*metainternalversion.ListOptions, error) {
	if opts == nil || opts.FieldSelector == nil {
		return opts, nil
	}
	out := opts.DeepCopy()
	sel, err := opts.FieldSelector.Transform(func(f, v string) (string, string, error) {
		if c, ok := v1FieldToCore[f]; ok {
			return c, v, nil
		}
		return f, v, nil
	})
	if err != nil {
		return nil, err
	}
	out.FieldSelector = sel
	return out, nil
}

// List implements rest.Lister.
func (r *EventsV1REST) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	copts, err := coreListOptions(opts)
	if err != nil {
		return nil, err
	}
	obj, err := r.core.List(ctx, copts)
	if err != nil {
		return nil, err
	}
	in := obj.(*corev1.EventList)
	out := &eventsv1.EventList{ListMeta: in.ListMeta, Items: make([]eventsv1.Event, 0, len(in.Items))}
	for i := range in.Items {
		out.Items = append(out.Items, *EventToV1(&in.Items[i]))
	}
	return out, nil
}

// Watch implements rest.Watcher.
func (r *EventsV1REST) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	copts, err := coreListOptions(opts)
	if err != nil {
		return nil, err
	}
	w, err := r.core.Watch(ctx, copts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		ev.Object = toV1(ev.Object)
		return ev, true
	}), nil
}

// Create implements rest.Creater.
func (r *EventsV1REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	e, ok := obj.(*eventsv1.Event)
	if !ok {
		return nil, fmt.Errorf("not an events.k8s.io/v1 Event: %T", obj)
	}
	out, err := r.core.Create(ctx, EventFromV1(e), wrapValidation(createValidation), options)
	return toV1(out), err
}

func wrapValidation(v rest.ValidateObjectFunc) rest.ValidateObjectFunc {
	if v == nil {
		return nil
	}
	return func(ctx context.Context, obj runtime.Object) error { return v(ctx, toV1(obj)) }
}

// Update implements rest.Updater.
func (r *EventsV1REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	var uv rest.ValidateObjectUpdateFunc
	if updateValidation != nil {
		uv = func(ctx context.Context, obj, old runtime.Object) error {
			return updateValidation(ctx, toV1(obj), toV1(old))
		}
	}
	out, created, err := r.core.Update(ctx, name, v1UpdatedObjectInfo{objInfo}, wrapValidation(createValidation), uv, forceAllowCreate, options)
	return toV1(out), created, err
}

// Delete implements rest.GracefulDeleter.
func (r *EventsV1REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	out, immediate, err := r.core.Delete(ctx, name, wrapValidation(deleteValidation), options)
	return toV1(out), immediate, err
}

// DeleteCollection implements rest.CollectionDeleter.
func (r *EventsV1REST) DeleteCollection(ctx context.Context, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions,
	listOptions *metainternalversion.ListOptions) (runtime.Object, error) {
	copts, err := coreListOptions(listOptions)
	if err != nil {
		return nil, err
	}
	out, err := r.core.DeleteCollection(ctx, wrapValidation(deleteValidation), options, copts)
	if l, ok := out.(*corev1.EventList); ok {
		res := &eventsv1.EventList{ListMeta: l.ListMeta}
		for i := range l.Items {
			res.Items = append(res.Items, *EventToV1(&l.Items[i]))
		}
		return res, err
	}
	return out, err
}

// v1UpdatedObjectInfo presents the stored core event to the update as events.k8s.io/v1.
type v1UpdatedObjectInfo struct{ rest.UpdatedObjectInfo }

func (i v1UpdatedObjectInfo) UpdatedObject(ctx context.Context, old runtime.Object) (runtime.Object, error) {
	obj, err := i.UpdatedObjectInfo.UpdatedObject(ctx, toV1(old))
	if err != nil {
		return nil, err
	}
	if e, ok := obj.(*eventsv1.Event); ok {
		return EventFromV1(e), nil
	}
	return obj, nil
}

func toV1(obj runtime.Object) runtime.Object {
	if e, ok := obj.(*corev1.Event); ok {
		return EventToV1(e)
	}
	return obj
}

// EventToV1 converts a core/v1 Event to events.k8s.io/v1, field for field as upstream.
func EventToV1(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	out.APIVersion, out.Kind = eventsv1.SchemeGroupVersion.String(), "Event"
	return out
}

// EventFromV1 converts an events.k8s.io/v1 Event to core/v1.
func EventFromV1(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          in.ObjectMeta,
		EventTime:           in.EventTime,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
		Action:              in.Action,
		Reason:              in.Reason,
		InvolvedObject:      in.Regarding,
		Related:             in.Related,
		Message:             in.Note,
		Type:                in.Type,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}
