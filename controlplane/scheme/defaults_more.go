package scheme

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// addMoreDefaultingFuncs registers the defaults of StatefulSets, volumes, storage, priority
// and DRA types.
func addMoreDefaultingFuncs(s *runtime.Scheme) {
	addFlowControlDefaults(s)
	addAdmissionDefaults(s)
	s.AddTypeDefaultingFunc(&appsv1.StatefulSet{}, func(o any) { DefaultStatefulSet(o.(*appsv1.StatefulSet)) })
	s.AddTypeDefaultingFunc(&corev1.PersistentVolume{}, func(o any) { DefaultPersistentVolume(o.(*corev1.PersistentVolume)) })
	s.AddTypeDefaultingFunc(&corev1.PersistentVolumeClaim{}, func(o any) { DefaultPersistentVolumeClaim(o.(*corev1.PersistentVolumeClaim)) })
	s.AddTypeDefaultingFunc(&storagev1.StorageClass{}, func(o any) {
		sc := o.(*storagev1.StorageClass)
		if sc.ReclaimPolicy == nil {
			sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimDelete)
		}
		if sc.VolumeBindingMode == nil {
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
		}
	})
	s.AddTypeDefaultingFunc(&storagev1.CSIDriver{}, func(o any) {
		d := &o.(*storagev1.CSIDriver).Spec
		if d.AttachRequired == nil {
			d.AttachRequired = ptr.To(true)
		}
		if d.PodInfoOnMount == nil {
			d.PodInfoOnMount = ptr.To(false)
		}
		if d.StorageCapacity == nil {
			d.StorageCapacity = ptr.To(false)
		}
		if d.FSGroupPolicy == nil {
			d.FSGroupPolicy = ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
		}
		if len(d.VolumeLifecycleModes) == 0 {
			d.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
		}
		if d.RequiresRepublish == nil {
			d.RequiresRepublish = ptr.To(false)
		}
		if d.SELinuxMount == nil {
			d.SELinuxMount = ptr.To(false)
		}
	})
	s.AddTypeDefaultingFunc(&corev1.LimitRange{}, func(o any) { DefaultLimitRange(o.(*corev1.LimitRange)) })
	s.AddTypeDefaultingFunc(&schedulingv1.PriorityClass{}, func(o any) {
		if pc := o.(*schedulingv1.PriorityClass); pc.PreemptionPolicy == nil {
			pc.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
		}
	})
	s.AddTypeDefaultingFunc(&autoscalingv2.HorizontalPodAutoscaler{}, func(o any) { DefaultHPA(o.(*autoscalingv2.HorizontalPodAutoscaler)) })
	s.AddTypeDefaultingFunc(&autoscalingv1.HorizontalPodAutoscaler{}, func(o any) {
		if h := o.(*autoscalingv1.HorizontalPodAutoscaler); h.Spec.MinReplicas == nil {
			h.Spec.MinReplicas = ptr.To[int32](1)
		}
	})
	s.AddTypeDefaultingFunc(&resourcev1.ResourceClaim{}, func(o any) { defaultDeviceRequests(o.(*resourcev1.ResourceClaim).Spec.Devices.Requests) })
	s.AddTypeDefaultingFunc(&resourcev1.ResourceClaimTemplate{}, func(o any) {
		defaultDeviceRequests(o.(*resourcev1.ResourceClaimTemplate).Spec.Spec.Devices.Requests)
	})
}

// DefaultStatefulSet applies upstream's apps/v1 StatefulSet defaults.
func DefaultStatefulSet(ss *appsv1.StatefulSet) {
	s := &ss.Spec
	if s.Replicas == nil {
		s.Replicas = ptr.To[int32](1)
	}
	if s.PodManagementPolicy == "" {
		s.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.UpdateStrategy.Type == "" {
		s.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if s.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if s.UpdateStrategy.RollingUpdate.Partition == nil {
			s.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0)
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if s.PersistentVolumeClaimRetentionPolicy == nil {
		s.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if s.PersistentVolumeClaimRetentionPolicy.WhenDeleted == "" {
		s.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if s.PersistentVolumeClaimRetentionPolicy.WhenScaled == "" {
		s.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	for i := range s.VolumeClaimTemplates {
		DefaultPersistentVolumeClaim(&s.VolumeClaimTemplates[i])
	}
	DefaultPodSpec(&s.Template.Spec)
}

// DefaultLimitRange applies upstream's defaults to a range's Container items: the default
// limit is the max, the default request is the default limit, else the min.
func DefaultLimitRange(lr *corev1.LimitRange) {
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		if item.Default == nil {
			item.Default = corev1.ResourceList{}
		}
		if item.DefaultRequest == nil {
			item.DefaultRequest = corev1.ResourceList{}
		}
		for k, v := range item.Max {
			if _, ok := item.Default[k]; !ok {
				item.Default[k] = v.DeepCopy()
			}
		}
		for k, v := range item.Default {
			if _, ok := item.DefaultRequest[k]; !ok {
				item.DefaultRequest[k] = v.DeepCopy()
			}
		}
		for k, v := range item.Min {
			if _, ok := item.DefaultRequest[k]; !ok {
				item.DefaultRequest[k] = v.DeepCopy()
			}
		}
	}
}

// DefaultPersistentVolume applies upstream's PV defaults.
func DefaultPersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
	if hp := pv.Spec.HostPath; hp != nil && hp.Type == nil {
		hp.Type = ptr.To(corev1.HostPathUnset)
	}
}

// DefaultPersistentVolumeClaim applies upstream's claim defaults.
func DefaultPersistentVolumeClaim(c *corev1.PersistentVolumeClaim) {
	if c.Status.Phase == "" {
		c.Status.Phase = corev1.ClaimPending
	}
	if c.Spec.VolumeMode == nil {
		c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
}

func defaultDeviceRequests(reqs []resourcev1.DeviceRequest) {
	for i := range reqs {
		if e := reqs[i].Exactly; e != nil {
			if e.AllocationMode == "" {
				e.AllocationMode = resourcev1.DeviceAllocationModeExactCount
			}
			if e.AllocationMode == resourcev1.DeviceAllocationModeExactCount && e.Count == 0 {
				e.Count = 1
			}
		}
	}
}
