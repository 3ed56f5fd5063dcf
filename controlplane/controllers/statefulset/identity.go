package statefulset

import (
	"regexp"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

var (
	setKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	podKind = corev1.SchemeGroupVersion.WithKind("Pod")
)

// podName matches <set>-<ordinal>: a StatefulSet pod's identity is its name.
var podName = regexp.MustCompile(`^(.*)-([0-9]+)$`)

// parentAndOrdinal splits a pod name into its set's name and ordinal; -1 when it is not a
// StatefulSet pod name.
func parentAndOrdinal(name string) (string, int) {
	m := podName.FindStringSubmatch(name)
	if m == nil {
		return "", -1
	}
	n, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return "", -1
	}
	return m[1], int(n)
}

// ordinalOf is a pod's ordinal, -1 for a name without one.
func ordinalOf(p *corev1.Pod) int {
	_, o := parentAndOrdinal(p.Name)
	return o
}

// isMember reports whether the pod's name makes it one of the set's: only those are
// adopted, as upstream (a pod labelled like the set but named otherwise is not).
func isMember(set *appsv1.StatefulSet, p *corev1.Pod) bool {
	parent, o := parentAndOrdinal(p.Name)
	return o >= 0 && parent == set.Name
}

// startOrdinal is spec.ordinals.start (0 without it).
func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

func replicasOf(set *appsv1.StatefulSet) int {
	return int(ptr.Deref(set.Spec.Replicas, 1))
}

// inRange reports whether ordinal is one the set should run now.
func inRange(set *appsv1.StatefulSet, ordinal int) bool {
	s := startOrdinal(set)
	return ordinal >= s && ordinal < s+replicasOf(set)
}

// PodName is the name of the set's pod at ordinal.
func PodName(set *appsv1.StatefulSet, ordinal int) string {
	return set.Name + "-" + strconv.Itoa(ordinal)
}

// ClaimName is the name of the PVC from template for the set's pod at ordinal.
func ClaimName(set *appsv1.StatefulSet, template string, ordinal int) string {
	return template + "-" + set.Name + "-" + strconv.Itoa(ordinal)
}

// revisionOf is the revision a pod was created at.
func revisionOf(p *corev1.Pod) string {
	return p.Labels[appsv1.StatefulSetRevisionLabel]
}

// identityMatches reports whether the pod carries the identity labels its name implies; a
// pod adopted without them (made by hand, say) is relabelled.
func identityMatches(set *appsv1.StatefulSet, p *corev1.Pod) bool {
	o := ordinalOf(p)
	return o >= 0 && isMember(set, p) && p.Namespace == set.Namespace &&
		p.Labels[appsv1.StatefulSetPodNameLabel] == p.Name && p.Labels[appsv1.PodIndexLabel] == strconv.Itoa(o)
}

// NewPod builds the set's pod at ordinal from the set's template (the caller passes the set
// as of the revision the pod is to run) labelled with that revision: its name, hostname and
// subdomain give it its stable network identity, and each volume claim template becomes a
// volume on the pod's own PVC.
func NewPod(set *appsv1.StatefulSet, ordinal int, revision string) *corev1.Pod {
	t := set.Spec.Template.DeepCopy()
	name := PodName(set, ordinal)
	lbl := map[string]string{}
	for k, v := range t.Labels {
		lbl[k] = v
	}
	lbl[appsv1.StatefulSetPodNameLabel] = name
	lbl[appsv1.PodIndexLabel] = strconv.Itoa(ordinal)
	lbl[appsv1.StatefulSetRevisionLabel] = revision
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       set.Namespace,
			Labels:          lbl,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, setKind)},
		},
		Spec: t.Spec,
	}
	p.Spec.Hostname = name
	p.Spec.Subdomain = set.Spec.ServiceName
	// The claims' volumes replace same-named volumes of the template.
	claimed := map[string]bool{}
	var vols []corev1.Volume
	for _, c := range set.Spec.VolumeClaimTemplates {
		claimed[c.Name] = true
		vols = append(vols, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ClaimName(set, c.Name, ordinal)}}})
	}
	for _, v := range p.Spec.Volumes {
		if !claimed[v.Name] {
			vols = append(vols, v)
		}
	}
	p.Spec.Volumes = vols
	return p
}

// NewClaims are the PVCs of the set's pod at ordinal, one per volume claim template: the
// template's labels plus the selector's match labels, so they can be found by the set's
// selector. Owner references are the retention policy's, added by ClaimRefs.
func NewClaims(set *appsv1.StatefulSet, ordinal int) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for i := range set.Spec.VolumeClaimTemplates {
		c := set.Spec.VolumeClaimTemplates[i].DeepCopy()
		tmpl := c.Name
		c.ObjectMeta = metav1.ObjectMeta{
			Name:        ClaimName(set, tmpl, ordinal),
			Namespace:   set.Namespace,
			Labels:      c.Labels,
			Annotations: c.Annotations,
			Finalizers:  c.Finalizers,
		}
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		if set.Spec.Selector != nil {
			for k, v := range set.Spec.Selector.MatchLabels {
				c.Labels[k] = v
			}
		}
		c.Status = corev1.PersistentVolumeClaimStatus{}
		out = append(out, c)
	}
	return out
}

// retention is the set's PVC retention policy, Retain for what is unset.
func retention(set *appsv1.StatefulSet) (whenDeleted, whenScaled appsv1.PersistentVolumeClaimRetentionPolicyType) {
	whenDeleted, whenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if p := set.Spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		if p.WhenDeleted != "" {
			whenDeleted = p.WhenDeleted
		}
		if p.WhenScaled != "" {
			whenScaled = p.WhenScaled
		}
	}
	return whenDeleted, whenScaled
}

func matchesRef(ref *metav1.OwnerReference, name string, gvk schema.GroupVersionKind) bool {
	return ref.APIVersion == gvk.GroupVersion().String() && ref.Kind == gvk.Kind && ref.Name == name
}

// ClaimRefs are the owner references a PVC of the set's pod p should carry under the
// retention policy, and whether they differ from the claim's — upstream's scheme, which lets
// the garbage collector do the deleting:
//
//	whenScaled=Delete: the pod controls the claim of a condemned ordinal (scaled away), so
//	  deleting the pod deletes it; a claim of an ordinal in range has no pod reference, so a
//	  pod deleted to be recreated keeps its data;
//	whenDeleted=Delete: the set controls every other claim, so deleting the set deletes them.
//
// A claim with a stale reference (to a same-named set or pod of another UID — a previous
// incarnation whose garbage collection is under way; for a pod not created yet, any pod
// reference) is left alone, as is one controlled by something else (our references are
// only removed from it).
func ClaimRefs(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, p *corev1.Pod) ([]metav1.OwnerReference, bool) {
	refs := claim.OwnerReferences
	ours := func(r *metav1.OwnerReference) bool {
		return matchesRef(r, set.Name, setKind) || matchesRef(r, p.Name, podKind)
	}
	for i := range refs {
		r := &refs[i]
		if matchesRef(r, set.Name, setKind) && r.UID != set.UID || matchesRef(r, p.Name, podKind) && r.UID != p.UID {
			return refs, false
		}
	}
	whenDeleted, whenScaled := retention(set)
	const del = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	foreign := false
	if whenDeleted == del || whenScaled == del {
		for i := range refs {
			if !ours(&refs[i]) && ptr.Deref(refs[i].Controller, false) {
				foreign = true
			}
		}
	}
	var want []metav1.OwnerReference
	for _, r := range refs {
		if !ours(&r) {
			want = append(want, r)
		}
	}
	if !foreign {
		scaledDown := !inRange(set, ordinalOf(p))
		podOwns := whenScaled == del && scaledDown
		if whenDeleted == del && !podOwns {
			want = append(want, *metav1.NewControllerRef(set, setKind))
		}
		if podOwns && p.UID != "" {
			want = append(want, *metav1.NewControllerRef(p, podKind))
		}
	}
	return want, !sameRefs(refs, want)
}

// sameRefs compares reference lists as sets of (UID, controller).
func sameRefs(a, b []metav1.OwnerReference) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(r metav1.OwnerReference) string {
		return string(r.UID) + "/" + strconv.FormatBool(ptr.Deref(r.Controller, false))
	}
	m := map[string]int{}
	for _, r := range a {
		m[key(r)]++
	}
	for _, r := range b {
		if m[key(r)] == 0 {
			return false
		}
		m[key(r)]--
	}
	return true
}

// staleClaim reports whether a claim still references a previous pod of the same name: its
// deletion by the garbage collector is pending, so the new pod must wait rather than mount
// a claim about to go.
func staleClaim(claim *corev1.PersistentVolumeClaim, podName string) bool {
	for i := range claim.OwnerReferences {
		if matchesRef(&claim.OwnerReferences[i], podName, podKind) {
			return true
		}
	}
	return false
}
