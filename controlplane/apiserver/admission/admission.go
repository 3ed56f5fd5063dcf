// Package admission holds skiff's admission plugins, run by the API server after
// authentication and authorization: the mutating ones (ServiceAccount, TaintNodesByCondition,
// DefaultTolerationSeconds, Priority, StorageObjectInUseProtection, ...) fill in objects
// before validation, and the validating ones reject what may not be written:
// NamespaceLifecycle writes into namespaces that are missing or being deleted, Signers acts
// in a signer's name without its verb (CertificateApproval, CertificateSigning,
// CertificateSubjectRestriction, ClusterTrustBundleAttest). They behave as upstream's plugins
// of the same names.
package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/controllers/storageprotection"
)

// Chain returns skiff's admission chain in upstream's order; namespaces reads namespaces
// for NamespaceLifecycle, nodes is NodeRestriction, classes reads the priority, runtime and
// storage classes; last come after them all (ResourceQuota, which must see the final object).
func Chain(namespaces NamespaceGetter, nodes *NodeRestriction, accounts ServiceAccount, classes Classes, last ...admission.Interface) admission.Interface {
	return admission.NewChainHandler(append([]admission.Interface{
		&NamespaceLifecycle{Namespaces: namespaces},
		nodes,
		accounts,
		TaintNodesByCondition{},
		DefaultTolerationSeconds{Seconds: 300},
		Priority{Classes: classes},
		RuntimeClass{Classes: classes},
		DefaultStorageClass{Classes: classes},
		StorageObjectInUseProtection{},
	}, last...)...)
}

func isPodCreate(a admission.Attributes) (*corev1.Pod, bool) {
	if a.GetOperation() != admission.Create || a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" {
		return nil, false
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	return pod, ok
}

// ServiceAccount sets a pod's service account to "default", gives a pod that names no image
// pull secrets its account's, and mounts a projected volume with its token, the cluster CA
// (kube-root-ca.crt) and the namespace — unless the pod, or else its service account, sets
// automountServiceAccountToken: false.
type ServiceAccount struct {
	// Accounts, if set, reads the pod's service account for its automount setting; a pod
	// whose account cannot be read yet is mounted (the account's own default).
	Accounts func(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
}

// TokenPath is where the projected service-account volume is mounted.
const TokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// Handles implements admission.Interface.
func (ServiceAccount) Handles(op admission.Operation) bool { return op == admission.Create }

// automount says whether the pod gets the token volume: its own setting, else its account's
// (sa, nil when it cannot be read).
func automount(pod *corev1.Pod, sa *corev1.ServiceAccount) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa == nil || sa.AutomountServiceAccountToken == nil {
		return true
	}
	return *sa.AutomountServiceAccountToken
}

// Admit implements admission.MutationInterface.
func (s ServiceAccount) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, ok := isPodCreate(a)
	if !ok {
		return nil
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	var sa *corev1.ServiceAccount
	if s.Accounts != nil {
		if got, err := s.Accounts(ctx, pod.Namespace, pod.Spec.ServiceAccountName); err == nil {
			sa = got
		}
	}
	// A pod naming no pull secrets pulls with its account's, as upstream's plugin gives them.
	if len(pod.Spec.ImagePullSecrets) == 0 && sa != nil {
		for _, ref := range sa.ImagePullSecrets {
			pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: ref.Name})
		}
	}
	if !automount(pod, sa) {
		return nil
	}
	mounted := func(c *corev1.Container) bool {
		for _, m := range c.VolumeMounts {
			if m.MountPath == TokenPath {
				return true
			}
		}
		return false
	}
	name := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") {
			name = v.Name
		}
	}
	if name == "" {
		name = "kube-api-access-" + rand.String(5)
		pod.Spec.Volumes = append(pod.Spec.Volumes, TokenVolume(name))
	}
	mount := corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: TokenPath}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if !mounted(&cs[i]) {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
			}
		}
	}
	return nil
}

// TokenVolume is upstream's projected kube-api-access volume.
func TokenVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}
}

// DefaultTolerationSeconds lets pods ride out a short node outage: they tolerate the
// not-ready and unreachable NoExecute taints for Seconds unless they say otherwise.
type DefaultTolerationSeconds struct{ Seconds int64 }

// Handles implements admission.Interface.
func (DefaultTolerationSeconds) Handles(op admission.Operation) bool { return op == admission.Create }

// Admit implements admission.MutationInterface.
func (d DefaultTolerationSeconds) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, ok := isPodCreate(a)
	if !ok {
		return nil
	}
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		tolerated := false
		for _, t := range pod.Spec.Tolerations {
			if (t.Key == key || (t.Key == "" && t.Operator == corev1.TolerationOpExists)) &&
				(t.Effect == "" || t.Effect == corev1.TaintEffectNoExecute) {
				tolerated = true
			}
		}
		if !tolerated {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{
				Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
				TolerationSeconds: ptr.To(d.Seconds),
			})
		}
	}
	return nil
}

// NamespaceGetter reads a namespace; it returns a NotFound API error if there is none.
type NamespaceGetter func(ctx context.Context, name string) (*corev1.Namespace, error)

// NamespaceLifecycle rejects content in missing or terminating namespaces and protects the
// built-in namespaces from deletion.
type NamespaceLifecycle struct {
	Namespaces NamespaceGetter
}

// Immortal namespaces can't be deleted.
var Immortal = sets.New(metav1NamespaceDefault, "kube-system", "kube-public")

const metav1NamespaceDefault = "default"

// Handles implements admission.Interface.
func (*NamespaceLifecycle) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Delete
}

// Validate implements admission.ValidationInterface.
func (l *NamespaceLifecycle) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() == corev1.Resource("namespaces") {
		if a.GetOperation() == admission.Delete && a.GetSubresource() == "" && Immortal.Has(a.GetName()) {
			return admission.NewForbidden(a, fmt.Errorf("this namespace may not be deleted"))
		}
		return nil
	}
	if a.GetOperation() != admission.Create || a.GetNamespace() == "" {
		return nil
	}
	// Events and token/binding-style subresources follow upstream: events may still be
	// written into a terminating namespace so its deletion can be reported.
	ns, err := l.Namespaces(ctx, a.GetNamespace())
	if apierrors.IsNotFound(err) {
		return admission.NewForbidden(a, apierrors.NewNotFound(corev1.Resource("namespaces"), a.GetNamespace()))
	}
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if ns.Status.Phase == corev1.NamespaceTerminating && a.GetResource().Resource != "events" && a.GetSubresource() == "" {
		return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(),
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.GetNamespace()))
	}
	return nil
}

// TaintNodesByCondition taints every new Node node.kubernetes.io/not-ready:NoSchedule, as
// upstream's plugin: no pod is scheduled to a node before it has said it is Ready, and the
// node lifecycle controller takes the taint off when it does.
type TaintNodesByCondition struct{}

// Handles implements admission.Interface.
func (TaintNodesByCondition) Handles(op admission.Operation) bool { return op == admission.Create }

// Admit implements admission.MutationInterface.
func (TaintNodesByCondition) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("nodes") || a.GetSubresource() != "" {
		return nil
	}
	node, ok := a.GetObject().(*corev1.Node)
	if !ok {
		return nil
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoSchedule {
			return nil
		}
	}
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	return nil
}

// StorageObjectInUseProtection puts upstream's protection finalizers on every new
// PersistentVolumeClaim and PersistentVolume; the pvc- and pv-protection controllers take them
// off once the claim is used by no pod, the volume bound to no claim.
type StorageObjectInUseProtection struct{}

// Handles implements admission.Interface.
func (StorageObjectInUseProtection) Handles(op admission.Operation) bool {
	return op == admission.Create
}

// Admit implements admission.MutationInterface.
func (StorageObjectInUseProtection) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetSubresource() != "" {
		return nil
	}
	var meta *metav1.ObjectMeta
	var finalizer string
	switch o := a.GetObject().(type) {
	case *corev1.PersistentVolumeClaim:
		meta, finalizer = &o.ObjectMeta, storageprotection.PVCFinalizer
	case *corev1.PersistentVolume:
		meta, finalizer = &o.ObjectMeta, storageprotection.PVFinalizer
	default:
		return nil
	}
	if !slices.Contains(meta.Finalizers, finalizer) {
		meta.Finalizers = append(meta.Finalizers, finalizer)
	}
	return nil
}
