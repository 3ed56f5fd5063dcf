package nodeauth

import (
	corev1 "k8s.io/api/core/v1"
)

// IsMirrorPod tells whether pod is the API view of a kubelet's static pod. A node may read
// nothing through a mirror pod: its kubelet got the spec from a file, not from the API.
func IsMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

// envSources calls f with the env and envFrom of every container of pod: init, regular and
// ephemeral ones. It stops when f returns false and reports whether it went through all.
func envSources(pod *corev1.Pod, f func(env []corev1.EnvVar, from []corev1.EnvFromSource) bool) bool {
	for i := range pod.Spec.InitContainers {
		if !f(pod.Spec.InitContainers[i].Env, pod.Spec.InitContainers[i].EnvFrom) {
			return false
		}
	}
	for i := range pod.Spec.Containers {
		if !f(pod.Spec.Containers[i].Env, pod.Spec.Containers[i].EnvFrom) {
			return false
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i].EphemeralContainerCommon
		if !f(c.Env, c.EnvFrom) {
			return false
		}
	}
	return true
}

// nonEmpty wraps visit to skip empty names.
func nonEmpty(visit func(string) bool) func(string) bool {
	return func(name string) bool { return name == "" || visit(name) }
}

// localName is the name of ref, or "" for a nil ref.
func localName(ref *corev1.LocalObjectReference) string {
	if ref == nil {
		return ""
	}
	return ref.Name
}

// VisitPodSecrets calls visit with the name of every Secret in pod's namespace that its spec
// refers to: image pull secrets, env and envFrom of all containers, secret and projected
// volumes and the secret references of volume plugins (CSI's nodePublishSecretRef, RBD,
// iSCSI, CephFS, ...). Names may repeat. It stops when visit returns false and reports
// whether it went through all of them. Secrets reached through PersistentVolumes are not
// visited.
func VisitPodSecrets(pod *corev1.Pod, visit func(name string) bool) bool {
	visit = nonEmpty(visit)
	for _, ref := range pod.Spec.ImagePullSecrets {
		if !visit(ref.Name) {
			return false
		}
	}
	if !envSources(pod, func(env []corev1.EnvVar, from []corev1.EnvFromSource) bool {
		for _, f := range from {
			if f.SecretRef != nil && !visit(f.SecretRef.Name) {
				return false
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !visit(e.ValueFrom.SecretKeyRef.Name) {
				return false
			}
		}
		return true
	}) {
		return false
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i].VolumeSource
		var name string
		switch {
		case v.Secret != nil:
			name = v.Secret.SecretName
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil && !visit(s.Secret.Name) {
					return false
				}
			}
		case v.CSI != nil:
			name = localName(v.CSI.NodePublishSecretRef)
		case v.AzureFile != nil:
			name = v.AzureFile.SecretName
		case v.CephFS != nil:
			name = localName(v.CephFS.SecretRef)
		case v.Cinder != nil:
			name = localName(v.Cinder.SecretRef)
		case v.FlexVolume != nil:
			name = localName(v.FlexVolume.SecretRef)
		case v.RBD != nil:
			name = localName(v.RBD.SecretRef)
		case v.ScaleIO != nil:
			name = localName(v.ScaleIO.SecretRef)
		case v.ISCSI != nil:
			name = localName(v.ISCSI.SecretRef)
		case v.StorageOS != nil:
			name = localName(v.StorageOS.SecretRef)
		}
		if !visit(name) {
			return false
		}
	}
	return true
}

// VisitPodConfigMaps calls visit with the name of every ConfigMap in pod's namespace that its
// spec refers to: env and envFrom of all containers, configMap and projected volumes. Names
// may repeat. It stops when visit returns false and reports whether it went through all.
func VisitPodConfigMaps(pod *corev1.Pod, visit func(name string) bool) bool {
	visit = nonEmpty(visit)
	if !envSources(pod, func(env []corev1.EnvVar, from []corev1.EnvFromSource) bool {
		for _, f := range from {
			if f.ConfigMapRef != nil && !visit(f.ConfigMapRef.Name) {
				return false
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && !visit(e.ValueFrom.ConfigMapKeyRef.Name) {
				return false
			}
		}
		return true
	}) {
		return false
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i].VolumeSource
		switch {
		case v.ConfigMap != nil:
			if !visit(v.ConfigMap.Name) {
				return false
			}
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil && !visit(s.ConfigMap.Name) {
					return false
				}
			}
		}
	}
	return true
}

// PodClaimNames returns the PersistentVolumeClaims pod's volumes use: named claims, and for
// generic ephemeral volumes the claim created for them, <pod>-<volume>.
func PodClaimNames(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName != "":
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			names = append(names, pod.Name+"-"+v.Name)
		}
	}
	return names
}

// podResourceClaimNames returns the ResourceClaims pod uses: those it names, those generated
// from its templates once status records them, and the claim for its extended resources.
func podResourceClaimNames(pod *corev1.Pod) []string {
	var names []string
	for _, c := range pod.Spec.ResourceClaims {
		switch {
		case c.ResourceClaimName != nil:
			names = append(names, *c.ResourceClaimName)
		case c.ResourceClaimTemplateName != nil:
			for _, s := range pod.Status.ResourceClaimStatuses {
				if s.Name == c.Name && s.ResourceClaimName != nil {
					names = append(names, *s.ResourceClaimName)
				}
			}
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil && s.ResourceClaimName != "" {
		names = append(names, s.ResourceClaimName)
	}
	return names
}

// visitPVSecrets calls visit with the namespace and name of every Secret the kubelet reads to
// mount pv (controller-side secrets, such as CSI's controllerPublishSecretRef, are left out).
// Secret references without a namespace of their own default to the claim's namespace.
func visitPVSecrets(pv *corev1.PersistentVolume, visit func(namespace, name string) bool) bool {
	claimNS := ""
	if pv.Spec.ClaimRef != nil {
		claimNS = pv.Spec.ClaimRef.Namespace
	}
	or := func(ns string) string {
		if ns == "" {
			return claimNS
		}
		return ns
	}
	secretRef := func(ref *corev1.SecretReference, defaultNS bool) bool {
		if ref == nil || ref.Name == "" {
			return true
		}
		ns := ref.Namespace
		if defaultNS {
			ns = or(ns)
		}
		return visit(ns, ref.Name)
	}
	s := &pv.Spec.PersistentVolumeSource
	switch {
	case s.CSI != nil:
		return secretRef(s.CSI.NodePublishSecretRef, false) &&
			secretRef(s.CSI.NodeStageSecretRef, false) &&
			secretRef(s.CSI.NodeExpandSecretRef, false)
	case s.AzureFile != nil:
		ns := ""
		if s.AzureFile.SecretNamespace != nil {
			ns = *s.AzureFile.SecretNamespace
		}
		return s.AzureFile.SecretName == "" || visit(or(ns), s.AzureFile.SecretName)
	case s.CephFS != nil:
		return secretRef(s.CephFS.SecretRef, true)
	case s.Cinder != nil:
		return secretRef(s.Cinder.SecretRef, false)
	case s.FlexVolume != nil:
		return secretRef(s.FlexVolume.SecretRef, true)
	case s.RBD != nil:
		return secretRef(s.RBD.SecretRef, true)
	case s.ScaleIO != nil:
		return secretRef(s.ScaleIO.SecretRef, true)
	case s.ISCSI != nil:
		return secretRef(s.ISCSI.SecretRef, true)
	case s.StorageOS != nil:
		if s.StorageOS.SecretRef != nil && s.StorageOS.SecretRef.Name != "" {
			return visit(s.StorageOS.SecretRef.Namespace, s.StorageOS.SecretRef.Name)
		}
	}
	return true
}
