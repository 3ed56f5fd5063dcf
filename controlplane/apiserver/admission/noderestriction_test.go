package admission

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/utils/ptr"
)

var (
	nrNode1    = &user.DefaultInfo{Name: "system:node:n1", Groups: []string{user.NodesGroup, user.AllAuthenticated}}
	nrNameless = &user.DefaultInfo{Name: "system:node:", Groups: []string{user.NodesGroup}}
	nrAdmin    = &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}

	nrPods     = corev1.SchemeGroupVersion.WithResource("pods")
	nrNodes    = corev1.SchemeGroupVersion.WithResource("nodes")
	nrPVCs     = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	nrSAs      = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	nrLeases   = coordinationv1.SchemeGroupVersion.WithResource("leases")
	nrCSINodes = storagev1.SchemeGroupVersion.WithResource("csinodes")
	nrSlices   = resourcev1.SchemeGroupVersion.WithResource("resourceslices")
	nrCSRs     = certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
	nrPCRs     = certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests")
)

// nrReq is one request to admit.
type nrReq struct {
	user     user.Info
	op       admission.Operation
	gvr      schema.GroupVersionResource
	sub      string
	ns, name string
	obj, old runtime.Object
}

func (r nrReq) attrs() admission.Attributes {
	u := r.user
	if u == nil {
		u = nrNode1
	}
	return admission.NewAttributesRecord(r.obj, r.old, schema.GroupVersionKind{}, r.ns, r.name, r.gvr, r.sub, r.op, nil, false, u)
}

// The cluster of the tests: pods ns/mine on n1 and ns/theirs on n2, Node n1 with UID node-uid.
func nrPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "default", Volumes: []corev1.Volume{
			{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "vault", Audience: "vault"}},
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/signer"}},
			}}}},
		}},
	}
}

func nrPlugin() *NodeRestriction {
	pods := map[string]*corev1.Pod{"ns/mine": nrPod("mine", "n1"), "ns/theirs": nrPod("theirs", "n2"),
		"ns/static": func() *corev1.Pod {
			p := nrPod("static", "n1")
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "h"}
			return p
		}()}
	return &NodeRestriction{
		Pods: func(_ context.Context, ns, name string) (*corev1.Pod, error) {
			if p, ok := pods[ns+"/"+name]; ok {
				return p, nil
			}
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
		},
		Nodes: func(_ context.Context, name string) (*corev1.Node, error) {
			if name == "n1" {
				return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}, nil
			}
			return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
		},
		ServiceAccounts: func(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
			if name == "default" {
				return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "sa-uid"}}, nil
			}
			return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
		},
	}
}

type nrCase struct {
	name string
	req  nrReq
	// want is "" for admitted, "notfound" for a NotFound error, "error" for a non-API error,
	// else a substring of the Forbidden message.
	want string
}

func nrRun(t *testing.T, p *NodeRestriction, cases []nrCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.req.attrs()
			if !p.Handles(a.GetOperation()) {
				t.Fatalf("does not handle %s", a.GetOperation())
			}
			err := p.Validate(context.Background(), a, nil)
			switch {
			case tc.want == "":
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
			case tc.want == "notfound":
				if !apierrors.IsNotFound(err) {
					t.Fatalf("got %v, want NotFound", err)
				}
			case tc.want == "error":
				if err == nil || apierrors.IsForbidden(err) {
					t.Fatalf("got %v, want a retriable error", err)
				}
			default:
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want Forbidden containing %q", err, tc.want)
				}
			}
		})
	}
}

func mirrorPod(mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-n1",
			Annotations:     map[string]string{corev1.MirrorPodAnnotationKey: "hash"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "node-uid", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "etcd",
			Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/etcd"}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "info", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{DownwardAPI: &corev1.DownwardAPIProjection{}}}}}},
			}},
	}
	if mod != nil {
		mod(p)
	}
	return p
}

func createMirror(mod func(*corev1.Pod)) nrReq {
	p := mirrorPod(mod)
	return nrReq{op: admission.Create, gvr: nrPods, ns: p.Namespace, name: p.Name, obj: p}
}

func addVolume(v corev1.VolumeSource) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "extra", VolumeSource: v})
	}
}

func TestNodeRestrictionPods(t *testing.T) {
	plain := mirrorPod(func(p *corev1.Pod) { p.Annotations = nil; p.OwnerReferences = nil })
	mine, theirs := nrPod("mine", "n1"), nrPod("theirs", "n2")
	relabeled := mine.DeepCopy()
	relabeled.Labels["app"] = "y"
	claimed := mine.DeepCopy()
	claimed.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "c", ResourceClaimName: ptr.To("x")}}
	ready := mine.DeepCopy()
	ready.Status.Phase = corev1.PodRunning
	status := func(old, obj *corev1.Pod) nrReq {
		return nrReq{op: admission.Update, gvr: nrPods, sub: "status", ns: "ns", name: old.Name, obj: obj, old: old}
	}
	evict := func(name, body string) nrReq {
		return nrReq{op: admission.Create, gvr: nrPods, sub: "eviction", ns: "ns", name: name,
			obj: &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: body}}}
	}
	nrRun(t, nrPlugin(), []nrCase{
		{"admin creates any pod", nrReq{user: nrAdmin, op: admission.Create, gvr: nrPods, ns: "ns", name: "p", obj: plain}, ""},
		{"nameless node", nrReq{user: nrNameless, op: admission.Create, gvr: nrPods, ns: "ns", name: "p", obj: mirrorPod(nil)}, `could not determine node from user "system:node:"`},
		{"mirror pod", createMirror(nil), ""},
		{"not a mirror pod", nrReq{op: admission.Create, gvr: nrPods, ns: "ns", name: "p", obj: plain}, `node "n1" can only create mirror pods`},
		{"mirror pod for another node", createMirror(func(p *corev1.Pod) { p.Spec.NodeName = "n2" }), `node "n1" can only create pods with spec.nodeName set to itself`},
		{"unbound mirror pod", createMirror(func(p *corev1.Pod) { p.Spec.NodeName = "" }), "spec.nodeName set to itself"},
		{"no owner", createMirror(func(p *corev1.Pod) { p.OwnerReferences = nil }), "with an owner reference set to itself"},
		{"two owners", createMirror(func(p *corev1.Pod) {
			p.OwnerReferences = append(p.OwnerReferences, p.OwnerReferences[0])
		}), "with a single owner reference set to itself"},
		{"owned by another node", createMirror(func(p *corev1.Pod) { p.OwnerReferences[0].Name = "n2" }), "with an owner reference set to itself"},
		{"owned by a non-node", createMirror(func(p *corev1.Pod) { p.OwnerReferences[0].Kind = "ReplicaSet" }), "with an owner reference set to itself"},
		{"owner not controller", createMirror(func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }), "with a controller owner reference"},
		{"owner blocks deletion", createMirror(func(p *corev1.Pod) { p.OwnerReferences[0].BlockOwnerDeletion = ptr.To(true) }), "must not set blockOwnerDeletion"},
		{"owner UID mismatch", createMirror(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "stale" }), "node n1 UID mismatch: expected stale got node-uid"},
		{"service account", createMirror(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" }), `node "n1" can not create pods that reference serviceaccounts`},
		{"env secret", createMirror(func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}
		}), "reference secrets"},
		{"image pull secret", createMirror(func(p *corev1.Pod) { p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "s"}} }), "reference secrets"},
		{"envFrom configmap", createMirror(func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}
		}), "reference configmaps"},
		{"configmap volume", createMirror(addVolume(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}})), "reference configmaps"},
		{"claim", createMirror(addVolume(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}})), "reference persistentvolumeclaims"},
		{"ephemeral volume", createMirror(addVolume(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}})), "persistentvolumeclaims (via ephemeral volumes)"},
		{"CSI volume", createMirror(addVolume(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}})), "csidrivers (via CSI volumes)"},
		{"projected token", createMirror(addVolume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}}}}})), "serviceaccounts (via projected volumes)"},
		{"resource claim", createMirror(func(p *corev1.Pod) {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}}
		}), "reference resourceclaims"},
		{"unknown volume", createMirror(addVolume(corev1.VolumeSource{})), "unknown volume type"},
		{"update pod", nrReq{op: admission.Update, gvr: nrPods, ns: "ns", name: "mine", obj: mine, old: mine}, `node "n1" can only create and delete mirror pods`},
		{"delete own pod", nrReq{op: admission.Delete, gvr: nrPods, ns: "ns", name: "mine", old: mine}, ""},
		{"delete another node's pod", nrReq{op: admission.Delete, gvr: nrPods, ns: "ns", name: "theirs", old: theirs}, `node "n1" can only delete pods with spec.nodeName set to itself`},
		{"delete missing pod", nrReq{op: admission.Delete, gvr: nrPods, ns: "ns", name: "gone"}, "notfound"},
		{"own pod status", status(mine, ready), ""},
		{"another node's pod status", status(theirs, theirs), `node "n1" can only update pod status for pods with spec.nodeName set to itself`},
		{"labels through status", status(mine, relabeled), "cannot update labels through pod status"},
		{"resource claim statuses", status(mine, claimed), "cannot update resource claim statues"},
		{"evict own pod", evict("mine", "mine"), ""},
		{"evict by body", evict("", "mine"), ""},
		{"evict another node's pod", evict("theirs", "theirs"), "node n1 can only evict pods with spec.nodeName set to itself"},
		{"evict URL wins", evict("theirs", "mine"), "can only evict pods"},
		{"evict nobody", evict("", ""), "could not determine pod from request data"},
		{"evict missing pod", evict("gone", "gone"), "notfound"},
		{"ephemeral containers", nrReq{op: admission.Update, gvr: nrPods, sub: "ephemeralcontainers", ns: "ns", name: "mine", obj: mine, old: mine},
			`unexpected pod subresource "ephemeralcontainers", only 'status' and 'eviction' are allowed`},
		{"resize", nrReq{op: admission.Update, gvr: nrPods, sub: "resize", ns: "ns", name: "mine", obj: mine, old: mine}, "unexpected pod subresource"},
		{"binding", nrReq{op: admission.Create, gvr: nrPods, sub: "binding", ns: "ns", name: "mine", obj: &corev1.Binding{}}, "unexpected pod subresource"},
	})
	// Without a Node getter the owner's UID isn't checked.
	p := nrPlugin()
	p.Nodes = nil
	nrRun(t, p, []nrCase{{"no node getter", createMirror(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "stale" }), ""}})
}

func nrNodeObj(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func TestNodeRestrictionNodes(t *testing.T) {
	std := map[string]string{
		"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
		"topology.kubernetes.io/zone": "z", "node.kubernetes.io/instance-type": "big",
		"kubelet.kubernetes.io/x": "y", "sub.node.kubernetes.io/x": "y", "example.com/team": "a", "plain": "x",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range std {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	create := func(n *corev1.Node) nrReq {
		return nrReq{op: admission.Create, gvr: nrNodes, name: n.Name, obj: n}
	}
	update := func(old, n *corev1.Node) nrReq {
		return nrReq{op: admission.Update, gvr: nrNodes, name: n.Name, obj: n, old: old}
	}
	taint := corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	old := nrNodeObj("n1", with(map[string]string{"node-role.kubernetes.io/control-plane": ""}), taint)
	configured := nrNodeObj("n1", std)
	configured.Spec.ConfigSource = &corev1.NodeConfigSource{}
	owned := old.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "x"}}
	withStatus := old.DeepCopy()
	withStatus.Status.Phase = corev1.NodeRunning
	nrRun(t, nrPlugin(), []nrCase{
		{"create own node", create(nrNodeObj("n1", std, taint)), ""},
		{"create another node", create(nrNodeObj("n2", std)), `node "n1" is not allowed to modify node "n2"`},
		{"create with node-restriction label", create(nrNodeObj("n1", with(map[string]string{"node-restriction.kubernetes.io/pool": "a"}))),
			`node "n1" is not allowed to set the following labels: node-restriction.kubernetes.io/pool`},
		{"create with sub-domain node-restriction label", create(nrNodeObj("n1", with(map[string]string{"x.node-restriction.kubernetes.io/pool": "a"}))),
			"x.node-restriction.kubernetes.io/pool"},
		{"create with node-role label", create(nrNodeObj("n1", with(map[string]string{"node-role.kubernetes.io/control-plane": ""}))),
			"node-role.kubernetes.io/control-plane"},
		{"create with k8s.io label", create(nrNodeObj("n1", with(map[string]string{"a.k8s.io/b": "", "k8s.io/c": ""}))),
			"not allowed to set the following labels: a.k8s.io/b, k8s.io/c"},
		{"create with configSource", create(configured), "is not allowed to create pods with a non-nil configSource"},
		{"status update", nrReq{op: admission.Update, gvr: nrNodes, sub: "status", name: "n1", obj: withStatus, old: old}, ""},
		{"update keeping labels and taints", update(old, old.DeepCopy()), ""},
		{"update another node", update(nrNodeObj("n2", nil), nrNodeObj("n2", nil)), `node "n1" is not allowed to modify node "n2"`},
		{"add a kubelet label", update(old, nrNodeObj("n1", with(map[string]string{"node-role.kubernetes.io/control-plane": "", "kubelet.kubernetes.io/new": "1"}), taint)), ""},
		{"remove node-role label", update(old, nrNodeObj("n1", std, taint)), "is not allowed to modify labels: node-role.kubernetes.io/control-plane"},
		{"change node-restriction label", update(nrNodeObj("n1", map[string]string{"node-restriction.kubernetes.io/a": "1"}),
			nrNodeObj("n1", map[string]string{"node-restriction.kubernetes.io/a": "2"})), "is not allowed to modify labels: node-restriction.kubernetes.io/a"},
		{"remove taint", update(old, nrNodeObj("n1", old.Labels)), `node "n1" is not allowed to modify taints`},
		{"add taint", update(nrNodeObj("n1", nil), nrNodeObj("n1", nil, taint)), "is not allowed to modify taints"},
		{"set configSource", update(nrNodeObj("n1", std), configured), "is not allowed to update configSource to a new non-nil configSource"},
		{"ownerReferences", update(old, owned), "is not allowed to modify ownerReferences"},
		{"delete own node", nrReq{op: admission.Delete, gvr: nrNodes, name: "n1"}, ""},
		{"delete another node", nrReq{op: admission.Delete, gvr: nrNodes, name: "n2"}, `node "n1" is not allowed to modify node "n2"`},
		{"admin sets any label", nrReq{user: nrAdmin, op: admission.Create, gvr: nrNodes, name: "n2",
			obj: nrNodeObj("n2", map[string]string{"node-restriction.kubernetes.io/x": ""})}, ""},
	})
}

func TestNodeRestrictionTokens(t *testing.T) {
	token := func(sa string, ref *authenticationv1.BoundObjectReference, audiences ...string) nrReq {
		return nrReq{op: admission.Create, gvr: nrSAs, sub: "token", ns: "ns", name: sa,
			obj: &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: ref, Audiences: audiences}}}
	}
	pod := func(name, uid string) *authenticationv1.BoundObjectReference {
		return &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: types.UID(uid)}
	}
	cases := []nrCase{
		{"bound to own pod", token("default", pod("mine", "mine-uid")), ""},
		{"mounted audience", token("default", pod("mine", "mine-uid"), "vault"), ""},
		{"unbound", token("default", nil), "node requested token not bound to a pod"},
		{"bound to a secret", token("default", &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Secret", Name: "s", UID: "u"}), "not bound to a pod"},
		{"bound to a node", token("default", &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "node-uid"}), "not bound to a pod"},
		{"no uid", token("default", pod("mine", "")), "node requested token with a pod binding without a uid"},
		{"stale uid", token("default", pod("mine", "old")), "the UID in the bound object reference (old) does not match the UID in record"},
		{"another node's pod", token("default", pod("theirs", "theirs-uid")), "node requested token bound to a pod scheduled on a different node"},
		{"missing pod", token("default", pod("gone", "x")), "notfound"},
		{"unmounted audience", token("default", pod("mine", "mine-uid"), "api"), `system:node:n1 is not authorized to request tokens for audience "api"`},
		{"two audiences", token("default", pod("mine", "mine-uid"), "vault", "api"), "node may only request 0 or 1 audiences"},
		{"create service account", nrReq{op: admission.Create, gvr: nrSAs, ns: "ns", name: "x", obj: &corev1.ServiceAccount{}}, ""},
	}
	nrRun(t, nrPlugin(), cases)
	// An Authorizer may grant further audiences.
	p := nrPlugin()
	var asked authorizer.Attributes
	p.Authorizer = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		asked = a
		if a.GetResource() == "api" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
	nrRun(t, p, []nrCase{
		{"granted audience", token("default", pod("mine", "mine-uid"), "api"), ""},
		{"ungranted audience", token("default", pod("mine", "mine-uid"), "other"), "is not authorized to request tokens"},
	})
	if asked == nil || asked.GetVerb() != "request-serviceaccounts-token-audience" || asked.GetName() != "default" || asked.GetNamespace() != "ns" {
		t.Errorf("authorizer asked %#v", asked)
	}
}

func TestNodeRestrictionOthers(t *testing.T) {
	lease := func(op admission.Operation, ns, name string) nrReq {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		return nrReq{op: op, gvr: nrLeases, ns: ns, name: name, obj: l, old: l}
	}
	csiNode := func(op admission.Operation, sub, name string) nrReq {
		n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		return nrReq{op: op, gvr: nrCSINodes, sub: sub, name: name, obj: n, old: n}
	}
	slice := func(op admission.Operation, node string) nrReq {
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourcev1.ResourceSliceSpec{NodeName: ptr.To(node)}}
		r := nrReq{op: op, gvr: nrSlices, name: "s", obj: s}
		if op == admission.Delete {
			r.obj, r.old = nil, s
		}
		return r
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: "1"}}
	resized := claim.DeepCopy()
	resized.ResourceVersion = "2"
	resized.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	resized.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing}}
	relabeled := claim.DeepCopy()
	relabeled.Labels = map[string]string{"a": "b"}
	claimStatus := func(obj *corev1.PersistentVolumeClaim) nrReq {
		return nrReq{op: admission.Update, gvr: nrPVCs, sub: "status", ns: "ns", name: "c", obj: obj, old: claim}
	}
	nrRun(t, nrPlugin(), []nrCase{
		{"create own lease", lease(admission.Create, "kube-node-lease", "n1"), ""},
		{"update own lease", lease(admission.Update, "kube-node-lease", "n1"), ""},
		{"delete own lease", lease(admission.Delete, "kube-node-lease", "n1"), ""},
		{"create other lease", lease(admission.Create, "kube-node-lease", "n2"), "can only access node lease with the same name as the requesting node"},
		{"update other lease", lease(admission.Update, "kube-node-lease", "n2"), "same name as the requesting node"},
		{"lease elsewhere", lease(admission.Create, "kube-system", "n1"), `can only access leases in the "kube-node-lease" system namespace`},
		{"create own csinode", csiNode(admission.Create, "", "n1"), ""},
		{"update own csinode", csiNode(admission.Update, "", "n1"), ""},
		{"create other csinode", csiNode(admission.Create, "", "n2"), "can only access CSINode with the same name as the requesting node"},
		{"delete other csinode", csiNode(admission.Delete, "", "n2"), "can only access CSINode with the same name"},
		{"csinode status", csiNode(admission.Update, "status", "n1"), "CSIVolumeHealth feature gate is disabled"},
		{"create own slice", slice(admission.Create, "n1"), ""},
		{"create other slice", slice(admission.Create, "n2"), "can only create ResourceSlice with the same NodeName as the requesting node"},
		{"delete own slice", slice(admission.Delete, "n1"), ""},
		{"delete other slice", slice(admission.Delete, "n2"), "can only delete ResourceSlice with the same NodeName"},
		{"update other slice (authorizer's)", slice(admission.Update, "n2"), ""},
		{"claim status", claimStatus(resized), ""},
		{"claim labels through status", claimStatus(relabeled), `node "n1" is not allowed to update fields other than status.quantity and status.conditions`},
		{"claim update", nrReq{op: admission.Update, gvr: nrPVCs, ns: "ns", name: "c", obj: claim, old: claim}, "may only update PVC status"},
	})
}

func csrPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestNodeRestrictionCSRs(t *testing.T) {
	csr := func(signer string, req []byte) nrReq {
		return nrReq{op: admission.Create, gvr: nrCSRs, name: "csr",
			obj: &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Request: req}}}
	}
	own, other := csrPEM(t, "system:node:n1"), csrPEM(t, "system:node:n2")
	nrRun(t, nrPlugin(), []nrCase{
		{"own serving CSR", csr(certificatesv1.KubeletServingSignerName, own), ""},
		{"own client CSR", csr(certificatesv1.KubeAPIServerClientKubeletSignerName, own), ""},
		{"other serving CSR", csr(certificatesv1.KubeletServingSignerName, other), "can only create a node CSR with CN=system:node:n1"},
		{"other client CSR", csr(certificatesv1.KubeAPIServerClientKubeletSignerName, other), "CN=system:node:n1"},
		{"garbage", csr(certificatesv1.KubeletServingSignerName, []byte("nope")), "unable to parse csr"},
		{"other signer", csr("example.com/x", other), ""},
	})
}

func TestNodeRestrictionPodCertificates(t *testing.T) {
	pcr := func(mod func(*certificatesv1.PodCertificateRequestSpec)) nrReq {
		r := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"},
			Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/signer", PodName: "mine", PodUID: "mine-uid",
				ServiceAccountName: "default", ServiceAccountUID: "sa-uid", NodeName: "n1", NodeUID: "node-uid"}}
		if mod != nil {
			mod(&r.Spec)
		}
		return nrReq{op: admission.Create, gvr: nrPCRs, ns: "ns", name: "r", obj: r}
	}
	nrRun(t, nrPlugin(), []nrCase{
		{"own pod's certificate", pcr(nil), ""},
		{"another node", pcr(func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeName = "n2" }), `PodCertificateRequest.Spec.NodeName="n2", which is not the requesting node "n1"`},
		{"stale node UID", pcr(func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeUID = "x" }), "error"},
		{"another node's pod", pcr(func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName, s.PodUID = "theirs", "theirs-uid" }), `pod "ns/theirs" is not running on node "n1"`},
		{"mirror pod", pcr(func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName, s.PodUID = "static", "static-uid" }), `pod "ns/static" is a mirror pod`},
		{"other service account", pcr(func(s *certificatesv1.PodCertificateRequestSpec) { s.ServiceAccountName = "admin" }), "contains serviceAccountName"},
		{"unmounted signer", pcr(func(s *certificatesv1.PodCertificateRequestSpec) { s.SignerName = "example.com/other" }), `does not mount a podCertificate projected volume for signer "example.com/other"`},
		{"update", nrReq{op: admission.Update, gvr: nrPCRs, ns: "ns", name: "r", obj: &certificatesv1.PodCertificateRequest{}, old: &certificatesv1.PodCertificateRequest{}}, "unexpected operation UPDATE"},
	})
	p := nrPlugin()
	p.ServiceAccounts = nil
	nrRun(t, p, []nrCase{{"no getters", pcr(nil), "no node or service account getter configured"}})
}
