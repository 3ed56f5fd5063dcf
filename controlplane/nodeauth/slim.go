package nodeauth

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SlimPod is an informer transform (cache.TransformFunc) that keeps of a pod only what the
// Node authorizer's graph reads: its node, service account, mirror-pod annotation, and the
// Secrets, ConfigMaps, claims and ResourceClaims its spec and status name. The API server's
// graph informer holds every pod of the cluster; without this it held a full copy of each,
// managed fields, labels, probes and conditions included, beside the watch cache's (issue
// "Scale 1": a fifth of the server's memory per pod). Other objects pass through.
func SlimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID,
			ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp},
		Spec: corev1.PodSpec{
			NodeName:           p.Spec.NodeName,
			ServiceAccountName: p.Spec.ServiceAccountName,
			ImagePullSecrets:   p.Spec.ImagePullSecrets,
			Volumes:            p.Spec.Volumes,
			ResourceClaims:     p.Spec.ResourceClaims,
		},
		Status: corev1.PodStatus{
			ResourceClaimStatuses:       p.Status.ResourceClaimStatuses,
			ExtendedResourceClaimStatus: p.Status.ExtendedResourceClaimStatus,
		},
	}
	if v, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		slim.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: v}
	}
	slim.Spec.InitContainers = slimContainers(p.Spec.InitContainers)
	slim.Spec.Containers = slimContainers(p.Spec.Containers)
	for _, c := range p.Spec.EphemeralContainers {
		if env, from := slimEnv(c.Env), c.EnvFrom; env != nil || from != nil {
			slim.Spec.EphemeralContainers = append(slim.Spec.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name, Env: env, EnvFrom: from}})
		}
	}
	return slim, nil
}

// slimContainers keeps the containers' references to Secrets and ConfigMaps (env values
// from them, envFrom), nothing else.
func slimContainers(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range cs {
		if env, from := slimEnv(c.Env), c.EnvFrom; env != nil || from != nil {
			out = append(out, corev1.Container{Name: c.Name, Env: env, EnvFrom: from})
		}
	}
	return out
}

// slimEnv keeps the variables whose value comes from a Secret or a ConfigMap.
func slimEnv(env []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef != nil || e.ValueFrom.ConfigMapKeyRef != nil) {
			out = append(out, corev1.EnvVar{Name: e.Name, ValueFrom: e.ValueFrom})
		}
	}
	return out
}
