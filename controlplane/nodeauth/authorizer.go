package nodeauth

import (
	"context"
	"errors"
	"fmt"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/skiff-sh/skiff/controlplane/rbac"
)

// Authorizer is the Node authorizer. It has an opinion only about nodes' requests: it
// allows what the node is entitled to and has no opinion otherwise, so that a node can still
// be granted more through RBAC.
type Authorizer struct {
	src   Source
	rules []rbacv1.PolicyRule
}

var (
	_ authorizer.Authorizer   = (*Authorizer)(nil)
	_ authorizer.RuleResolver = (*Authorizer)(nil)
)

// New returns a Node authorizer reading relationships from src. nodeRules are what every
// node may do on the resources the authorizer doesn't subdivide (bootstrappolicy.NodeRules).
func New(src Source, nodeRules []rbacv1.PolicyRule) *Authorizer {
	return &Authorizer{src: src, rules: nodeRules}
}

// kind is a type of object a node may reach through its pods.
type kind string

const (
	kindPod                   kind = "pod"
	kindSecret                kind = "secret"
	kindConfigMap             kind = "configmap"
	kindPVC                   kind = "persistentvolumeclaim"
	kindPV                    kind = "persistentvolume"
	kindServiceAccount        kind = "serviceaccount"
	kindResourceClaim         kind = "resourceclaim"
	kindVolumeAttachment      kind = "volumeattachment"
	kindResourceSlice         kind = "resourceslice"
	kindPodCertificateRequest kind = "podcertificaterequest"
)

var (
	podsResource                   = corev1.Resource("pods")
	nodesResource                  = corev1.Resource("nodes")
	secretsResource                = corev1.Resource("secrets")
	configMapsResource             = corev1.Resource("configmaps")
	pvcsResource                   = corev1.Resource("persistentvolumeclaims")
	pvsResource                    = corev1.Resource("persistentvolumes")
	serviceAccountsResource        = corev1.Resource("serviceaccounts")
	leasesResource                 = coordinationv1.Resource("leases")
	csiNodesResource               = storagev1.Resource("csinodes")
	volumeAttachmentsResource      = storagev1.Resource("volumeattachments")
	resourceClaimsResource         = resourcev1.Resource("resourceclaims")
	resourceSlicesResource         = resourcev1.Resource("resourceslices")
	podCertificateRequestsResource = certificatesv1.Resource("podcertificaterequests")
)

type decision struct {
	d      authorizer.Decision
	reason string
	err    error
}

var allowed = decision{d: authorizer.DecisionAllow}

func refuse(format string, args ...any) decision {
	return decision{d: authorizer.DecisionNoOpinion, reason: fmt.Sprintf(format, args...)}
}

// Authorize implements authorizer.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	node, isNode := NodeIdentity(attrs.GetUser())
	if !isNode {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if node == "" {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("unknown node for user %q", attrs.GetUser().GetName()), nil
	}
	if attrs.IsResourceRequest() {
		if d, ok := a.subdivided(ctx, node, attrs); ok {
			return d.d, d.reason, d.err
		}
	}
	if rbac.RulesAllow(attrs, a.rules...) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// subdivided decides the requests on resources whose access depends on the node; ok is
// false for the others, which the static rules decide.
func (a *Authorizer) subdivided(ctx context.Context, node string, attrs authorizer.Attributes) (d decision, ok bool) {
	switch (schema.GroupResource{Group: attrs.GetAPIGroup(), Resource: attrs.GetResource()}) {
	case secretsResource:
		return a.read(ctx, node, kindSecret, attrs), true
	case configMapsResource:
		return a.read(ctx, node, kindConfigMap, attrs), true
	case pvcsResource:
		if attrs.GetSubresource() == "status" {
			return a.updateStatus(ctx, node, kindPVC, attrs), true
		}
		return a.get(ctx, node, kindPVC, attrs), true
	case pvsResource:
		return a.get(ctx, node, kindPV, attrs), true
	case resourceClaimsResource:
		return a.get(ctx, node, kindResourceClaim, attrs), true
	case volumeAttachmentsResource:
		return a.get(ctx, node, kindVolumeAttachment, attrs), true
	case serviceAccountsResource:
		return a.serviceAccount(ctx, node, attrs), true
	case leasesResource:
		return lease(node, attrs), true
	case csiNodesResource:
		return csiNode(node, attrs), true
	case resourceSlicesResource:
		return a.resourceSlice(ctx, node, attrs), true
	case podCertificateRequestsResource:
		return a.podCertificateRequest(ctx, node, attrs), true
	case nodesResource:
		return nodeObject(node, attrs), true
	case podsResource:
		return a.pod(ctx, node, attrs), true
	}
	return decision{}, false
}

// read allows get, list and watch of one namespaced object related to the node.
func (a *Authorizer) read(ctx context.Context, node string, k kind, attrs authorizer.Attributes) decision {
	switch attrs.GetVerb() {
	case "get", "list", "watch":
	default:
		return refuse("can only read resources of this type")
	}
	if attrs.GetSubresource() != "" {
		return refuse("cannot read subresource")
	}
	if attrs.GetNamespace() == "" {
		return refuse("can only read namespaced object of this type")
	}
	return a.related(ctx, node, k, attrs)
}

// get allows get of one object related to the node.
func (a *Authorizer) get(ctx context.Context, node string, k kind, attrs authorizer.Attributes) decision {
	if attrs.GetVerb() != "get" {
		return refuse("can only get individual resources of this type")
	}
	if attrs.GetSubresource() != "" {
		return refuse("cannot get subresource")
	}
	return a.related(ctx, node, k, attrs)
}

// updateStatus allows update and patch of the status of one object related to the node.
func (a *Authorizer) updateStatus(ctx context.Context, node string, k kind, attrs authorizer.Attributes) decision {
	switch attrs.GetVerb() {
	case "update", "patch":
	default:
		return refuse("can only get/update/patch this type")
	}
	if attrs.GetSubresource() != "status" {
		return refuse("can only update status subresource")
	}
	return a.related(ctx, node, k, attrs)
}

// related allows the request if the object it names is related to the node.
func (a *Authorizer) related(ctx context.Context, node string, k kind, attrs authorizer.Attributes) decision {
	if attrs.GetName() == "" {
		return refuse("No Object name found")
	}
	ok, err := a.reaches(ctx, node, k, attrs.GetNamespace(), attrs.GetName())
	if ok {
		return allowed
	}
	d := refuse("no relationship found between node '%s' and this object", node)
	d.err = err
	return d
}

func (a *Authorizer) serviceAccount(ctx context.Context, node string, attrs authorizer.Attributes) decision {
	// Kubelets read the service accounts of their pods for credential providers
	// (KubeletServiceAccountTokenForCredentialProviders, on by default upstream).
	if attrs.GetVerb() == "get" && attrs.GetSubresource() == "" {
		return a.read(ctx, node, kindServiceAccount, attrs)
	}
	if attrs.GetVerb() != "create" || attrs.GetName() == "" {
		return refuse("can only create tokens for individual service accounts")
	}
	if attrs.GetSubresource() != "token" {
		return refuse("can only create token subresource of serviceaccount")
	}
	return a.related(ctx, node, kindServiceAccount, attrs)
}

// lease allows a node its own Lease in kube-node-lease. The name of a Lease being created
// isn't known here: NodeRestriction checks it.
func lease(node string, attrs authorizer.Attributes) decision {
	verb := attrs.GetVerb()
	switch verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return refuse("can only get, create, update, patch, or delete a node lease")
	}
	if attrs.GetNamespace() != corev1.NamespaceNodeLease {
		return refuse("can only access leases in the %q system namespace", corev1.NamespaceNodeLease)
	}
	if verb != "create" && attrs.GetName() != node {
		return refuse("can only access node lease with the same name as the requesting node")
	}
	return allowed
}

// csiNode allows a node its own CSINode (the name on create is NodeRestriction's to check).
// Its status subresource needs CSIVolumeHealth, off by default upstream and absent here.
func csiNode(node string, attrs authorizer.Attributes) decision {
	verb := attrs.GetVerb()
	switch attrs.GetSubresource() {
	case "":
		switch verb {
		case "get", "create", "update", "patch", "delete":
		default:
			return refuse("can only get, create, update, patch, or delete a CSINode")
		}
	case "status":
		return refuse("CSINode status access requires CSIVolumeHealth feature")
	default:
		return refuse("cannot authorize CSINode subresources")
	}
	if verb != "create" && attrs.GetName() != node {
		return refuse("can only access CSINode with the same name as the requesting node")
	}
	return allowed
}

// selects tells whether the request's field selector pins field to value.
func selects(attrs authorizer.Attributes, field, value string) bool {
	reqs, _ := attrs.GetFieldSelector()
	for _, r := range reqs {
		if r.Field == field && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) && r.Value == value {
			return true
		}
	}
	return false
}

func (a *Authorizer) resourceSlice(ctx context.Context, node string, attrs authorizer.Attributes) decision {
	if attrs.GetSubresource() != "" {
		return refuse("cannot authorize ResourceSlice subresources")
	}
	switch attrs.GetVerb() {
	case "create":
		// NodeRestriction checks spec.nodeName.
		return allowed
	case "get", "update", "patch", "delete":
		return a.related(ctx, node, kindResourceSlice, attrs)
	case "watch", "list", "deletecollection":
		if selects(attrs, resourcev1.ResourceSliceSelectorNodeName, node) {
			return allowed
		}
		return refuse("can only list/watch/deletecollection resourceslices with nodeName field selector")
	}
	return refuse("only the following verbs are allowed for a ResourceSlice: get, watch, list, create, update, patch, delete, deletecollection")
}

func (a *Authorizer) podCertificateRequest(ctx context.Context, node string, attrs authorizer.Attributes) decision {
	if attrs.GetSubresource() != "" {
		return refuse("nodes may not access the status subresource of PodCertificateRequests")
	}
	switch attrs.GetVerb() {
	case "create":
		// NodeRestriction checks the node, pod and service account.
		return allowed
	case "get":
		return a.related(ctx, node, kindPodCertificateRequest, attrs)
	case "list", "watch":
		if selects(attrs, "spec.nodeName", node) {
			return allowed
		}
		return refuse("can only list/watch podcertificaterequests with nodeName field selector")
	}
	return refuse("nodes may not %s podcertificaterequests", attrs.GetVerb())
}

// nodeObject lets a node read its own Node (before it exists, too) and write Nodes and their
// status; NodeRestriction limits the writes to its own. Nodes never delete Nodes.
func nodeObject(node string, attrs authorizer.Attributes) decision {
	verb := attrs.GetVerb()
	switch attrs.GetSubresource() {
	case "":
		switch verb {
		case "create", "update", "patch":
			return allowed
		case "get", "list", "watch":
			switch attrs.GetName() {
			case node:
				return allowed
			case "":
				return refuse("node '%s' cannot read all nodes, only its own Node object", node)
			default:
				return refuse("node '%s' cannot read '%s', only its own Node object", node, attrs.GetName())
			}
		}
	case "status":
		if verb == "update" || verb == "patch" {
			return allowed
		}
	}
	return refuse("")
}

// pod lets a node read the pods bound to it, create and delete (mirror) pods, write pod
// status and evict pods; NodeRestriction limits the writes to its own pods.
func (a *Authorizer) pod(ctx context.Context, node string, attrs authorizer.Attributes) decision {
	verb := attrs.GetVerb()
	switch attrs.GetSubresource() {
	case "":
		switch verb {
		case "get":
			return a.get(ctx, node, kindPod, attrs)
		case "list", "watch":
			if selects(attrs, "spec.nodeName", node) {
				return allowed
			}
			if attrs.GetName() != "" {
				return a.related(ctx, node, kindPod, attrs)
			}
			return refuse("can only list/watch pods with spec.nodeName field selector")
		case "create", "delete":
			return allowed
		}
	case "status":
		if verb == "update" || verb == "patch" {
			return allowed
		}
	case "eviction":
		if verb == "create" {
			return allowed
		}
	}
	return refuse("")
}

// reaches tells whether the object k namespace/name is related to node: a pod bound to it,
// or an object such a pod (other than a mirror pod) refers to, directly or, for volumes and
// their secrets, through its claims. An error is returned only when no relationship was
// found and a read failed.
//
// The pods come from the source's informer, which can lag a binding by the time it takes to
// work through its queue, while the node's own watch (or a read) may already show the pod:
// on a miss, a LiveSource is asked for the node's pods as they are now, so the node is not
// refused for the informer's lag. Only misses pay for that read.
func (a *Authorizer) reaches(ctx context.Context, node string, k kind, namespace, name string) (bool, error) {
	switch k {
	case kindVolumeAttachment, kindResourceSlice, kindPodCertificateRequest:
		// No graph of these is kept: a node reads its own by listing with its
		// spec.nodeName (skiff's agent does, as the kubelet's informers do), not by name.
		return false, nil
	}
	pods, err := a.src.PodsOnNode(node)
	if err != nil {
		return false, err
	}
	ok, err := a.podsReach(pods, k, namespace, name)
	live, isLive := a.src.(LiveSource)
	if ok || !isLive {
		return ok, err
	}
	pods, liveErr := live.LivePodsOnNode(ctx, node)
	if liveErr != nil {
		liveLookups.WithLabelValues("error").Inc()
		return false, errors.Join(err, liveErr)
	}
	ok, err = a.podsReach(pods, k, namespace, name)
	if ok {
		liveLookups.WithLabelValues("related").Inc()
	} else {
		liveLookups.WithLabelValues("unrelated").Inc()
	}
	return ok, err
}

// podsReach tells whether one of pods (a node's) relates the node to k namespace/name.
func (a *Authorizer) podsReach(pods []*corev1.Pod, k kind, namespace, name string) (bool, error) {
	pvs, _ := a.src.(PersistentVolumeSource)
	var errs []error
	for _, pod := range pods {
		if k == kindPod {
			if pod.Namespace == namespace && pod.Name == name {
				return true, nil
			}
			continue
		}
		if IsMirrorPod(pod) {
			continue
		}
		ok, err := a.podReaches(pod, k, namespace, name, pvs)
		if ok {
			return true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return false, errors.Join(errs...)
}

func (a *Authorizer) podReaches(pod *corev1.Pod, k kind, namespace, name string, pvs PersistentVolumeSource) (bool, error) {
	local := pod.Namespace == namespace
	is := func(n string) bool { return n == name }
	switch k {
	case kindSecret:
		if local && !VisitPodSecrets(pod, func(n string) bool { return !is(n) }) {
			return true, nil
		}
		if pvs == nil {
			return false, nil
		}
		return a.viaClaims(pod, func(pvc *corev1.PersistentVolumeClaim) (bool, error) {
			pv, err := pvs.PersistentVolume(pvc.Spec.VolumeName)
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != pvc.Namespace || ref.Name != pvc.Name {
				return false, nil
			}
			return !visitPVSecrets(pv, func(ns, n string) bool { return ns != namespace || n != name }), nil
		})
	case kindConfigMap:
		return local && !VisitPodConfigMaps(pod, func(n string) bool { return !is(n) }), nil
	case kindServiceAccount:
		return local && pod.Spec.ServiceAccountName == name, nil
	case kindPVC:
		return local && slices.Contains(PodClaimNames(pod), name), nil
	case kindResourceClaim:
		return local && slices.Contains(podResourceClaimNames(pod), name), nil
	case kindPV:
		return a.viaClaims(pod, func(pvc *corev1.PersistentVolumeClaim) (bool, error) {
			return pvc.Spec.VolumeName == name, nil
		})
	}
	return false, nil
}

// viaClaims tells whether f holds for one of the bound claims pod uses.
func (a *Authorizer) viaClaims(pod *corev1.Pod, f func(*corev1.PersistentVolumeClaim) (bool, error)) (bool, error) {
	var errs []error
	for _, claim := range PodClaimNames(pod) {
		pvc, err := a.src.PersistentVolumeClaim(pod.Namespace, claim)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err == nil && pvc.Spec.VolumeName == "" {
			continue
		}
		var ok bool
		if err == nil {
			ok, err = f(pvc)
		}
		if ok {
			return true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return false, errors.Join(errs...)
}

// RulesFor implements authorizer.RuleResolver: a node's permissions depend on its pods, so
// they are not enumerated.
func (a *Authorizer) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	if _, isNode := NodeIdentity(u); isNode {
		return nil, nil, true, fmt.Errorf("node authorizer does not support user rule resolution")
	}
	return nil, nil, false, nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer; the decisions are unconditional.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer; there are no conditions to evaluate.
func (a *Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}
