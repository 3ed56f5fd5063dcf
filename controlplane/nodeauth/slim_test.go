package nodeauth

import (
	"reflect"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// graphView is everything the authorizer reads from a pod.
func graphView(p *corev1.Pod) map[string][]string {
	collect := func(visitAll func(*corev1.Pod, func(string) bool) bool) []string {
		var out []string
		visitAll(p, func(n string) bool { out = append(out, n); return true })
		sort.Strings(out)
		return out
	}
	mirror := "no"
	if IsMirrorPod(p) {
		mirror = "yes"
	}
	return map[string][]string{
		"secrets":    collect(VisitPodSecrets),
		"configmaps": collect(VisitPodConfigMaps),
		"claims":     PodClaimNames(p),
		"resources":  podResourceClaimNames(p),
		"node":       {p.Spec.NodeName},
		"sa":         {p.Spec.ServiceAccountName},
		"mirror":     {mirror},
		"identity":   {p.Namespace, p.Name, string(p.UID), p.ResourceVersion},
	}
}

// TestSlimPodKeepsTheGraph: for pods that name Secrets, ConfigMaps, claims and
// ResourceClaims every way a pod can, the slim pod gives the authorizer the same answers as
// the full one, and drops what it never reads.
func TestSlimPodKeepsTheGraph(t *testing.T) {
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "a", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "x", corev1.MirrorPodAnnotationKey: "m"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{
			NodeName: "n1", ServiceAccountName: "sa1",
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox",
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init-env"}}}}}},
			Containers: []corev1.Container{
				{Name: "c", Image: "nginx", Env: []corev1.EnvVar{
					{Name: "PLAIN", Value: "1"},
					{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-secret"}, Key: "k"}}},
					{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-cm"}, Key: "k"}}},
					{Name: "F", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				}, EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "from-cm"}}}}},
				{Name: "plain", Image: "x"},
			},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug",
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "eph"}}}}}}},
			Volumes: []corev1.Volume{
				{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-cm"}}}},
				{Name: "p", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "e", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
				{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-secret"}}}},
			},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu-claim")}, {Name: "t", ResourceClaimTemplateName: ptr.To("tmpl")}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions:            []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "t", ResourceClaimName: ptr.To("web-t-123")}}},
	}
	obj, err := SlimPod(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := obj.(*corev1.Pod)
	if got, want := graphView(slim), graphView(full); !reflect.DeepEqual(got, want) {
		t.Fatalf("the slim pod answers differently:\n got %v\nwant %v", got, want)
	}
	if slim.Labels != nil || slim.ManagedFields != nil || slim.Annotations["note"] != "" || slim.Status.Conditions != nil ||
		slim.Status.PodIP != "" || len(slim.Spec.Containers) != 1 || slim.Spec.Containers[0].Image != "" || len(slim.Spec.Containers[0].Env) != 2 {
		t.Fatalf("the slim pod keeps what the graph never reads: %+v", slim)
	}
	// A pod with no references keeps only its identity and placement; other objects pass.
	bare, _ := SlimPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "i"}}}})
	if p := bare.(*corev1.Pod); p.Spec.Containers != nil || p.Annotations != nil || p.Spec.NodeName != "n" {
		t.Fatalf("bare pod: %+v", p)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	if got, _ := SlimPod(node); got != node {
		t.Fatal("a node was changed")
	}
}
