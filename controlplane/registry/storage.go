package registry

import (
	"context"
	"errors"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

// collect runs each serve step and merges what it returns.
func collect(steps ...func() (map[string]rest.Storage, error)) (map[string]rest.Storage, error) {
	out := map[string]rest.Storage{}
	for _, step := range steps {
		m, err := step()
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			out[k] = v
		}
	}
	return out, nil
}

func only(m map[string]rest.Storage, _ *REST, err error) (map[string]rest.Storage, error) {
	return m, err
}

// volumes serves core/v1 PersistentVolumes and PersistentVolumeClaims (+status), which
// start Pending until the binder controller binds them.
func volumes(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*corev1.PersistentVolume]{
				resource: resource{gr: corev1.Resource("persistentvolumes"), singular: "persistentvolume",
					newObj: func() runtime.Object { return &corev1.PersistentVolume{} }, newList: func() runtime.Object { return &corev1.PersistentVolumeList{} },
					printer: printers.PersistentVolumes, shortNames: []string{"pv"}},
				status: true,
				prepareForCreate: func(pv *corev1.PersistentVolume) {
					now := metav1.Now()
					pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &now}
				},
				validate:       validation.PersistentVolume,
				validateUpdate: validation.PersistentVolumeUpdate,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*corev1.PersistentVolumeClaim]{
				resource: resource{gr: corev1.Resource("persistentvolumeclaims"), singular: "persistentvolumeclaim",
					newObj: func() runtime.Object { return &corev1.PersistentVolumeClaim{} }, newList: func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
					printer: printers.PersistentVolumeClaims, shortNames: []string{"pvc"}},
				namespaced: true, status: true,
				prepareForCreate: func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimPending },
				validate:         validation.PersistentVolumeClaim,
				validateUpdate:   validation.PersistentVolumeClaimUpdate,
			}))
		},
	)
}

// quotas serves core/v1 LimitRanges and ResourceQuotas (+status). Their admission (and
// the quota controller keeping status.used) is issue 18's; until then they are stored and
// shown, not enforced.
func quotas(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*corev1.LimitRange]{
				resource: resource{gr: corev1.Resource("limitranges"), singular: "limitrange",
					newObj: func() runtime.Object { return &corev1.LimitRange{} }, newList: func() runtime.Object { return &corev1.LimitRangeList{} },
					printer: printers.LimitRanges, shortNames: []string{"limits"}},
				namespaced: true, validate: validation.LimitRange,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*corev1.ResourceQuota]{
				resource: resource{gr: corev1.Resource("resourcequotas"), singular: "resourcequota",
					newObj: func() runtime.Object { return &corev1.ResourceQuota{} }, newList: func() runtime.Object { return &corev1.ResourceQuotaList{} },
					printer: printers.ResourceQuotas, shortNames: []string{"quota"}},
				namespaced: true, status: true, validate: validation.ResourceQuota,
			}))
		},
	)
}

// autoscalers serves autoscaling/v2 HorizontalPodAutoscalers (+status).
func autoscalers(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*autoscalingv2.HorizontalPodAutoscaler]{
		resource: resource{gr: autoscalingv2.Resource("horizontalpodautoscalers"), singular: "horizontalpodautoscaler",
			newObj:  func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
			newList: func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} },
			printer: printers.HorizontalPodAutoscalers, shortNames: []string{"hpa"}, categories: []string{"all"}},
		namespaced: true, status: true, validate: validation.HorizontalPodAutoscaler,
	}))
}

// flowControl serves flowcontrol.apiserver.k8s.io/v1 FlowSchemas and
// PriorityLevelConfigurations (+status), API Priority and Fairness's configuration.
func flowControl(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*flowcontrolv1.FlowSchema]{
				resource: resource{gr: flowcontrolv1.Resource("flowschemas"), singular: "flowschema",
					newObj: func() runtime.Object { return &flowcontrolv1.FlowSchema{} }, newList: func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
					printer: printers.FlowSchemas},
				status: true, validate: validation.FlowSchema,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*flowcontrolv1.PriorityLevelConfiguration]{
				resource: resource{gr: flowcontrolv1.Resource("prioritylevelconfigurations"), singular: "prioritylevelconfiguration",
					newObj:  func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
					newList: func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
					printer: printers.PriorityLevelConfigurations},
				status: true, validate: validation.PriorityLevelConfiguration,
			}))
		},
	)
}

// admissionRegistration serves admissionregistration.k8s.io/v1: webhook configurations
// ValidatingAdmissionPolicies (+status) and MutatingAdmissionPolicies, with their bindings.
func admissionRegistration(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*admissionregistrationv1.ValidatingWebhookConfiguration]{
				resource: resource{gr: admissionregistrationv1.Resource("validatingwebhookconfigurations"), singular: "validatingwebhookconfiguration",
					newObj:  func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
					newList: func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} },
					printer: printers.ValidatingWebhookConfigurations},
				validate: validation.ValidatingWebhookConfiguration,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*admissionregistrationv1.MutatingWebhookConfiguration]{
				resource: resource{gr: admissionregistrationv1.Resource("mutatingwebhookconfigurations"), singular: "mutatingwebhookconfiguration",
					newObj:  func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
					newList: func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfigurationList{} },
					printer: printers.MutatingWebhookConfigurations},
				validate: validation.MutatingWebhookConfiguration,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*admissionregistrationv1.ValidatingAdmissionPolicy]{
				resource: resource{gr: admissionregistrationv1.Resource("validatingadmissionpolicies"), singular: "validatingadmissionpolicy",
					newObj:  func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
					newList: func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyList{} },
					printer: printers.ValidatingAdmissionPolicies},
				status: true, validate: validation.ValidatingAdmissionPolicy,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*admissionregistrationv1.ValidatingAdmissionPolicyBinding]{
				resource: resource{gr: admissionregistrationv1.Resource("validatingadmissionpolicybindings"), singular: "validatingadmissionpolicybinding",
					newObj:  func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
					newList: func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{} },
					printer: printers.ValidatingAdmissionPolicyBindings},
				validate: validation.ValidatingAdmissionPolicyBinding,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*admissionregistrationv1.MutatingAdmissionPolicy]{
				resource: resource{gr: admissionregistrationv1.Resource("mutatingadmissionpolicies"), singular: "mutatingadmissionpolicy",
					newObj:  func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicy{} },
					newList: func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyList{} },
					printer: printers.MutatingAdmissionPolicies},
				validate: validation.MutatingAdmissionPolicy,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*admissionregistrationv1.MutatingAdmissionPolicyBinding]{
				resource: resource{gr: admissionregistrationv1.Resource("mutatingadmissionpolicybindings"), singular: "mutatingadmissionpolicybinding",
					newObj:  func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBinding{} },
					newList: func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBindingList{} },
					printer: printers.MutatingAdmissionPolicyBindings},
				validate: validation.MutatingAdmissionPolicyBinding,
			}))
		},
	)
}

// storageMigrations serves storagemigration.k8s.io/v1 StorageVersionMigrations (+status),
// which the storage-version-migrator controller carries out.
func storageMigrations(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*storagemigrationv1.StorageVersionMigration]{
		resource: resource{gr: storagemigrationv1.Resource("storageversionmigrations"), singular: "storageversionmigration",
			newObj:  func() runtime.Object { return &storagemigrationv1.StorageVersionMigration{} },
			newList: func() runtime.Object { return &storagemigrationv1.StorageVersionMigrationList{} },
			printer: printers.StorageVersionMigrations},
		status: true, validate: validation.StorageVersionMigration, validateUpdate: validation.StorageVersionMigrationUpdate,
	}))
}

// storageAPIs serves storage.k8s.io/v1: StorageClasses, CSIDrivers, CSINodes,
// CSIStorageCapacities, VolumeAttachments (+status) and VolumeAttributesClasses.
func storageAPIs(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*storagev1.StorageClass]{
				resource: resource{gr: storagev1.Resource("storageclasses"), singular: "storageclass",
					newObj: func() runtime.Object { return &storagev1.StorageClass{} }, newList: func() runtime.Object { return &storagev1.StorageClassList{} },
					printer: printers.StorageClasses, shortNames: []string{"sc"}},
				validate: validation.StorageClass, validateUpdate: validation.StorageClassUpdate,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*storagev1.CSIDriver]{
				resource: resource{gr: storagev1.Resource("csidrivers"), singular: "csidriver",
					newObj: func() runtime.Object { return &storagev1.CSIDriver{} }, newList: func() runtime.Object { return &storagev1.CSIDriverList{} },
					printer: printers.CSIDrivers},
				validate: validation.CSIDriver,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*storagev1.CSINode]{
				resource: resource{gr: storagev1.Resource("csinodes"), singular: "csinode",
					newObj: func() runtime.Object { return &storagev1.CSINode{} }, newList: func() runtime.Object { return &storagev1.CSINodeList{} },
					printer: printers.CSINodes},
				validate: validation.CSINode,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*storagev1.CSIStorageCapacity]{
				resource: resource{gr: storagev1.Resource("csistoragecapacities"), singular: "csistoragecapacity",
					newObj: func() runtime.Object { return &storagev1.CSIStorageCapacity{} }, newList: func() runtime.Object { return &storagev1.CSIStorageCapacityList{} },
					printer: printers.CSIStorageCapacities},
				namespaced: true, validate: validation.CSIStorageCapacity,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*storagev1.VolumeAttachment]{
				resource: resource{gr: storagev1.Resource("volumeattachments"), singular: "volumeattachment",
					newObj: func() runtime.Object { return &storagev1.VolumeAttachment{} }, newList: func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
					printer: printers.VolumeAttachments},
				status: true, validate: validation.VolumeAttachment, validateUpdate: validation.VolumeAttachmentUpdate,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*storagev1.VolumeAttributesClass]{
				resource: resource{gr: storagev1.Resource("volumeattributesclasses"), singular: "volumeattributesclass",
					newObj: func() runtime.Object { return &storagev1.VolumeAttributesClass{} }, newList: func() runtime.Object { return &storagev1.VolumeAttributesClassList{} },
					printer: printers.VolumeAttributesClasses, shortNames: []string{"vac"}},
				validate: validation.VolumeAttributesClass, validateUpdate: validation.VolumeAttributesClassUpdate,
			}))
		},
	)
}

// runtimeClasses serves node.k8s.io/v1 RuntimeClasses.
func runtimeClasses(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*nodev1.RuntimeClass]{
		resource: resource{gr: nodev1.Resource("runtimeclasses"), singular: "runtimeclass",
			newObj: func() runtime.Object { return &nodev1.RuntimeClass{} }, newList: func() runtime.Object { return &nodev1.RuntimeClassList{} },
			printer: printers.RuntimeClasses},
		validate: validation.RuntimeClass, validateUpdate: validation.RuntimeClassUpdate,
	}))
}

// priorityClasses serves scheduling.k8s.io/v1 PriorityClasses. The API server creates the
// system classes at start (see apiserver's bootstrap); they cannot be deleted.
func priorityClasses(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	_, main, err := serveKind(opts, kind[*schedulingv1.PriorityClass]{
		resource: resource{gr: schedulingv1.Resource("priorityclasses"), singular: "priorityclass",
			newObj: func() runtime.Object { return &schedulingv1.PriorityClass{} }, newList: func() runtime.Object { return &schedulingv1.PriorityClassList{} },
			printer: printers.PriorityClasses, shortNames: []string{"pc"}},
		validate: validation.PriorityClass, validateUpdate: validation.PriorityClassUpdate,
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"priorityclasses": &PriorityClassREST{main}}, nil
}

// PriorityClassREST refuses to delete the system priority classes, as upstream.
type PriorityClassREST struct {
	*REST
}

// Delete implements rest.GracefulDeleter.
func (r *PriorityClassREST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	if _, system := validation.SystemPriorityClasses[name]; system {
		return nil, false, apierrors.NewForbidden(schedulingv1.Resource("priorityclasses"), name, errors.New("this is a system priority class and cannot be deleted"))
	}
	return r.REST.Delete(ctx, name, deleteValidation, options)
}

// ingresses serves networking.k8s.io/v1 Ingresses (+status) and IngressClasses; skiff runs
// no ingress controller of its own, so they are for the one the operator installs.
func ingresses(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*networkingv1.Ingress]{
				resource: resource{gr: networkingv1.Resource("ingresses"), singular: "ingress",
					newObj: func() runtime.Object { return &networkingv1.Ingress{} }, newList: func() runtime.Object { return &networkingv1.IngressList{} },
					printer: printers.Ingresses, shortNames: []string{"ing"}},
				namespaced: true, status: true, validate: validation.Ingress,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*networkingv1.IngressClass]{
				resource: resource{gr: networkingv1.Resource("ingressclasses"), singular: "ingressclass",
					newObj: func() runtime.Object { return &networkingv1.IngressClass{} }, newList: func() runtime.Object { return &networkingv1.IngressClassList{} },
					printer: printers.IngressClasses},
				validate: validation.IngressClass, validateUpdate: validation.IngressClassUpdate,
			}))
		},
	)
}

// dynamicResources serves resource.k8s.io/v1 (DRA): DeviceClasses, DeviceTaintRules
// (+status), ResourceClaims (+status), ResourceClaimTemplates and ResourceSlices. skiff has
// no DRA drivers; the API is served so drivers and tools that expect it find it.
func dynamicResources(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*resourcev1.DeviceClass]{
				resource: resource{gr: resourcev1.Resource("deviceclasses"), singular: "deviceclass",
					newObj: func() runtime.Object { return &resourcev1.DeviceClass{} }, newList: func() runtime.Object { return &resourcev1.DeviceClassList{} },
					printer: printers.DeviceClasses},
				validate: validation.DeviceClass,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*resourcev1.DeviceTaintRule]{
				resource: resource{gr: resourcev1.Resource("devicetaintrules"), singular: "devicetaintrule",
					newObj: func() runtime.Object { return &resourcev1.DeviceTaintRule{} }, newList: func() runtime.Object { return &resourcev1.DeviceTaintRuleList{} },
					printer: printers.DeviceTaintRules},
				status: true, validate: validation.DeviceTaintRule,
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*resourcev1.ResourceClaim]{
				resource: resource{gr: resourcev1.Resource("resourceclaims"), singular: "resourceclaim",
					newObj: func() runtime.Object { return &resourcev1.ResourceClaim{} }, newList: func() runtime.Object { return &resourcev1.ResourceClaimList{} },
					printer: printers.ResourceClaims},
				namespaced: true, status: true, validate: validation.ResourceClaim,
				validateUpdate: func(c, old *resourcev1.ResourceClaim) field.ErrorList {
					return append(validation.ObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta), validation.ImmutableSpec(c.Spec, old.Spec)...)
				},
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*resourcev1.ResourceClaimTemplate]{
				resource: resource{gr: resourcev1.Resource("resourceclaimtemplates"), singular: "resourceclaimtemplate",
					newObj: func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} }, newList: func() runtime.Object { return &resourcev1.ResourceClaimTemplateList{} },
					printer: printers.ResourceClaimTemplates},
				namespaced: true, validate: validation.ResourceClaimTemplate,
				validateUpdate: func(t, old *resourcev1.ResourceClaimTemplate) field.ErrorList {
					return append(validation.ObjectMetaUpdate(&t.ObjectMeta, &old.ObjectMeta), validation.ImmutableSpec(t.Spec, old.Spec)...)
				},
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*resourcev1.ResourceSlice]{
				resource: resource{gr: resourcev1.Resource("resourceslices"), singular: "resourceslice",
					newObj: func() runtime.Object { return &resourcev1.ResourceSlice{} }, newList: func() runtime.Object { return &resourcev1.ResourceSliceList{} },
					printer: printers.ResourceSlices,
					fields: func(obj runtime.Object) fields.Set {
						s := obj.(*resourcev1.ResourceSlice)
						node := ""
						if s.Spec.NodeName != nil {
							node = *s.Spec.NodeName
						}
						return fields.Set{"spec.nodeName": node, "spec.driver": s.Spec.Driver}
					}},
				validate: validation.ResourceSlice,
			}))
		},
	)
}
