package nodeauth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// fakeSource serves pods and claims from memory; it does not read PersistentVolumes.
type fakeSource struct {
	pods []*corev1.Pod
	pvcs map[string]*corev1.PersistentVolumeClaim // by namespace/name
	err  error
}

func (f *fakeSource) PodsOnNode(node string) ([]*corev1.Pod, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []*corev1.Pod
	for _, p := range f.pods {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeSource) PersistentVolumeClaim(ns, name string) (*corev1.PersistentVolumeClaim, error) {
	if c, ok := f.pvcs[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), name)
}

// fakePVSource adds PersistentVolumes.
type fakePVSource struct {
	*fakeSource
	pvs map[string]*corev1.PersistentVolume
}

func (f fakePVSource) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	if v, ok := f.pvs[name]; ok {
		return v, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumes"), name)
}

func secretEnv(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}}
}

func configMapEnv(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}}
}

func ref(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }

// The world of the tests: node n1 runs pod ns/p1 (which refers to one of everything) and
// the mirror pod ns/mirror; node n2 runs ns/p2.
func world() *fakeSource {
	p1 := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1"},
		Spec: corev1.PodSpec{
			NodeName:           "n1",
			ServiceAccountName: "sa1",
			ImagePullSecrets:   []corev1.LocalObjectReference{ref("pull-secret")},
			InitContainers:     []corev1.Container{{Name: "init", Env: []corev1.EnvVar{secretEnv("init-secret")}}},
			Containers: []corev1.Container{{
				Name: "c",
				Env:  []corev1.EnvVar{secretEnv("env-secret"), configMapEnv("env-cm"), {Name: "plain", Value: "x"}},
				EnvFrom: []corev1.EnvFromSource{
					{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("envfrom-secret")}},
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("envfrom-cm")}},
				},
			}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name:    "debug",
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("ephemeral-secret")}}},
			}}},
			Volumes: []corev1.Volume{
				{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("vol-cm")}}},
				{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: ref("proj-secret")}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("proj-cm")}},
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				}}}},
				{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: ptr.To(ref("csi-secret"))}}},
				{Name: "rbd", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{SecretRef: ptr.To(ref("rbd-secret"))}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim1"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
				{Name: "pending", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "unbound"}}},
			},
			ResourceClaims: []corev1.PodResourceClaim{
				{Name: "gpu", ResourceClaimName: ptr.To("rc1")},
				{Name: "tpl", ResourceClaimTemplateName: ptr.To("template")},
			},
		},
		Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "tpl", ResourceClaimName: ptr.To("p1-tpl-x7")}}},
	}
	mirror := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mirror", Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "h"}},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "mirror-sa", Volumes: []corev1.Volume{
			{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "mirror-secret"}}}}},
	}
	p2 := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p2"},
		Spec: corev1.PodSpec{NodeName: "n2", ServiceAccountName: "sa2",
			Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{secretEnv("other-secret"), configMapEnv("other-cm")}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim2"}}}}},
	}
	claim := func(name, volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
	}
	return &fakeSource{
		pods: []*corev1.Pod{p1, mirror, p2},
		pvcs: map[string]*corev1.PersistentVolumeClaim{
			"ns/claim1":     claim("claim1", "pv1"),
			"ns/p1-scratch": claim("p1-scratch", "pv-eph"),
			"ns/unbound":    claim("unbound", ""),
			"ns/claim2":     claim("claim2", "pv2"),
		},
	}
}

func pvWorld() fakePVSource {
	pv := func(name, claim string, csi *corev1.CSIPersistentVolumeSource) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: csi}}}
	}
	return fakePVSource{fakeSource: world(), pvs: map[string]*corev1.PersistentVolume{
		"pv1": pv("pv1", "claim1", &corev1.CSIPersistentVolumeSource{Driver: "d",
			NodePublishSecretRef:       &corev1.SecretReference{Namespace: "csi", Name: "pv-publish"},
			NodeStageSecretRef:         &corev1.SecretReference{Namespace: "csi", Name: "pv-stage"},
			ControllerPublishSecretRef: &corev1.SecretReference{Namespace: "csi", Name: "pv-controller"}}),
		"pv2": pv("pv2", "claim2", &corev1.CSIPersistentVolumeSource{Driver: "d",
			NodePublishSecretRef: &corev1.SecretReference{Namespace: "csi", Name: "pv2-publish"}}),
		// pv-eph's claimRef names another claim: its binding is not settled.
		"pv-eph": pv("pv-eph", "someone-else", &corev1.CSIPersistentVolumeSource{Driver: "d",
			NodePublishSecretRef: &corev1.SecretReference{Namespace: "csi", Name: "eph-publish"}}),
	}}
}

var (
	node1    = &user.DefaultInfo{Name: "system:node:n1", Groups: []string{user.NodesGroup, user.AllAuthenticated}}
	nameless = &user.DefaultInfo{Name: "system:node:", Groups: []string{user.NodesGroup}}
	alice    = &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	// impostor has a node's name but not the group.
	impostor = &user.DefaultInfo{Name: "system:node:n1", Groups: []string{user.AllAuthenticated}}
)

// req parses "verb group/resource/subresource namespace/name", "-" for empty parts
// (e.g. "get /secrets ns/s", "create /serviceaccounts/token ns/sa1", "get /nodes n1").
func req(u user.Info, s string, selector ...string) authorizer.AttributesRecord {
	f := strings.Fields(s)
	gr := strings.SplitN(f[1], "/", 3)
	a := authorizer.AttributesRecord{User: u, Verb: f[0], APIGroup: gr[0], Resource: gr[1], ResourceRequest: true}
	if len(gr) == 3 {
		a.Subresource = gr[2]
	}
	if len(f) > 2 && f[2] != "-" {
		if ns, name, ok := strings.Cut(f[2], "/"); ok {
			a.Namespace, a.Name = ns, name
		} else {
			a.Name = f[2]
		}
	}
	if len(selector) > 0 {
		sel, err := fields.ParseSelector(selector[0])
		if err != nil {
			panic(err)
		}
		a.FieldSelectorRequirements = sel.Requirements()
	}
	return a
}

// list is req for a namespace-wide collection request: "list /secrets ns".
func list(u user.Info, s string, selector ...string) authorizer.AttributesRecord {
	a := req(u, s, selector...)
	a.Namespace, a.Name = a.Name, ""
	if a.Namespace == "" {
		a.Namespace = strings.Fields(s)[2]
	}
	return a
}

type tcase struct {
	name   string
	attrs  authorizer.AttributesRecord
	allow  bool
	reason string // substring of the reason, when checked
}

func run(t *testing.T, src Source, cases []tcase) {
	t.Helper()
	az := New(src, testNodeRules())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, reason, err := az.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if got := d == authorizer.DecisionAllow; got != tc.allow {
				t.Fatalf("allowed = %v (decision %v, reason %q), want %v", got, d, reason, tc.allow)
			}
			if !tc.allow && d != authorizer.DecisionNoOpinion {
				t.Fatalf("decision %v, want NoOpinion", d)
			}
			if !strings.Contains(reason, tc.reason) {
				t.Fatalf("reason %q, want it to contain %q", reason, tc.reason)
			}
		})
	}
}

const noRelation = "no relationship found between node 'n1' and this object"

func TestSecretsAndConfigMaps(t *testing.T) {
	var cases []tcase
	for _, s := range []string{"pull-secret", "init-secret", "env-secret", "envfrom-secret", "ephemeral-secret",
		"vol-secret", "proj-secret", "csi-secret", "rbd-secret"} {
		cases = append(cases, tcase{name: "get " + s, attrs: req(node1, "get /secrets ns/"+s), allow: true})
	}
	for _, c := range []string{"env-cm", "envfrom-cm", "vol-cm", "proj-cm"} {
		cases = append(cases, tcase{name: "get " + c, attrs: req(node1, "get /configmaps ns/"+c), allow: true})
	}
	cases = append(cases,
		tcase{name: "other node's secret", attrs: req(node1, "get /secrets ns/other-secret"), reason: noRelation},
		tcase{name: "other node's configmap", attrs: req(node1, "get /configmaps ns/other-cm"), reason: noRelation},
		tcase{name: "unreferenced secret", attrs: req(node1, "get /secrets ns/nobody"), reason: noRelation},
		tcase{name: "same name in another namespace", attrs: req(node1, "get /secrets elsewhere/vol-secret"), reason: noRelation},
		tcase{name: "a configmap is not a secret", attrs: req(node1, "get /secrets ns/vol-cm"), reason: noRelation},
		tcase{name: "a secret is not a configmap", attrs: req(node1, "get /configmaps ns/vol-secret"), reason: noRelation},
		tcase{name: "mirror pod's secret", attrs: req(node1, "get /secrets ns/mirror-secret"), reason: noRelation},
		tcase{name: "list secrets", attrs: list(node1, "list /secrets ns"), reason: "No Object name found"},
		tcase{name: "watch secrets", attrs: list(node1, "watch /secrets ns"), reason: "No Object name found"},
		tcase{name: "list configmaps", attrs: list(node1, "list /configmaps ns"), reason: "No Object name found"},
		tcase{name: "list secrets in all namespaces", attrs: req(node1, "list /secrets -"), reason: "can only read namespaced object of this type"},
		tcase{name: "watch one secret", attrs: req(node1, "watch /secrets ns/env-secret"), allow: true},
		tcase{name: "list one secret", attrs: req(node1, "list /secrets ns/env-secret"), allow: true},
		tcase{name: "watch one configmap", attrs: req(node1, "watch /configmaps ns/vol-cm"), allow: true},
		tcase{name: "watch another node's secret", attrs: req(node1, "watch /secrets ns/other-secret"), reason: noRelation},
		tcase{name: "update secret", attrs: req(node1, "update /secrets ns/env-secret"), reason: "can only read resources of this type"},
		tcase{name: "create secret", attrs: req(node1, "create /secrets ns/env-secret"), reason: "can only read resources of this type"},
		tcase{name: "delete configmap", attrs: req(node1, "delete /configmaps ns/vol-cm"), reason: "can only read resources of this type"},
		tcase{name: "secret subresource", attrs: req(node1, "get /secrets/x ns/env-secret"), reason: "cannot read subresource"},
	)
	run(t, world(), cases)
}

func TestVolumes(t *testing.T) {
	run(t, world(), []tcase{
		{name: "get claim", attrs: req(node1, "get /persistentvolumeclaims ns/claim1"), allow: true},
		{name: "get ephemeral claim", attrs: req(node1, "get /persistentvolumeclaims ns/p1-scratch"), allow: true},
		{name: "get other node's claim", attrs: req(node1, "get /persistentvolumeclaims ns/claim2"), reason: noRelation},
		{name: "list claims", attrs: list(node1, "list /persistentvolumeclaims ns"), reason: "can only get individual resources of this type"},
		{name: "watch one claim", attrs: req(node1, "watch /persistentvolumeclaims ns/claim1"), reason: "can only get individual resources of this type"},
		{name: "update claim", attrs: req(node1, "update /persistentvolumeclaims ns/claim1"), reason: "can only get individual resources of this type"},
		{name: "update claim status", attrs: req(node1, "update /persistentvolumeclaims/status ns/claim1"), allow: true},
		{name: "patch claim status", attrs: req(node1, "patch /persistentvolumeclaims/status ns/p1-scratch"), allow: true},
		{name: "update other claim's status", attrs: req(node1, "update /persistentvolumeclaims/status ns/claim2"), reason: noRelation},
		{name: "get claim status", attrs: req(node1, "get /persistentvolumeclaims/status ns/claim1"), reason: "can only get/update/patch this type"},
		{name: "get volume", attrs: req(node1, "get /persistentvolumes pv1"), allow: true},
		{name: "get ephemeral volume", attrs: req(node1, "get /persistentvolumes pv-eph"), allow: true},
		{name: "get other node's volume", attrs: req(node1, "get /persistentvolumes pv2"), reason: noRelation},
		{name: "list volumes", attrs: req(node1, "list /persistentvolumes -"), reason: "can only get individual resources of this type"},
		{name: "delete volume", attrs: req(node1, "delete /persistentvolumes pv1"), reason: "can only get individual resources of this type"},
		{name: "PV secrets need a PV source", attrs: req(node1, "get /secrets csi/pv-publish"), reason: noRelation},
		{name: "get resource claim", attrs: req(node1, "get resource.k8s.io/resourceclaims ns/rc1"), allow: true},
		{name: "get templated resource claim", attrs: req(node1, "get resource.k8s.io/resourceclaims ns/p1-tpl-x7"), allow: true},
		{name: "get template name as claim", attrs: req(node1, "get resource.k8s.io/resourceclaims ns/template"), reason: noRelation},
		{name: "list resource claims", attrs: list(node1, "list resource.k8s.io/resourceclaims ns"), reason: "can only get individual resources of this type"},
		{name: "volume attachment", attrs: req(node1, "get storage.k8s.io/volumeattachments va"), reason: noRelation},
	})
	run(t, pvWorld(), []tcase{
		{name: "node publish secret", attrs: req(node1, "get /secrets csi/pv-publish"), allow: true},
		{name: "node stage secret", attrs: req(node1, "get /secrets csi/pv-stage"), allow: true},
		{name: "controller secret", attrs: req(node1, "get /secrets csi/pv-controller"), reason: noRelation},
		{name: "other node's volume secret", attrs: req(node1, "get /secrets csi/pv2-publish"), reason: noRelation},
		{name: "volume bound to another claim", attrs: req(node1, "get /secrets csi/eph-publish"), reason: noRelation},
		{name: "pod secrets still", attrs: req(node1, "get /secrets ns/vol-secret"), allow: true},
	})
}

func TestServiceAccounts(t *testing.T) {
	run(t, world(), []tcase{
		{name: "token for its pod's SA", attrs: req(node1, "create /serviceaccounts/token ns/sa1"), allow: true},
		{name: "token for another node's SA", attrs: req(node1, "create /serviceaccounts/token ns/sa2"), reason: noRelation},
		{name: "token for mirror pod's SA", attrs: req(node1, "create /serviceaccounts/token ns/mirror-sa"), reason: noRelation},
		{name: "token in another namespace", attrs: req(node1, "create /serviceaccounts/token other/sa1"), reason: noRelation},
		{name: "token without a name", attrs: list(node1, "create /serviceaccounts/token ns"), reason: "can only create tokens for individual service accounts"},
		{name: "get token", attrs: req(node1, "get /serviceaccounts/token ns/sa1"), reason: "can only create tokens for individual service accounts"},
		{name: "create SA", attrs: req(node1, "create /serviceaccounts ns/sa1"), reason: "can only create token subresource of serviceaccount"},
		{name: "get its pod's SA", attrs: req(node1, "get /serviceaccounts ns/sa1"), allow: true},
		{name: "get another SA", attrs: req(node1, "get /serviceaccounts ns/sa2"), reason: noRelation},
		{name: "list SAs", attrs: list(node1, "list /serviceaccounts ns"), reason: "can only create tokens for individual service accounts"},
	})
}

func TestPods(t *testing.T) {
	run(t, world(), []tcase{
		{name: "get its pod", attrs: req(node1, "get /pods ns/p1"), allow: true},
		{name: "get its mirror pod", attrs: req(node1, "get /pods ns/mirror"), allow: true},
		{name: "get another node's pod", attrs: req(node1, "get /pods ns/p2"), reason: noRelation},
		{name: "list its pods", attrs: req(node1, "list /pods -", "spec.nodeName=n1"), allow: true},
		{name: "watch its pods", attrs: req(node1, "watch /pods -", "spec.nodeName=n1"), allow: true},
		{name: "list another node's pods", attrs: req(node1, "list /pods -", "spec.nodeName=n2"), reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "list all pods", attrs: req(node1, "list /pods -"), reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "list unbound pods", attrs: req(node1, "list /pods -", "spec.nodeName!=n1"), reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "watch one of its pods", attrs: req(node1, "watch /pods ns/p1"), allow: true},
		{name: "watch another node's pod", attrs: req(node1, "watch /pods ns/p2"), reason: noRelation},
		{name: "create (mirror) pod", attrs: list(node1, "create /pods ns"), allow: true},
		{name: "delete pod", attrs: req(node1, "delete /pods ns/p2"), allow: true},
		{name: "update pod", attrs: req(node1, "update /pods ns/p1")},
		{name: "update pod status", attrs: req(node1, "update /pods/status ns/p1"), allow: true},
		{name: "patch pod status", attrs: req(node1, "patch /pods/status ns/p1"), allow: true},
		{name: "get pod status", attrs: req(node1, "get /pods/status ns/p1")},
		{name: "evict", attrs: req(node1, "create /pods/eviction ns/p1"), allow: true},
		{name: "ephemeral containers", attrs: req(node1, "patch /pods/ephemeralcontainers ns/p1")},
		{name: "resize", attrs: req(node1, "patch /pods/resize ns/p1")},
		{name: "binding", attrs: req(node1, "create /pods/binding ns/p1")},
		{name: "exec", attrs: req(node1, "create /pods/exec ns/p1")},
		{name: "log", attrs: req(node1, "get /pods/log ns/p1")},
	})
}

func TestNodesLeasesCSINodes(t *testing.T) {
	run(t, world(), []tcase{
		{name: "get own node", attrs: req(node1, "get /nodes n1"), allow: true},
		{name: "watch own node", attrs: req(node1, "watch /nodes n1"), allow: true},
		{name: "get other node", attrs: req(node1, "get /nodes n2"), reason: "node 'n1' cannot read 'n2', only its own Node object"},
		{name: "list nodes", attrs: req(node1, "list /nodes -"), reason: "node 'n1' cannot read all nodes, only its own Node object"},
		{name: "create node", attrs: req(node1, "create /nodes -"), allow: true},
		{name: "update node", attrs: req(node1, "update /nodes n2"), allow: true},
		{name: "patch node status", attrs: req(node1, "patch /nodes/status n1"), allow: true},
		{name: "delete own node", attrs: req(node1, "delete /nodes n1")},
		{name: "node proxy", attrs: req(node1, "get /nodes/proxy n1")},
		{name: "get own lease", attrs: req(node1, "get coordination.k8s.io/leases kube-node-lease/n1"), allow: true},
		{name: "update own lease", attrs: req(node1, "update coordination.k8s.io/leases kube-node-lease/n1"), allow: true},
		{name: "delete own lease", attrs: req(node1, "delete coordination.k8s.io/leases kube-node-lease/n1"), allow: true},
		{name: "create lease", attrs: list(node1, "create coordination.k8s.io/leases kube-node-lease"), allow: true},
		{name: "get other lease", attrs: req(node1, "get coordination.k8s.io/leases kube-node-lease/n2"), reason: "can only access node lease with the same name as the requesting node"},
		{name: "update other lease", attrs: req(node1, "update coordination.k8s.io/leases kube-node-lease/n2"), reason: "same name"},
		{name: "lease elsewhere", attrs: req(node1, "get coordination.k8s.io/leases kube-system/n1"), reason: `can only access leases in the "kube-node-lease" system namespace`},
		{name: "list leases", attrs: list(node1, "list coordination.k8s.io/leases kube-node-lease"), reason: "can only get, create, update, patch, or delete a node lease"},
		{name: "watch own lease", attrs: req(node1, "watch coordination.k8s.io/leases kube-node-lease/n1"), reason: "can only get, create, update, patch, or delete a node lease"},
		{name: "get own csinode", attrs: req(node1, "get storage.k8s.io/csinodes n1"), allow: true},
		{name: "create csinode", attrs: req(node1, "create storage.k8s.io/csinodes -"), allow: true},
		{name: "update other csinode", attrs: req(node1, "update storage.k8s.io/csinodes n2"), reason: "can only access CSINode with the same name as the requesting node"},
		{name: "list csinodes", attrs: req(node1, "list storage.k8s.io/csinodes -"), reason: "can only get, create, update, patch, or delete a CSINode"},
		{name: "csinode status", attrs: req(node1, "update storage.k8s.io/csinodes/status n1"), reason: "CSIVolumeHealth"},
	})
}

func TestSlicesAndPodCertificates(t *testing.T) {
	run(t, world(), []tcase{
		{name: "create slice", attrs: req(node1, "create resource.k8s.io/resourceslices -"), allow: true},
		{name: "list own slices", attrs: req(node1, "list resource.k8s.io/resourceslices -", "spec.nodeName=n1"), allow: true},
		{name: "deletecollection own slices", attrs: req(node1, "deletecollection resource.k8s.io/resourceslices -", "spec.nodeName=n1"), allow: true},
		{name: "list all slices", attrs: req(node1, "list resource.k8s.io/resourceslices -"), reason: "nodeName field selector"},
		{name: "get slice", attrs: req(node1, "get resource.k8s.io/resourceslices s"), reason: noRelation},
		{name: "create pcr", attrs: list(node1, "create certificates.k8s.io/podcertificaterequests ns"), allow: true},
		{name: "watch own pcrs", attrs: req(node1, "watch certificates.k8s.io/podcertificaterequests -", "spec.nodeName=n1"), allow: true},
		{name: "list all pcrs", attrs: req(node1, "list certificates.k8s.io/podcertificaterequests -"), reason: "nodeName field selector"},
		{name: "delete pcr", attrs: req(node1, "delete certificates.k8s.io/podcertificaterequests ns/x"), reason: "nodes may not delete podcertificaterequests"},
		{name: "pcr status", attrs: req(node1, "update certificates.k8s.io/podcertificaterequests/status ns/x"), reason: "status subresource"},
	})
}

func TestRulesAndIdentity(t *testing.T) {
	nonResource := authorizer.AttributesRecord{User: node1, Verb: "get", Path: "/healthz"}
	run(t, world(), []tcase{
		{name: "alice reads a pod's secret", attrs: req(alice, "get /secrets ns/vol-secret")},
		{name: "alice gets nodes", attrs: req(alice, "get /nodes n1")},
		{name: "impostor", attrs: req(impostor, "get /secrets ns/vol-secret")},
		{name: "nameless node", attrs: req(nameless, "get /nodes n1"), reason: `unknown node for user "system:node:"`},
		{name: "nameless node and rules", attrs: req(nameless, "get /services ns/s"), reason: "unknown node"},
		{name: "list services (rules)", attrs: list(node1, "list /services ns"), allow: true},
		{name: "create events (rules)", attrs: list(node1, "create /events ns"), allow: true},
		{name: "create CSR (rules)", attrs: req(node1, "create certificates.k8s.io/certificatesigningrequests -"), allow: true},
		{name: "create tokenreview (rules)", attrs: req(node1, "create authentication.k8s.io/tokenreviews -"), allow: true},
		{name: "delete namespace", attrs: req(node1, "delete /namespaces ns")},
		{name: "list deployments", attrs: list(node1, "list apps/deployments ns")},
		{name: "non-resource", attrs: nonResource},
	})
	// Without rules, subdivided resources are still decided, the others refused.
	az := New(world(), nil)
	if d, _, _ := az.Authorize(context.Background(), req(node1, "list /services ns/s")); d != authorizer.DecisionNoOpinion {
		t.Errorf("no rules: list services = %v", d)
	}
	if d, _, _ := az.Authorize(context.Background(), req(node1, "get /nodes n1")); d != authorizer.DecisionAllow {
		t.Errorf("no rules: get own node = %v", d)
	}
	if _, _, incomplete, err := az.RulesFor(context.Background(), node1, "ns"); !incomplete || err == nil {
		t.Errorf("RulesFor(node) = incomplete %v, err %v", incomplete, err)
	}
	if _, _, incomplete, err := az.RulesFor(context.Background(), alice, "ns"); incomplete || err != nil {
		t.Errorf("RulesFor(alice) = incomplete %v, err %v", incomplete, err)
	}
}

func TestNodeIdentity(t *testing.T) {
	for _, tc := range []struct {
		u      user.Info
		name   string
		isNode bool
	}{
		{node1, "n1", true},
		{nameless, "", true},
		{impostor, "", false},
		{alice, "", false},
		{&user.DefaultInfo{Name: "n1", Groups: []string{user.NodesGroup}}, "", false},
		{&user.DefaultInfo{Name: "system:node:a:b", Groups: []string{user.NodesGroup}}, "a:b", true},
		{nil, "", false},
	} {
		name, isNode := NodeIdentity(tc.u)
		if name != tc.name || isNode != tc.isNode {
			t.Errorf("NodeIdentity(%v) = %q, %v; want %q, %v", tc.u, name, isNode, tc.name, tc.isNode)
		}
	}
}

func TestSourceErrors(t *testing.T) {
	src := world()
	src.err = errors.New("cache broken")
	d, reason, err := New(src, testNodeRules()).Authorize(context.Background(), req(node1, "get /secrets ns/vol-secret"))
	if d != authorizer.DecisionNoOpinion || err == nil || !strings.Contains(reason, noRelation) {
		t.Fatalf("got %v %q %v", d, reason, err)
	}
	// A claim that isn't there is no relationship, not an error.
	src = world()
	delete(src.pvcs, "ns/claim1")
	d, _, err = New(src, nil).Authorize(context.Background(), req(node1, "get /persistentvolumes pv1"))
	if d != authorizer.DecisionNoOpinion || err != nil {
		t.Fatalf("missing claim: %v %v", d, err)
	}
}

func TestInformerSource(t *testing.T) {
	for _, preIndexed := range []bool{false, true} {
		t.Run(fmt.Sprint("preIndexed=", preIndexed), func(t *testing.T) {
			inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{})
			if preIndexed {
				// What another controller sharing the informer may have done.
				if err := inf.AddIndexers(cache.Indexers{PodNodeNameIndex: IndexPodsByNode}); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range world().pods {
				if err := inf.GetIndexer().Add(p); err != nil {
					t.Fatal(err)
				}
			}
			pvcIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for _, c := range world().pvcs {
				if err := pvcIndexer.Add(c); err != nil {
					t.Fatal(err)
				}
			}
			src := NewInformerSource(inf, corelisters.NewPersistentVolumeClaimLister(pvcIndexer))
			pods, err := src.PodsOnNode("n1")
			if err != nil || len(pods) != 2 {
				t.Fatalf("PodsOnNode(n1) = %d pods, %v", len(pods), err)
			}
			if pods, _ := src.PodsOnNode(""); len(pods) != 0 {
				t.Errorf("PodsOnNode(\"\") = %d pods", len(pods))
			}
			if c, err := src.PersistentVolumeClaim("ns", "claim1"); err != nil || c.Spec.VolumeName != "pv1" {
				t.Errorf("claim1 = %v, %v", c, err)
			}
			if _, err := src.PersistentVolume("pv1"); !apierrors.IsNotFound(err) {
				t.Errorf("PV without lister: %v", err)
			}
			az := New(src, nil)
			if d, r, _ := az.Authorize(context.Background(), req(node1, "get /persistentvolumes pv1")); d != authorizer.DecisionAllow {
				t.Errorf("get pv1: %v %q", d, r)
			}
			if d, r, _ := az.Authorize(context.Background(), req(node1, "get /secrets ns/env-secret")); d != authorizer.DecisionAllow {
				t.Errorf("get env-secret: %v %q", d, r)
			}
		})
	}
	// Without claims served.
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{})
	src := NewInformerSource(inf, nil)
	if _, err := src.PersistentVolumeClaim("ns", "c"); !apierrors.IsNotFound(err) {
		t.Errorf("claim without lister: %v", err)
	}
}
