package admission

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/skiff-sh/skiff/controlplane/nodeauth"
)

// PodGetter reads a pod; it returns a NotFound API error if there is none.
type PodGetter func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// NodeGetter reads a Node; it returns a NotFound API error if there is none.
type NodeGetter func(ctx context.Context, name string) (*corev1.Node, error)

// ServiceAccountGetter reads a service account; it returns a NotFound API error if there is
// none.
type ServiceAccountGetter func(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)

// NodeRestriction keeps each node (a kubelet, user system:node:<name> in system:nodes) to
// writing what concerns itself, as upstream's plugin of the same name: mirror pods bound to
// it, the status of and evictions of its pods, its own Node (without steering labels, taints
// or configSource), Lease and CSINode, tokens bound to its pods, ResourceSlices and
// PodCertificateRequests for itself, and CSRs in its own name. Other users pass untouched.
type NodeRestriction struct {
	// Pods reads existing pods (for deletions, evictions, token and certificate requests).
	Pods PodGetter
	// Nodes, if set, checks the UID of the Node a mirror pod names as its owner; it is
	// required for PodCertificateRequests.
	Nodes NodeGetter
	// ServiceAccounts is required for PodCertificateRequests.
	ServiceAccounts ServiceAccountGetter
	// Authorizer, if set, is asked whether a node may request a token for an audience its
	// pod doesn't mount ("request-serviceaccounts-token-audience" on the audience) or a
	// certificate from a signer its pod doesn't mount ("request-serviceaccounts-podcertificate-signer").
	// Without it such requests are refused.
	Authorizer authorizer.UnconditionalAuthorizer
}

var _ admission.ValidationInterface = (*NodeRestriction)(nil)

// Handles implements admission.Interface.
func (*NodeRestriction) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Update || op == admission.Delete
}

// Validate implements admission.ValidationInterface.
func (p *NodeRestriction) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	node, isNode := nodeauth.NodeIdentity(a.GetUserInfo())
	if !isNode {
		return nil
	}
	if node == "" {
		return admission.NewForbidden(a, fmt.Errorf("could not determine node from user %q", a.GetUserInfo().GetName()))
	}
	nr := nodeRequest{p: p, ctx: ctx, a: a, node: node}
	switch a.GetResource().GroupResource() {
	case corev1.Resource("pods"):
		switch a.GetSubresource() {
		case "":
			return nr.pod()
		case "status":
			return nr.podStatus()
		case "eviction":
			return nr.eviction()
		}
		return nr.forbid("unexpected pod subresource %q, only 'status' and 'eviction' are allowed", a.GetSubresource())
	case corev1.Resource("nodes"):
		return nr.nodeObject()
	case corev1.Resource("persistentvolumeclaims"):
		if a.GetSubresource() == "status" {
			return nr.claimStatus()
		}
		return nr.forbid("may only update PVC status")
	case corev1.Resource("serviceaccounts"):
		return nr.token()
	case certificatesv1.Resource("podcertificaterequests"):
		return nr.podCertificateRequest()
	case coordinationv1.Resource("leases"):
		return nr.lease()
	case storagev1.Resource("csinodes"):
		return nr.csiNode()
	case resourcev1.Resource("resourceslices"):
		return nr.resourceSlice()
	case certificatesv1.Resource("certificatesigningrequests"):
		return nr.csr()
	}
	return nil
}

// nodeRequest is one request of node.
type nodeRequest struct {
	p    *NodeRestriction
	ctx  context.Context
	a    admission.Attributes
	node string
}

func (r nodeRequest) forbid(format string, args ...any) error {
	return admission.NewForbidden(r.a, fmt.Errorf(format, args...))
}

func (r nodeRequest) unexpectedType(obj runtime.Object) error {
	return r.forbid("unexpected type %T", obj)
}

// getPod reads an existing pod: a NotFound error goes back as is, others become Forbidden.
func (r nodeRequest) getPod(namespace, name string) (*corev1.Pod, error) {
	if r.p.Pods == nil {
		return nil, r.forbid("no pod getter configured")
	}
	pod, err := r.p.Pods(r.ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, err
	}
	if err != nil {
		return nil, admission.NewForbidden(r.a, err)
	}
	return pod, nil
}

func (r nodeRequest) pod() error {
	switch r.a.GetOperation() {
	case admission.Create:
		return r.mirrorPod()
	case admission.Delete:
		pod, err := r.getPod(r.a.GetNamespace(), r.a.GetName())
		if err != nil {
			return err
		}
		if pod.Spec.NodeName != r.node {
			return r.forbid("node %q can only delete pods with spec.nodeName set to itself", r.node)
		}
		return nil
	}
	return r.forbid("unexpected operation %q, node %q can only create and delete mirror pods", r.a.GetOperation(), r.node)
}

// mirrorPod admits a mirror pod bound to the node, owned by its Node and referring to no
// other API object.
func (r nodeRequest) mirrorPod() error {
	pod, ok := r.a.GetObject().(*corev1.Pod)
	if !ok {
		return r.unexpectedType(r.a.GetObject())
	}
	if !nodeauth.IsMirrorPod(pod) {
		return r.forbid("pod does not have %q annotation, node %q can only create mirror pods", corev1.MirrorPodAnnotationKey, r.node)
	}
	if pod.Spec.NodeName != r.node {
		return r.forbid("node %q can only create pods with spec.nodeName set to itself", r.node)
	}
	switch len(pod.OwnerReferences) {
	case 0:
		return r.forbid("node %q can only create pods with an owner reference set to itself", r.node)
	case 1:
	default:
		return r.forbid("node %q can only create pods with a single owner reference set to itself", r.node)
	}
	owner := pod.OwnerReferences[0]
	if owner.APIVersion != "v1" || owner.Kind != "Node" || owner.Name != r.node {
		return r.forbid("node %q can only create pods with an owner reference set to itself", r.node)
	}
	if owner.Controller == nil || !*owner.Controller {
		return r.forbid("node %q can only create pods with a controller owner reference set to itself", r.node)
	}
	if owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion {
		return r.forbid("node %q must not set blockOwnerDeletion on an owner reference", r.node)
	}
	if r.p.Nodes != nil {
		n, err := r.p.Nodes(r.ctx, r.node)
		if apierrors.IsNotFound(err) {
			return err
		}
		if err != nil {
			return r.forbid("error looking up node %s to verify uid: %v", r.node, err)
		}
		if owner.UID != n.UID {
			return r.forbid("node %s UID mismatch: expected %s got %s", r.node, owner.UID, n.UID)
		}
	}
	what, err := apiReference(pod)
	if err != nil {
		return r.forbid("error checking mirror pod for API references: %w", err)
	}
	if what != "" {
		return r.forbid("node %q can not create pods that reference %s", r.node, what)
	}
	return nil
}

// apiReference names the first kind of API object pod refers to, "" if none: a kubelet's
// static pod must not be a way to read objects through the API.
func apiReference(pod *corev1.Pod) (string, error) {
	if pod.Spec.ServiceAccountName != "" {
		return "serviceaccounts", nil
	}
	if !nodeauth.VisitPodSecrets(pod, func(string) bool { return false }) {
		return "secrets", nil
	}
	if !nodeauth.VisitPodConfigMaps(pod, func(string) bool { return false }) {
		return "configmaps", nil
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		return "resourceclaims", nil
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			return "configmaps (via configmap volumes)", nil
		case v.Secret != nil:
			return "secrets (via secret volumes)", nil
		case v.CSI != nil:
			return "csidrivers (via CSI volumes)", nil
		case v.Glusterfs != nil:
			return "endpoints (via glusterFS volumes)", nil
		case v.PersistentVolumeClaim != nil:
			return "persistentvolumeclaims", nil
		case v.Ephemeral != nil:
			return "persistentvolumeclaims (via ephemeral volumes)", nil
		case v.AzureFile != nil:
			return "secrets (via azureFile volumes)", nil
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				switch {
				case s.DownwardAPI != nil:
				case s.ConfigMap != nil:
					return "configmaps (via projected volumes)", nil
				case s.Secret != nil:
					return "secrets (via projected volumes)", nil
				case s.ServiceAccountToken != nil:
					return "serviceaccounts (via projected volumes)", nil
				case s.ClusterTrustBundle != nil:
					return "clustertrustbundles", nil
				case s.PodCertificate != nil:
					return "podcertificates", nil
				default:
					return "", fmt.Errorf("unknown source for projected volume %q", v.Name)
				}
			}
		case v.HostPath != nil, v.EmptyDir != nil, v.DownwardAPI != nil, v.Image != nil, v.GitRepo != nil,
			v.NFS != nil, v.ISCSI != nil, v.FC != nil, v.RBD != nil, v.CephFS != nil, v.Cinder != nil,
			v.FlexVolume != nil, v.Flocker != nil, v.AWSElasticBlockStore != nil, v.GCEPersistentDisk != nil,
			v.AzureDisk != nil, v.VsphereVolume != nil, v.PhotonPersistentDisk != nil, v.PortworxVolume != nil,
			v.Quobyte != nil, v.ScaleIO != nil, v.StorageOS != nil:
			// Local, or network storage the kubelet mounts without the API (their secret
			// references were caught above).
		default:
			return "", fmt.Errorf("unknown volume type for volume  %q", v.Name)
		}
	}
	return "", nil
}

// podStatus admits status updates of the node's pods that leave labels and resource claim
// statuses (set by the scheduler and controllers) alone.
func (r nodeRequest) podStatus() error {
	if r.a.GetOperation() != admission.Update {
		return r.forbid("unexpected operation %q", r.a.GetOperation())
	}
	old, ok := r.a.GetOldObject().(*corev1.Pod)
	if !ok {
		return r.unexpectedType(r.a.GetOldObject())
	}
	if old.Spec.NodeName != r.node {
		return r.forbid("node %q can only update pod status for pods with spec.nodeName set to itself", r.node)
	}
	pod, ok := r.a.GetObject().(*corev1.Pod)
	if !ok {
		return r.unexpectedType(r.a.GetObject())
	}
	same := apiequality.Semantic.DeepEqual
	switch {
	case !same(old.Labels, pod.Labels):
		return r.forbid("node %q cannot update labels through pod status", r.node)
	case !same(old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses):
		return r.forbid("node %q cannot update resource claim statues", r.node)
	case !same(old.Status.ExtendedResourceClaimStatus, pod.Status.ExtendedResourceClaimStatus):
		return r.forbid("node %q cannot update extended resource claim status", r.node)
	case !same(old.Status.NodeAllocatableResourceClaimStatuses, pod.Status.NodeAllocatableResourceClaimStatuses):
		return r.forbid("node %q cannot update node allocatable resource claim statuses", r.node)
	}
	return nil
}

// eviction admits evictions of the node's own pods.
func (r nodeRequest) eviction() error {
	if r.a.GetOperation() != admission.Create {
		return r.forbid("unexpected operation %s", r.a.GetOperation())
	}
	var evicted string
	switch e := r.a.GetObject().(type) {
	case *policyv1.Eviction:
		evicted = e.Name
	case *policyv1beta1.Eviction:
		evicted = e.Name
	default:
		return r.unexpectedType(r.a.GetObject())
	}
	// The pod named in the URL wins over the one in the body.
	name := r.a.GetName()
	if name == "" {
		if evicted == "" {
			return r.forbid("could not determine pod from request data")
		}
		name = evicted
	}
	pod, err := r.getPod(r.a.GetNamespace(), name)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != r.node {
		return r.forbid("node %s can only evict pods with spec.nodeName set to itself", r.node)
	}
	return nil
}

// claimStatus admits updates of a claim's status capacity, conditions and resize progress
// only.
func (r nodeRequest) claimStatus() error {
	if r.a.GetOperation() != admission.Update {
		return r.forbid("unexpected operation %q", r.a.GetOperation())
	}
	old, ok := r.a.GetOldObject().(*corev1.PersistentVolumeClaim)
	if !ok {
		return r.unexpectedType(r.a.GetOldObject())
	}
	claim, ok := r.a.GetObject().(*corev1.PersistentVolumeClaim)
	if !ok {
		return r.unexpectedType(r.a.GetObject())
	}
	strip := func(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
		c = c.DeepCopy()
		c.ResourceVersion, c.ManagedFields = "", nil
		c.Status.Capacity, c.Status.Conditions = nil, nil
		c.Status.AllocatedResources, c.Status.AllocatedResourceStatuses = nil, nil
		return c
	}
	if o, n := strip(old), strip(claim); !apiequality.Semantic.DeepEqual(o, n) {
		return r.forbid("node %q is not allowed to update fields other than status.quantity and status.conditions: %v", r.node, diff.Diff(o, n))
	}
	return nil
}

// kubeletLabels are the kubernetes.io labels a kubelet may set on its Node, besides any
// under kubelet.kubernetes.io and node.kubernetes.io.
var kubeletLabels = sets.New(
	corev1.LabelHostname, corev1.LabelOSStable, corev1.LabelArchStable,
	"beta.kubernetes.io/os", "beta.kubernetes.io/arch",
	corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
	corev1.LabelInstanceType, corev1.LabelInstanceTypeStable,
)

// inDomain tells whether a label key's prefix is domain or a subdomain of it.
func inDomain(key, domain string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == domain || strings.HasSuffix(prefix, "."+domain))
}

// forbiddenNodeLabel tells whether a node may not set, change or remove label key on its
// Node: node-restriction.kubernetes.io labels (which admins use to steer workloads) and any
// other kubernetes.io or k8s.io label that isn't a kubelet's.
func forbiddenNodeLabel(key string) bool {
	if inDomain(key, corev1.LabelNamespaceNodeRestriction) {
		return true
	}
	if !inDomain(key, "kubernetes.io") && !inDomain(key, "k8s.io") {
		return false
	}
	return !kubeletLabels.Has(key) && !inDomain(key, corev1.LabelNamespaceSuffixKubelet) && !inDomain(key, corev1.LabelNamespaceSuffixNode)
}

// forbiddenLabelChanges lists, sorted, the keys whose values differ between a and b that the
// node may not touch.
func forbiddenLabelChanges(a, b map[string]string) []string {
	bad := sets.New[string]()
	check := func(x, y map[string]string) {
		for k, v := range x {
			if w, ok := y[k]; (!ok || v != w) && forbiddenNodeLabel(k) {
				bad.Insert(k)
			}
		}
	}
	check(a, b)
	check(b, a)
	return sets.List(bad)
}

// nodeObject admits writes to the node's own Node only, and no changes that would steer
// workloads to it or widen what it may read.
func (r nodeRequest) nodeObject() error {
	name := r.a.GetName()
	if name == "" && r.a.GetOperation() == admission.Create {
		if m, err := meta.Accessor(r.a.GetObject()); err == nil {
			name = m.GetName()
		}
	}
	if name != r.node {
		return r.forbid("node %q is not allowed to modify node %q", r.node, name)
	}
	switch r.a.GetOperation() {
	case admission.Create:
		n, ok := r.a.GetObject().(*corev1.Node)
		if !ok {
			return r.unexpectedType(r.a.GetObject())
		}
		if n.Spec.ConfigSource != nil {
			return r.forbid("node %q is not allowed to create pods with a non-nil configSource", r.node)
		}
		if bad := forbiddenLabelChanges(n.Labels, nil); len(bad) > 0 {
			return r.forbid("node %q is not allowed to set the following labels: %s", r.node, strings.Join(bad, ", "))
		}
	case admission.Update:
		n, ok := r.a.GetObject().(*corev1.Node)
		if !ok {
			return r.unexpectedType(r.a.GetObject())
		}
		old, ok := r.a.GetOldObject().(*corev1.Node)
		if !ok {
			return r.unexpectedType(r.a.GetOldObject())
		}
		// A nil configSource is let through: old kubelets drop the field on status updates.
		if n.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(n.Spec.ConfigSource, old.Spec.ConfigSource) {
			return r.forbid("node %q is not allowed to update configSource to a new non-nil configSource", r.node)
		}
		if !apiequality.Semantic.DeepEqual(n.Spec.Taints, old.Spec.Taints) {
			return r.forbid("node %q is not allowed to modify taints", r.node)
		}
		if !apiequality.Semantic.DeepEqual(n.OwnerReferences, old.OwnerReferences) {
			return r.forbid("node %q is not allowed to modify ownerReferences", r.node)
		}
		if bad := forbiddenLabelChanges(n.Labels, old.Labels); len(bad) > 0 {
			return r.forbid("is not allowed to modify labels: %s", strings.Join(bad, ", "))
		}
	}
	return nil
}

// token admits TokenRequests bound to a pod running on the node, for an audience the pod
// uses.
func (r nodeRequest) token() error {
	if r.a.GetOperation() != admission.Create || r.a.GetSubresource() != "token" {
		return nil
	}
	tr, ok := r.a.GetObject().(*authenticationv1.TokenRequest)
	if !ok {
		return r.unexpectedType(r.a.GetObject())
	}
	// A node may only ask for tokens bound to one of its pods; the token server adds the
	// node binding itself, so there is no other binding to spoof.
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return r.forbid("node requested token not bound to a pod")
	}
	if ref.UID == "" {
		return r.forbid("node requested token with a pod binding without a uid")
	}
	pod, err := r.getPod(r.a.GetNamespace(), ref.Name)
	if err != nil {
		return err
	}
	if ref.UID != pod.UID {
		return r.forbid("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID)
	}
	if pod.Spec.NodeName != r.node {
		return r.forbid("node requested token bound to a pod scheduled on a different node")
	}
	if err := r.audience(tr, pod); err != nil {
		return admission.NewForbidden(r.a, err)
	}
	return nil
}

// audience checks the token's audience is one the pod mounts a projected token for, or one
// the Authorizer grants the node.
func (r nodeRequest) audience(tr *authenticationv1.TokenRequest, pod *corev1.Pod) error {
	var audience string
	switch len(tr.Spec.Audiences) {
	case 0:
	case 1:
		audience = tr.Spec.Audiences[0]
	default:
		return errors.New("node may only request 0 or 1 audiences")
	}
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.Audience == audience {
				return nil
			}
		}
	}
	// CSI drivers' token audiences would count too upstream; skiff serves no CSIDrivers.
	user := r.a.GetUserInfo().GetName()
	allowed, err := r.authorize("request-serviceaccounts-token-audience", audience, r.a.GetName())
	if allowed {
		return nil
	}
	if err != nil {
		return fmt.Errorf("error authorizing %s to request tokens for audience %q: %w", user, audience, err)
	}
	return fmt.Errorf("%s is not authorized to request tokens for audience %q", user, audience)
}

// authorize asks the Authorizer whether the node may verb resource (a made-up one, in the
// request's group and namespace) named name.
func (r nodeRequest) authorize(verb, resource, name string) (bool, error) {
	if r.p.Authorizer == nil {
		return false, nil
	}
	d, _, err := r.p.Authorizer.Authorize(r.ctx, authorizer.AttributesRecord{
		User: r.a.GetUserInfo(), Verb: verb, APIGroup: r.a.GetResource().Group, APIVersion: r.a.GetResource().Version,
		Resource: resource, Namespace: r.a.GetNamespace(), Name: name, ResourceRequest: true,
	})
	return d == authorizer.DecisionAllow, err
}

// podCertificateRequest admits requests for a certificate of a (non-mirror) pod running on
// the node, in the name of its node, pod and service account.
func (r nodeRequest) podCertificateRequest() error {
	if r.a.GetOperation() != admission.Create {
		return r.forbid("unexpected operation %v", r.a.GetOperation())
	}
	if r.a.GetSubresource() != "" {
		return r.forbid("unexpected subresource %v", r.a.GetSubresource())
	}
	req, ok := r.a.GetObject().(*certificatesv1.PodCertificateRequest)
	if !ok {
		return r.unexpectedType(r.a.GetObject())
	}
	if r.p.Nodes == nil || r.p.ServiceAccounts == nil {
		return r.forbid("no node or service account getter configured")
	}
	ns, spec := r.a.GetNamespace(), &req.Spec
	podKey := ns + "/" + spec.PodName
	if string(spec.NodeName) != r.node {
		return r.forbid("PodCertificateRequest.Spec.NodeName=%q, which is not the requesting node %q", spec.NodeName, r.node)
	}
	// Mismatched UIDs may be the lag of an informer: they are not Forbidden, so a retry may
	// succeed.
	n, err := r.p.Nodes(r.ctx, r.node)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("while retrieving node %q named in the PodCertificateRequest: %w", spec.NodeName, err)
	}
	if err != nil {
		return r.forbid("while retrieving node %q named in the PodCertificateRequest: %w", spec.NodeName, err)
	}
	if n.UID != spec.NodeUID {
		return fmt.Errorf("PodCertificateRequest for pod %q names node UID %q, inconsistent with the running node (%q)", podKey, spec.NodeUID, n.UID)
	}
	if r.p.Pods == nil {
		return r.forbid("no pod getter configured")
	}
	pod, err := r.p.Pods(r.ctx, ns, spec.PodName)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("while retrieving pod %q named in the PodCertificateRequest: %w", podKey, err)
	}
	if err != nil {
		return r.forbid("while retrieving pod %q named in the PodCertificateRequest: %w", podKey, err)
	}
	if pod.UID != spec.PodUID {
		return fmt.Errorf("PodCertificateRequest for pod %q contains pod UID (%q) which differs from running pod %q", podKey, spec.PodUID, pod.UID)
	}
	if pod.Spec.NodeName != string(spec.NodeName) {
		return r.forbid("pod %q is not running on node %q named in the PodCertificateRequest", podKey, spec.NodeName)
	}
	if nodeauth.IsMirrorPod(pod) {
		return r.forbid("pod %q is a mirror pod", podKey)
	}
	if spec.ServiceAccountName != pod.Spec.ServiceAccountName {
		return r.forbid("PodCertificateRequest for pod %q contains serviceAccountName (%q) that differs from running pod (%q)", podKey, spec.ServiceAccountName, pod.Spec.ServiceAccountName)
	}
	sa, err := r.p.ServiceAccounts(r.ctx, ns, spec.ServiceAccountName)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("while retrieving service account %q named in the PodCertificateRequest: %w", ns+"/"+spec.ServiceAccountName, err)
	}
	if err != nil {
		return r.forbid("while retrieving service account %q named in the PodCertificateRequest: %w", ns+"/"+spec.ServiceAccountName, err)
	}
	if sa.UID != spec.ServiceAccountUID {
		return fmt.Errorf("PodCertificateRequest for pod %q names service account UID %q, which differs from the running service account (%q)", podKey, spec.ServiceAccountUID, sa.UID)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.PodCertificate != nil && s.PodCertificate.SignerName == spec.SignerName {
				return nil
			}
		}
	}
	// RBAC resource names can't hold "/": signer names are written with ":" instead.
	allowed, err := r.authorize("request-serviceaccounts-podcertificate-signer", strings.ReplaceAll(spec.SignerName, "/", ":"), spec.ServiceAccountName)
	if allowed {
		return nil
	}
	if err != nil {
		return r.forbid("error authorizing %s to request podcertificaterequests for signer %q: %w", r.a.GetUserInfo().GetName(), spec.SignerName, err)
	}
	return r.forbid("pod %q does not mount a podCertificate projected volume for signer %q", podKey, spec.SignerName)
}

// lease admits the node's own Lease in kube-node-lease.
func (r nodeRequest) lease() error {
	if r.a.GetNamespace() != corev1.NamespaceNodeLease {
		return r.forbid("can only access leases in the %q system namespace", corev1.NamespaceNodeLease)
	}
	name := r.a.GetName()
	if r.a.GetOperation() == admission.Create {
		l, ok := r.a.GetObject().(*coordinationv1.Lease)
		if !ok {
			return r.unexpectedType(r.a.GetObject())
		}
		name = l.Name
	}
	if name != r.node {
		return r.forbid("can only access node lease with the same name as the requesting node")
	}
	return nil
}

// csiNode admits the node's own CSINode; its status subresource (CSIVolumeHealth) isn't
// served.
func (r nodeRequest) csiNode() error {
	name := r.a.GetName()
	if r.a.GetOperation() == admission.Create {
		m, err := meta.Accessor(r.a.GetObject())
		if err != nil {
			return r.forbid("unable to access the object name")
		}
		name = m.GetName()
	}
	if name != r.node {
		return r.forbid("can only access CSINode with the same name as the requesting node")
	}
	if r.a.GetSubresource() == "status" {
		return r.forbid("CSIVolumeHealth feature gate is disabled")
	}
	return nil
}

// sliceNode returns a ResourceSlice's spec.nodeName.
func sliceNode(obj runtime.Object) (string, bool) {
	deref := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	switch s := obj.(type) {
	case *resourcev1.ResourceSlice:
		return deref(s.Spec.NodeName), true
	case *resourcev1beta2.ResourceSlice:
		return deref(s.Spec.NodeName), true
	case *resourcev1beta1.ResourceSlice:
		return s.Spec.NodeName, true
	}
	return "", false
}

// resourceSlice admits creating and deleting the node's own ResourceSlices (the Node
// authorizer checks the rest; it can't see the object of a create, nor each object of a
// deletecollection).
func (r nodeRequest) resourceSlice() error {
	var obj runtime.Object
	var verb string
	switch r.a.GetOperation() {
	case admission.Create:
		obj, verb = r.a.GetObject(), "create"
	case admission.Delete:
		obj, verb = r.a.GetOldObject(), "delete"
	default:
		return nil
	}
	node, ok := sliceNode(obj)
	if !ok {
		return r.unexpectedType(obj)
	}
	if node != r.node {
		return r.forbid("can only %s ResourceSlice with the same NodeName as the requesting node", verb)
	}
	return nil
}

// csr admits kubelet client and serving CSRs only for the node's own name.
func (r nodeRequest) csr() error {
	if r.a.GetOperation() != admission.Create {
		return nil
	}
	csr, ok := r.a.GetObject().(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return r.unexpectedType(r.a.GetObject())
	}
	if s := csr.Spec.SignerName; s != certificatesv1.KubeletServingSignerName && s != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return nil
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return r.forbid("unable to parse csr: %w", errors.New("PEM block type must be CERTIFICATE REQUEST"))
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return r.forbid("unable to parse csr: %w", err)
	}
	if req.Subject.CommonName != nodeauth.UserPrefix+r.node {
		return r.forbid("can only create a node CSR with CN=system:node:%s", r.node)
	}
	return nil
}
