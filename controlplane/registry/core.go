package registry

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"

	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
	"github.com/skiff-sh/skiff/internal/podqos"
)

// labelNamespaceName keeps upstream's kubernetes.io/metadata.name label on every namespace,
// which namespace selectors (NetworkPolicies, webhooks) select by.
func labelNamespaceName(ns *corev1.Namespace) {
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// namespaces serves core/v1 Namespaces (+status, +finalize): Active on create, with
// upstream's metadata.name label and the namespace controller's finalizer.
func namespaces(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*corev1.Namespace]{
		resource: resource{gr: corev1.Resource("namespaces"), singular: "namespace",
			newObj: func() runtime.Object { return &corev1.Namespace{} }, newList: func() runtime.Object { return &corev1.NamespaceList{} },
			printer: printers.Namespaces, shortNames: []string{"ns"},
			fields: func(obj runtime.Object) fields.Set {
				return fields.Set{"status.phase": string(obj.(*corev1.Namespace).Status.Phase)}
			}},
		status: true,
		prepareForCreate: func(ns *corev1.Namespace) {
			ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
			labelNamespaceName(ns)
			// The namespace controller's finalizer: deletion waits until the namespace is empty.
			if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
				ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
			}
		},
		prepareForUpdate: func(n, o *corev1.Namespace) {
			// spec.finalizers change only through the finalize subresource.
			n.Spec = o.Spec
			labelNamespaceName(n)
		},
		validate: validation.Namespace,
		adjust: func(main *REST, _ *strategy) {
			main.Store.ReturnDeletedObject = true
			// A terminating namespace with no metadata finalizers is deleted by an update only
			// once its spec.finalizers are gone too (namespaces/finalize), as upstream: until
			// then a status update (the namespace controller's conditions) or a label change
			// must keep it.
			main.Store.ShouldDeleteDuringUpdate = func(_ context.Context, _ string, obj, _ runtime.Object) bool {
				return len(obj.(*corev1.Namespace).Spec.Finalizers) == 0
			}
		},
		serve: func(main *REST) rest.Storage { return &NamespaceREST{REST: main} },
		subresources: func(main *REST, s *strategy) map[string]rest.Storage {
			finalize := newStatusREST(main, statusStrategy{strategy: s})
			finalize.store.UpdateStrategy = finalizeStrategy{s}
			return map[string]rest.Storage{"namespaces/finalize": finalize}
		},
	}))
}

// nodes serves core/v1 Nodes (+status); a Node keeps the status it is created with, as
// upstream (agents and kwok register with their capacity).
func nodes(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	podCIDRs := func(n *corev1.Node) {
		if n.Spec.PodCIDR != "" && len(n.Spec.PodCIDRs) == 0 {
			n.Spec.PodCIDRs = []string{n.Spec.PodCIDR}
		}
	}
	return only(serveKind(opts, kind[*corev1.Node]{
		resource: resource{gr: corev1.Resource("nodes"), singular: "node",
			newObj: func() runtime.Object { return &corev1.Node{} }, newList: func() runtime.Object { return &corev1.NodeList{} },
			printer: printers.Nodes, shortNames: []string{"no"},
			fields: func(obj runtime.Object) fields.Set {
				return fields.Set{"spec.unschedulable": fmt.Sprint(obj.(*corev1.Node).Spec.Unschedulable)}
			}},
		status: true, keepStatusOnCreate: true,
		prepareForCreate: podCIDRs,
		prepareForUpdate: func(n, _ *corev1.Node) { podCIDRs(n) },
		validate:         validation.Node,
		validateUpdate:   validation.NodeUpdate,
	}))
}

// configMapsSecretsAccounts serves core/v1 ConfigMaps, Secrets, ServiceAccounts (+token,
// when tokens are issued) and PodTemplates.
func configMapsSecretsAccounts(opts generic.RESTOptionsGetter, tokens TokenIssuer) (map[string]rest.Storage, error) {
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*corev1.ConfigMap]{
				resource: resource{gr: corev1.Resource("configmaps"), singular: "configmap",
					newObj: func() runtime.Object { return &corev1.ConfigMap{} }, newList: func() runtime.Object { return &corev1.ConfigMapList{} },
					printer: printers.ConfigMaps, shortNames: []string{"cm"}},
				namespaced: true,
				validate:   validation.ConfigMap,
				validateUpdate: func(n, o *corev1.ConfigMap) field.ErrorList {
					errs := validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta)
					changed := !apiequality.Semantic.DeepEqual(n.Data, o.Data) || !apiequality.Semantic.DeepEqual(n.BinaryData, o.BinaryData)
					return append(errs, validation.Immutable(o.Immutable, n.Immutable, changed)...)
				},
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*corev1.Secret]{
				resource: resource{gr: corev1.Resource("secrets"), singular: "secret",
					newObj: func() runtime.Object { return &corev1.Secret{} }, newList: func() runtime.Object { return &corev1.SecretList{} },
					printer: printers.Secrets,
					fields: func(obj runtime.Object) fields.Set {
						return fields.Set{"type": string(obj.(*corev1.Secret).Type)}
					}},
				namespaced:       true,
				prepareForCreate: MergeStringData,
				prepareForUpdate: func(n, _ *corev1.Secret) { MergeStringData(n) },
				validate:         validation.Secret,
				validateUpdate: func(n, o *corev1.Secret) field.ErrorList {
					errs := validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta)
					if n.Type != o.Type {
						errs = append(errs, field.Invalid(field.NewPath("type"), n.Type, "field is immutable"))
					}
					return append(errs, validation.Immutable(o.Immutable, n.Immutable, !apiequality.Semantic.DeepEqual(n.Data, o.Data))...)
				},
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*corev1.ServiceAccount]{
				resource: resource{gr: corev1.Resource("serviceaccounts"), singular: "serviceaccount",
					newObj: func() runtime.Object { return &corev1.ServiceAccount{} }, newList: func() runtime.Object { return &corev1.ServiceAccountList{} },
					printer: printers.ServiceAccounts, shortNames: []string{"sa"}},
				namespaced: true,
				validate: func(sa *corev1.ServiceAccount) field.ErrorList {
					return validation.ObjectMeta(&sa.ObjectMeta, true, validation.DNSSubdomain)
				},
				subresources: func(main *REST, _ *strategy) map[string]rest.Storage {
					if tokens == nil {
						return nil
					}
					return map[string]rest.Storage{"serviceaccounts/token": &TokenREST{accounts: main.Store, issuer: tokens}}
				},
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*corev1.PodTemplate]{
				resource: resource{gr: corev1.Resource("podtemplates"), singular: "podtemplate",
					newObj: func() runtime.Object { return &corev1.PodTemplate{} }, newList: func() runtime.Object { return &corev1.PodTemplateList{} },
					printer: printers.PodTemplates},
				namespaced: true,
				validate:   validation.PodTemplateObject,
				validateUpdate: func(n, o *corev1.PodTemplate) field.ErrorList {
					return append(validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validation.PodTemplateObject(n)...)
				},
			}))
		},
	)
}

// metaUpdate checks an update of an object's metadata against the stored object's.
func metaUpdate(obj, old runtime.Object) field.ErrorList {
	n, _ := objectMeta(obj)
	o, _ := objectMeta(old)
	if n == nil || o == nil {
		return nil
	}
	return validation.ObjectMetaUpdate(n, o)
}

func objectMeta(obj runtime.Object) (*metav1.ObjectMeta, bool) {
	type metaObject interface{ GetObjectMeta() metav1.Object }
	if m, ok := obj.(metaObject); ok {
		om, ok := m.GetObjectMeta().(*metav1.ObjectMeta)
		return om, ok
	}
	return nil, false
}

// endpointsAndEvents serves core/v1 Endpoints (PUT may create them, as upstream) and Events
// (expiring after an hour).
func endpointsAndEvents(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*corev1.Endpoints]{
				resource: resource{gr: corev1.Resource("endpoints"), singular: "endpoints",
					newObj: func() runtime.Object { return &corev1.Endpoints{} }, newList: func() runtime.Object { return &corev1.EndpointsList{} },
					printer: printers.Endpoints, shortNames: []string{"ep"}},
				namespaced: true, allowCreateOnUpdate: true,
				validate: func(ep *corev1.Endpoints) field.ErrorList {
					return validation.ObjectMeta(&ep.ObjectMeta, true, validation.DNS1035Label)
				},
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*corev1.Event]{
				resource: resource{gr: corev1.Resource("events"), singular: "event",
					newObj: func() runtime.Object { return &corev1.Event{} }, newList: func() runtime.Object { return &corev1.EventList{} },
					printer: printers.Events, shortNames: []string{"ev"}, ttl: 3600,
					fields: func(obj runtime.Object) fields.Set {
						e := obj.(*corev1.Event)
						src := e.Source.Component
						if src == "" {
							src = e.ReportingController
						}
						return fields.Set{
							"involvedObject.kind": e.InvolvedObject.Kind, "involvedObject.namespace": e.InvolvedObject.Namespace,
							"involvedObject.name": e.InvolvedObject.Name, "involvedObject.uid": string(e.InvolvedObject.UID),
							"involvedObject.apiVersion": e.InvolvedObject.APIVersion, "involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
							"involvedObject.fieldPath": e.InvolvedObject.FieldPath, "reason": e.Reason, "reportingComponent": e.ReportingController,
							"source": src, "type": e.Type,
						}
					}},
				namespaced: true,
				validate: func(e *corev1.Event) field.ErrorList {
					errs := validation.ObjectMeta(&e.ObjectMeta, true, validation.DNSSubdomain)
					if e.InvolvedObject.Namespace != "" && e.InvolvedObject.Namespace != e.Namespace {
						errs = append(errs, field.Invalid(field.NewPath("involvedObject", "namespace"), e.InvolvedObject.Namespace, "does not match event.namespace"))
					}
					return errs
				},
			}))
		},
	)
}

// podNodeName indexes pod watchers by node, as upstream's kubelet watch needs.
func podNodeName(obj runtime.Object) string { return obj.(*corev1.Pod).Spec.NodeName }

type podStrategy struct{ *strategy }

// CheckGracefulDelete implements rest.RESTGracefulDeleteStrategy: a pod bound to a node is
// deleted gracefully (its agent stops it, then deletes with grace 0); an unbound or finished
// pod goes at once.
func (podStrategy) CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if options == nil {
		return false
	}
	pod := obj.(*corev1.Pod)
	period := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if options.GracePeriodSeconds != nil {
		period = *options.GracePeriodSeconds
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	options.GracePeriodSeconds = &period
	return true
}

// pods serves core/v1 Pods and their subresources: status, ephemeral containers, resize,
// binding (the scheduler's), and log, exec, attach, port-forward and proxy (through the
// pod's node).
func pods(opts generic.RESTOptionsGetter, nodes *NodeConnection) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*corev1.Pod]{
		resource: resource{gr: corev1.Resource("pods"), singular: "pod",
			newObj: func() runtime.Object { return &corev1.Pod{} }, newList: func() runtime.Object { return &corev1.PodList{} },
			printer: printers.Pods, shortNames: []string{"po"}, categories: []string{"all"},
			fields: func(obj runtime.Object) fields.Set {
				p := obj.(*corev1.Pod)
				return fields.Set{
					"spec.nodeName": p.Spec.NodeName, "spec.restartPolicy": string(p.Spec.RestartPolicy),
					"spec.schedulerName": p.Spec.SchedulerName, "spec.serviceAccountName": p.Spec.ServiceAccountName,
					"spec.hostNetwork": fmt.Sprint(p.Spec.HostNetwork), "status.phase": string(p.Status.Phase),
					"status.podIP": p.Status.PodIP, "status.nominatedNodeName": p.Status.NominatedNodeName,
				}
			},
			triggers: storage.IndexerFuncs{"spec.nodeName": podNodeName}},
		namespaced: true, status: true,
		prepareForCreate: func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: podqos.Class(&p.Spec)}
			p.Generation = 1
		},
		validate:       validation.Pod,
		validateUpdate: validation.PodUpdate,
		validateStatus: func(n, o *corev1.Pod) field.ErrorList {
			errs := validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta)
			if n.Status.NominatedNodeName != "" {
				for _, msg := range validation.DNSSubdomain(n.Status.NominatedNodeName, false) {
					errs = append(errs, field.Invalid(field.NewPath("status", "nominatedNodeName"), n.Status.NominatedNodeName, msg))
				}
			}
			return errs
		},
		adjust: func(main *REST, s *strategy) {
			main.Store.DeleteStrategy = podStrategy{s}
			main.Store.UpdateStrategy = s
		},
		subresources: func(main *REST, s *strategy) map[string]rest.Storage {
			return map[string]rest.Storage{
				"pods/ephemeralcontainers": newStatusREST(main, ephemeralContainersStrategy{s}),
				"pods/resize":              newStatusREST(main, resizeStrategy{s}),
				"pods/binding":             &BindingREST{store: main.Store},
				"pods/log":                 &LogREST{pods: main.Store, nodes: nodes},
				"pods/exec":                &ExecREST{nodeStream{pods: main.Store, nodes: nodes}},
				"pods/attach":              &AttachREST{nodeStream{pods: main.Store, nodes: nodes}},
				"pods/portforward":         &PortForwardREST{nodeStream{pods: main.Store, nodes: nodes}},
				"pods/proxy":               &ProxyREST{pods: main.Store},
			}
		},
	}))
}

// MergeStringData folds a Secret's write-only stringData into data (its keys winning), as
// upstream's conversion does: stringData is never stored or returned.
func MergeStringData(s *corev1.Secret) {
	if len(s.StringData) == 0 {
		s.StringData = nil
		return
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

// ephemeralContainersStrategy serves pods/ephemeralcontainers, kubectl debug's way in:
// only spec.ephemeralContainers changes, and only by adding containers (an ephemeral
// container, once added, is neither changed nor removed), as upstream.
type ephemeralContainersStrategy struct{ *strategy }

func (s ephemeralContainersStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	specUpdate(obj.(*corev1.Pod), old.(*corev1.Pod), func(keep, n *corev1.Pod) {
		keep.Spec.EphemeralContainers = n.Spec.EphemeralContainers
	})
}

// specUpdate makes n the old pod with only what take copies from n (a subresource's part of
// the spec) and n's resourceVersion, its generation counting a change of the spec.
func specUpdate(n, o *corev1.Pod, take func(keep, n *corev1.Pod)) {
	keep := o.DeepCopy()
	take(keep, n)
	keep.ResourceVersion = n.ResourceVersion
	if !apiequality.Semantic.DeepEqual(keep.Spec, o.Spec) {
		keep.Generation = o.Generation + 1
	}
	*n = *keep
}

func (s ephemeralContainersStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.EphemeralContainersUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
}

func (s ephemeralContainersStrategy) AllowCreateOnUpdate(context.Context) bool { return false }

// resizeStrategy serves pods/resize, in-place resize: only the containers' resources (and
// their resizePolicy) change, the QoS class stays, and the generation counts the change the
// agent is to catch up with.
type resizeStrategy struct{ *strategy }

func (s resizeStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	specUpdate(obj.(*corev1.Pod), old.(*corev1.Pod), func(keep, n *corev1.Pod) {
		for _, list := range []struct{ dst, src []corev1.Container }{
			{keep.Spec.Containers, n.Spec.Containers}, {keep.Spec.InitContainers, n.Spec.InitContainers}} {
			for i := range list.dst {
				for _, c := range list.src {
					if c.Name == list.dst[i].Name {
						list.dst[i].Resources, list.dst[i].ResizePolicy = c.Resources, c.ResizePolicy
					}
				}
			}
		}
	})
}

func (s resizeStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	n, o := obj.(*corev1.Pod), old.(*corev1.Pod)
	var errs field.ErrorList
	if podqos.Class(&n.Spec) != podqos.Class(&o.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "containers"), "Pod QOS Class may not change as a result of resizing"))
	}
	return append(errs, validation.PodSpec(&n.Spec, field.NewPath("spec"))...)
}

func (s resizeStrategy) AllowCreateOnUpdate(context.Context) bool { return false }

// BindingREST serves pods/binding: the scheduler's way to assign a pod to a node.
type BindingREST struct {
	store *genericregistry.Store
}

var _ rest.NamedCreater = &BindingREST{}

// New implements rest.Storage.
func (r *BindingREST) New() runtime.Object { return &corev1.Binding{} }

// Destroy implements rest.Storage.
func (r *BindingREST) Destroy() {}

// Create binds the pod named in the URL to binding.target, once.
func (r *BindingREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	b, ok := obj.(*corev1.Binding)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Binding object: %T", obj))
	}
	if b.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name,
			field.ErrorList{field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"})})
	}
	if b.Target.Name == "" {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name,
			field.ErrorList{field.Required(field.NewPath("target", "name"), "")})
	}
	if createValidation != nil {
		if err := createValidation(ctx, b.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	var pre *metav1.Preconditions
	if b.UID != "" || b.ResourceVersion != "" {
		pre = &metav1.Preconditions{}
		if b.UID != "" {
			pre.UID = &b.UID
		}
		if b.ResourceVersion != "" {
			pre.ResourceVersion = &b.ResourceVersion
		}
	}
	bind := func(ctx context.Context, newObj, oldObj runtime.Object) (runtime.Object, error) {
		pod := oldObj.(*corev1.Pod).DeepCopy()
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), name, fmt.Errorf("pod %v is already assigned to node %q", name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		setCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
		return pod, nil
	}
	// The pod's own strategy forbids changing spec.nodeName through updates, so binding
	// goes around it with a strategy that only validates metadata.
	st := *r.store
	st.UpdateStrategy = bindStrategy{r.store.UpdateStrategy}
	info := preconditioned{rest.DefaultUpdatedObjectInfo(nil, bind), pre}
	if _, _, err := st.Update(ctx, name, info, nil, nil, false, &metav1.UpdateOptions{DryRun: options.DryRun}); err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess, Code: 201}, nil
}

type bindStrategy struct{ rest.RESTUpdateStrategy }

func (bindStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {}
func (bindStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return metaUpdate(obj, old)
}

func setCondition(s *corev1.PodStatus, c corev1.PodCondition) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == c.Type {
			s.Conditions[i] = c
			return
		}
	}
	s.Conditions = append(s.Conditions, c)
}

// preconditioned adds UID/resourceVersion preconditions to an update.
type preconditioned struct {
	rest.UpdatedObjectInfo
	pre *metav1.Preconditions
}

func (p preconditioned) Preconditions() *metav1.Preconditions { return p.pre }
