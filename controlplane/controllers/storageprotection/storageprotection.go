// Package storageprotection is upstream's pvc-protection and pv-protection controllers, the
// other half of the StorageObjectInUseProtection admission plugin: that plugin puts a
// finalizer on every new PersistentVolumeClaim (kubernetes.io/pvc-protection) and
// PersistentVolume (kubernetes.io/pv-protection), and these controllers take it off a deleted
// object once nothing uses it — a claim when no pod that has not terminated mounts it, a
// volume when it is no longer bound. Until then `kubectl delete pvc` leaves the claim
// Terminating, and a pod's data is not pulled from under it.
package storageprotection

import (
	"context"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/loop"
)

// The controllers' names (and their service accounts').
const (
	PVCName = "pvc-protection-controller"
	PVName  = "pv-protection-controller"
)

// Upstream's finalizers.
const (
	PVCFinalizer = "kubernetes.io/pvc-protection"
	PVFinalizer  = "kubernetes.io/pv-protection"
)

// ClaimsUsedBy returns the names of the claims a pod mounts: its persistentVolumeClaim
// volumes and its generic ephemeral volumes (whose claims are named <pod>-<volume>).
func ClaimsUsedBy(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, p.Name+"-"+v.Name)
		}
	}
	return out
}

// PodUsesClaim says whether p keeps claim in use: it mounts it and has not terminated.
func PodUsesClaim(p *corev1.Pod, claim string) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	return slices.Contains(ClaimsUsedBy(p), claim)
}

// ClaimReleasable says whether a deleted claim's finalizer may go: no pod in pods uses it.
func ClaimReleasable(claim *corev1.PersistentVolumeClaim, pods []*corev1.Pod) bool {
	for _, p := range pods {
		if p.Namespace == claim.Namespace && PodUsesClaim(p, claim.Name) {
			return false
		}
	}
	return true
}

// VolumeReleasable says whether a deleted volume's finalizer may go: it is not bound.
func VolumeReleasable(pv *corev1.PersistentVolume) bool {
	return pv.Status.Phase != corev1.VolumeBound
}

// withoutFinalizer returns fs without f and whether it was there.
func withoutFinalizer(fs []string, f string) ([]string, bool) {
	i := slices.Index(fs, f)
	if i < 0 {
		return fs, false
	}
	return slices.Delete(slices.Clone(fs), i, i+1), true
}

// PVCController releases deleted claims.
type PVCController struct {
	client kubernetes.Interface
	claims corelisters.PersistentVolumeClaimLister
	pods   corelisters.PodLister
	synced []cache.InformerSynced
	loop   *loop.Loop
	log    *slog.Logger
}

// NewPVC wires the pvc-protection controller: a claim is looked at when it changes and when
// a pod that used it changes or goes.
func NewPVC(client kubernetes.Interface, claims coreinformers.PersistentVolumeClaimInformer, pods coreinformers.PodInformer, log *slog.Logger) *PVCController {
	c := &PVCController{client: client, claims: claims.Lister(), pods: pods.Lister(),
		synced: []cache.InformerSynced{claims.Informer().HasSynced, pods.Informer().HasSynced}, log: log.With("controller", PVCName)}
	c.loop = loop.New(PVCName, c.sync, log)
	_, _ = claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimEvent,
		UpdateFunc: func(_, cur any) { c.claimEvent(cur) },
	})
	podEvent := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			for _, name := range ClaimsUsedBy(p) {
				c.loop.Add(p.Namespace + "/" + name)
			}
		}
	}
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    podEvent,
		UpdateFunc: func(_, cur any) { podEvent(cur) },
		DeleteFunc: podEvent,
	})
	return c
}

func (c *PVCController) claimEvent(obj any) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && pvc.DeletionTimestamp != nil && slices.Contains(pvc.Finalizers, PVCFinalizer) {
		c.loop.Enqueue(pvc)
	}
}

// Run runs the controller until ctx ends.
func (c *PVCController) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Run(ctx, 2)
}

func (c *PVCController) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pvc.DeletionTimestamp == nil || !slices.Contains(pvc.Finalizers, PVCFinalizer) {
		return nil
	}
	cached, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	if !ClaimReleasable(pvc, cached) {
		return nil // a pod event brings the claim back
	}
	// The cache may not have a pod created a moment ago: only a live list may let the claim go,
	// as upstream.
	live, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pods := make([]*corev1.Pod, len(live.Items))
	for i := range live.Items {
		pods[i] = &live.Items[i]
	}
	if !ClaimReleasable(pvc, pods) {
		return nil
	}
	cp := pvc.DeepCopy()
	cp.Finalizers, _ = withoutFinalizer(cp.Finalizers, PVCFinalizer)
	if _, err := c.client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.log.Info("released claim: no pod uses it", "claim", key)
	return nil
}

// PVController releases deleted volumes.
type PVController struct {
	client  kubernetes.Interface
	volumes corelisters.PersistentVolumeLister
	synced  []cache.InformerSynced
	loop    *loop.Loop
	log     *slog.Logger
}

// NewPV wires the pv-protection controller.
func NewPV(client kubernetes.Interface, volumes coreinformers.PersistentVolumeInformer, log *slog.Logger) *PVController {
	c := &PVController{client: client, volumes: volumes.Lister(), synced: []cache.InformerSynced{volumes.Informer().HasSynced},
		log: log.With("controller", PVName)}
	c.loop = loop.New(PVName, c.sync, log)
	event := func(obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.DeletionTimestamp != nil && slices.Contains(pv.Finalizers, PVFinalizer) {
			c.loop.Enqueue(pv)
		}
	}
	_, _ = volumes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    event,
		UpdateFunc: func(_, cur any) { event(cur) },
	})
	return c
}

// Run runs the controller until ctx ends.
func (c *PVController) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Run(ctx, 2)
}

func (c *PVController) sync(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pv.DeletionTimestamp == nil || !slices.Contains(pv.Finalizers, PVFinalizer) || !VolumeReleasable(pv) {
		return nil // its next status change brings it back
	}
	cp := pv.DeepCopy()
	cp.Finalizers, _ = withoutFinalizer(cp.Finalizers, PVFinalizer)
	if _, err := c.client.CoreV1().PersistentVolumes().Update(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.log.Info("released volume: not bound", "volume", name)
	return nil
}
