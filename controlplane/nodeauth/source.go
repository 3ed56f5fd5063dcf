package nodeauth

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Source is what the Authorizer reads: the pods bound to a node and the claims they use.
type Source interface {
	// PodsOnNode returns the pods whose spec.nodeName is node.
	PodsOnNode(node string) ([]*corev1.Pod, error)
	// PersistentVolumeClaim returns a claim, or a NotFound API error (also when claims are
	// not served). A claim's spec.volumeName names the PersistentVolume a node may read.
	PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error)
}

// PersistentVolumeSource is implemented by a Source that can also read PersistentVolumes;
// with it, a node may read the Secrets the volumes of its pods mount with (CSI
// nodePublish/nodeStage/nodeExpand secrets and the like).
type PersistentVolumeSource interface {
	// PersistentVolume returns a volume or a NotFound API error.
	PersistentVolume(name string) (*corev1.PersistentVolume, error)
}

// LiveSource is implemented by a Source whose pods may lag the cluster (an informer): on a
// miss, the Authorizer asks it for the node's pods as they are now before it refuses, so a
// node is never refused a pod its own watch has already delivered bound to it.
type LiveSource interface {
	// LivePodsOnNode returns the pods whose spec.nodeName is node, read consistently (at
	// least as new as any write acknowledged before the call).
	LivePodsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error)
}

// PodNodeNameIndex is the name of the pod informer's index on spec.nodeName.
const PodNodeNameIndex = "spec.nodeName"

// IndexPodsByNode is the PodNodeNameIndex indexer: it files a pod under its spec.nodeName,
// unbound pods under nothing.
func IndexPodsByNode(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}

// InformerSource is a Source (and PersistentVolumeSource and LiveSource) over informers.
type InformerSource struct {
	pods cache.Indexer
	pvcs corelisters.PersistentVolumeClaimLister
	// PVs, when set, reads PersistentVolumes; without it volumes' own secrets stay closed.
	PVs corelisters.PersistentVolumeLister
	// Live, when set, lists a node's pods consistently (the informer's own client with no
	// resourceVersion, see ListPodsOnNode); without it a miss is final.
	Live func(ctx context.Context, node string) ([]*corev1.Pod, error)
}

var (
	_ Source                 = (*InformerSource)(nil)
	_ PersistentVolumeSource = (*InformerSource)(nil)
	_ LiveSource             = (*InformerSource)(nil)
)

// ListPodsOnNode lists a node's pods through client as a consistent read (no
// resourceVersion: the API server answers at least as new as etcd is now), for
// InformerSource.Live.
func ListPodsOnNode(client kubernetes.Interface) func(ctx context.Context, node string) ([]*corev1.Pod, error) {
	return func(ctx context.Context, node string) ([]*corev1.Pod, error) {
		list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		if err != nil {
			return nil, err
		}
		pods := make([]*corev1.Pod, len(list.Items))
		for i := range list.Items {
			pods[i] = &list.Items[i]
		}
		return pods, nil
	}
}

// LivePodsOnNode implements LiveSource.
func (s *InformerSource) LivePodsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error) {
	if s.Live == nil {
		return nil, nil
	}
	return s.Live(ctx, node)
}

// NewInformerSource reads pods from the pods informer, adding the PodNodeNameIndex index
// unless the informer has one by that name already (an index must be added before the
// informer starts; add it with IndexPodsByNode yourself if this may run later). pvcs may be
// nil when claims aren't served.
func NewInformerSource(pods cache.SharedIndexInformer, pvcs corelisters.PersistentVolumeClaimLister) *InformerSource {
	if _, ok := pods.GetIndexer().GetIndexers()[PodNodeNameIndex]; !ok {
		// On failure (a stopped informer) PodsOnNode falls back to scanning all pods.
		_ = pods.AddIndexers(cache.Indexers{PodNodeNameIndex: IndexPodsByNode})
	}
	return &InformerSource{pods: pods.GetIndexer(), pvcs: pvcs}
}

// PodsOnNode implements Source.
func (s *InformerSource) PodsOnNode(node string) ([]*corev1.Pod, error) {
	var objs []any
	if _, ok := s.pods.GetIndexers()[PodNodeNameIndex]; ok {
		var err error
		if objs, err = s.pods.ByIndex(PodNodeNameIndex, node); err != nil {
			return nil, err
		}
	} else {
		objs = s.pods.List()
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName == node {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// PersistentVolumeClaim implements Source.
func (s *InformerSource) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	if s.pvcs == nil {
		return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), name)
	}
	return s.pvcs.PersistentVolumeClaims(namespace).Get(name)
}

// PersistentVolume implements PersistentVolumeSource.
func (s *InformerSource) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	if s.PVs == nil {
		return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumes"), name)
	}
	return s.PVs.Get(name)
}
