package persistentvolume

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name; its service account is upstream's.
const Name = "persistent-volume-binder"

// Keys in the queue say which kind they name.
const (
	claimPrefix  = "claim:"
	volumePrefix = "volume:"
)

// resync re-examines every claim and volume, as upstream's binder does every 15 s, so a
// missed event (a node's root annotation arriving late) is not forever.
const resync = 15 * time.Second

// Controller binds claims and volumes and provisions local-path volumes.
type Controller struct {
	client   kubernetes.Interface
	claims   corelisters.PersistentVolumeClaimLister
	volumes  corelisters.PersistentVolumeLister
	classes  storagelisters.StorageClassLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	recorder record.EventRecorder
	loop     *loop.Loop
	log      *slog.Logger
}

// New wires the controller to claim, volume, StorageClass and node informers.
func New(client kubernetes.Interface, claims coreinformers.PersistentVolumeClaimInformer, volumes coreinformers.PersistentVolumeInformer,
	classes storageinformers.StorageClassInformer, nodes coreinformers.NodeInformer, recorder record.EventRecorder, log *slog.Logger) *Controller {
	c := &Controller{client: client, claims: claims.Lister(), volumes: volumes.Lister(), classes: classes.Lister(), nodes: nodes.Lister(),
		synced:   []cache.InformerSynced{claims.Informer().HasSynced, volumes.Informer().HasSynced, classes.Informer().HasSynced, nodes.Informer().HasSynced},
		recorder: recorder, log: log.With("controller", Name)}
	c.loop = loop.New(Name, c.sync, log)
	keyed := func(prefix string) cache.ResourceEventHandler {
		add := func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.loop.Add(prefix + key)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }, DeleteFunc: add}
	}
	_, _ = claims.Informer().AddEventHandler(keyed(claimPrefix))
	_, _ = volumes.Informer().AddEventHandler(keyed(volumePrefix))
	// A volume's events concern its claim too (binding completes on the claim's side).
	_, _ = volumes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.volumeClaimChanged,
		UpdateFunc: func(_, obj any) { c.volumeClaimChanged(obj) },
		DeleteFunc: c.volumeClaimChanged,
	})
	// A claim's events concern its volume (released when the claim goes).
	_, _ = claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { c.claimVolumeChanged(obj) },
		DeleteFunc: c.claimVolumeChanged,
	})
	// A node announcing its local-path root may unblock its claims.
	_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(old, obj any) {
		if old.(*corev1.Node).Annotations[AnnLocalPathRoot] != obj.(*corev1.Node).Annotations[AnnLocalPathRoot] {
			c.enqueueAll()
		}
	}})
	return c
}

func (c *Controller) volumeClaimChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
		c.loop.Add(claimPrefix + pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
	}
}

func (c *Controller) claimVolumeChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && pvc.Spec.VolumeName != "" {
		c.loop.Add(volumePrefix + pvc.Spec.VolumeName)
	}
}

func (c *Controller) enqueueAll() {
	claims, _ := c.claims.List(labels.Everything())
	for _, pvc := range claims {
		c.loop.Add(claimPrefix + pvc.Namespace + "/" + pvc.Name)
	}
	volumes, _ := c.volumes.List(labels.Everything())
	for _, pv := range volumes {
		c.loop.Add(volumePrefix + pv.Name)
	}
}

// Run syncs until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	loop.Resync(ctx, resync, c.enqueueAll)
	c.loop.Run(ctx, 2)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	switch {
	case strings.HasPrefix(key, claimPrefix):
		ns, name, err := cache.SplitMetaNamespaceKey(strings.TrimPrefix(key, claimPrefix))
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
		return c.syncClaim(ctx, pvc)
	case strings.HasPrefix(key, volumePrefix):
		pv, err := c.volumes.Get(strings.TrimPrefix(key, volumePrefix))
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return c.syncVolume(ctx, pv)
	}
	return nil
}

// syncClaim binds an unbound claim, or provisions for it, and keeps a bound claim's status.
func (c *Controller) syncClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if pvc.DeletionTimestamp != nil {
		return nil
	}
	if pvc.Spec.VolumeName != "" {
		pv, err := c.volumes.Get(pvc.Spec.VolumeName)
		if apierrors.IsNotFound(err) {
			if pvc.Status.Phase == corev1.ClaimBound {
				c.recorder.Event(pvc, corev1.EventTypeWarning, "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
				return c.claimStatus(ctx, pvc, corev1.ClaimLost, nil)
			}
			return nil // a volume that is named in advance and may still come
		}
		if err != nil {
			return err
		}
		if pv.Spec.ClaimRef == nil {
			return c.bind(ctx, pvc, pv)
		}
		if !claimOf(pv.Spec.ClaimRef, pvc) {
			c.recorder.Eventf(pvc, corev1.EventTypeWarning, "FailedBinding", "volume %q already bound to a different claim.", pv.Name)
			return c.claimStatus(ctx, pvc, corev1.ClaimPending, nil)
		}
		return c.bind(ctx, pvc, pv)
	}

	volumes, err := c.volumes.List(labels.Everything())
	if err != nil {
		return err
	}
	className := claimClass(pvc)
	var class *storagev1.StorageClass
	if className != "" {
		if class, err = c.classes.Get(className); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	waitForConsumer := class != nil && class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	if pv := Match(pvc, volumes); pv != nil && (!waitForConsumer || pv.Spec.ClaimRef != nil) {
		return c.bind(ctx, pvc, pv)
	}
	if err := c.claimStatus(ctx, pvc, corev1.ClaimPending, nil); err != nil {
		return err
	}
	switch {
	case class == nil && className == "":
		c.recorder.Event(pvc, corev1.EventTypeNormal, "FailedBinding", "no persistent volumes available for this claim and no storage class is set")
		return nil
	case class == nil:
		c.recorder.Eventf(pvc, corev1.EventTypeWarning, "ProvisioningFailed", "storageclass.storage.k8s.io %q not found", className)
		return nil
	}
	if err := c.annotateProvisioner(ctx, pvc, class.Provisioner); err != nil {
		return err
	}
	if class.Provisioner != LocalPathProvisioner {
		c.recorder.Eventf(pvc, corev1.EventTypeNormal, "ExternalProvisioning",
			"Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.", class.Provisioner)
		return nil
	}
	node := pvc.Annotations[AnnSelectedNode]
	if !waitForConsumer {
		c.recorder.Event(pvc, corev1.EventTypeWarning, "ProvisioningFailed", "the local-path provisioner needs volumeBindingMode WaitForFirstConsumer: a local volume lives on the node of its first pod")
		return nil
	}
	if node == "" {
		c.recorder.Event(pvc, corev1.EventTypeNormal, "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
		return nil
	}
	return c.provision(ctx, pvc, class, node)
}

// annotateProvisioner records which provisioner a claim waits for, as upstream does, so
// external provisioners find their claims.
func (c *Controller) annotateProvisioner(ctx context.Context, pvc *corev1.PersistentVolumeClaim, provisioner string) error {
	if pvc.Annotations[AnnStorageProvisioner] == provisioner && pvc.Annotations[AnnBetaProvisioner] == provisioner {
		return nil
	}
	cp := pvc.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[AnnStorageProvisioner], cp.Annotations[AnnBetaProvisioner] = provisioner, provisioner
	_, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
	return err
}

// provision creates the local-path volume of pvc on node; binding follows on its event.
func (c *Controller) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, node string) error {
	n, err := c.nodes.Get(node)
	if apierrors.IsNotFound(err) {
		c.recorder.Eventf(pvc, corev1.EventTypeWarning, "ProvisioningFailed", "selected node %q does not exist", node)
		return nil
	}
	if err != nil {
		return err
	}
	root := n.Annotations[AnnLocalPathRoot]
	if root == "" {
		c.recorder.Eventf(pvc, corev1.EventTypeWarning, "ProvisioningFailed", "node %q does not announce a local-path root (annotation %s); is its agent running?", node, AnnLocalPathRoot)
		return nil
	}
	pv := LocalVolume(pvc, class, node, root)
	if _, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		c.recorder.Eventf(pvc, corev1.EventTypeWarning, "ProvisioningFailed", "failed to provision volume with StorageClass %q: %v", class.Name, err)
		return err
	}
	c.recorder.Eventf(pvc, corev1.EventTypeNormal, "ProvisioningSucceeded", "Successfully provisioned volume %s", pv.Name)
	return nil
}

// bind completes a binding in upstream's order: the volume's claimRef, the volume's phase,
// the claim's volumeName, the claim's phase. Each step is skipped when already done, so a
// crash between them resumes where it stopped.
func (c *Controller) bind(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	if !claimOf(pv.Spec.ClaimRef, pvc) || pv.Spec.ClaimRef.UID == "" {
		cp := pv.DeepCopy()
		cp.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace,
			Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
		setAnnotation(&cp.ObjectMeta, AnnBoundByController, "yes")
		updated, err := c.client.CoreV1().PersistentVolumes().Update(ctx, cp, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		pv = updated
	}
	if pv.Status.Phase != corev1.VolumeBound {
		cp := pv.DeepCopy()
		cp.Status.Phase, cp.Status.Message, cp.Status.Reason = corev1.VolumeBound, "", ""
		now := metav1.Now()
		cp.Status.LastPhaseTransitionTime = &now
		updated, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		pv = updated
	}
	if pvc.Spec.VolumeName != pv.Name || pvc.Annotations[AnnBindCompleted] != "yes" {
		cp := pvc.DeepCopy()
		if cp.Spec.VolumeName == "" {
			setAnnotation(&cp.ObjectMeta, AnnBoundByController, "yes")
		}
		cp.Spec.VolumeName = pv.Name
		setAnnotation(&cp.ObjectMeta, AnnBindCompleted, "yes")
		updated, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		pvc = updated
	}
	return c.claimStatus(ctx, pvc, corev1.ClaimBound, pv)
}

// claimStatus writes a claim's phase, and for a bound claim its volume's size and modes.
func (c *Controller) claimStatus(ctx context.Context, pvc *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase, pv *corev1.PersistentVolume) error {
	want := pvc.Status.DeepCopy()
	want.Phase = phase
	if pv != nil {
		want.AccessModes = pv.Spec.AccessModes
		want.Capacity = maps.Clone(pv.Spec.Capacity)
	}
	if apiequality.Semantic.DeepEqual(*want, pvc.Status) {
		return nil
	}
	cp := pvc.DeepCopy()
	cp.Status = *want
	_, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	return err
}

// syncVolume keeps a volume's phase and reclaims it once its claim is gone. A volume being
// deleted still has its phase kept: pv-protection takes its finalizer off only once it is no
// longer Bound, and a volume deleted right after its claim, before this controller saw the
// claim go, would otherwise stay Bound and undeletable. It is not reclaimed: it is going.
func (c *Controller) syncVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	var claim *corev1.PersistentVolumeClaim
	if ref := pv.Spec.ClaimRef; ref != nil {
		got, err := c.claims.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if got == nil || (ref.UID != "" && got.UID != ref.UID) {
			// The cache may lag a claim created a moment ago: never release on its word.
			live, err := c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			switch {
			case err == nil:
				got = live
			case apierrors.IsNotFound(err):
				got = nil
			default:
				return err
			}
		}
		if got != nil && (ref.UID == "" || got.UID == ref.UID) {
			claim = got
		}
	}
	phase := VolumePhase(pv, claim)
	if phase == corev1.VolumeReleased && pv.DeletionTimestamp == nil {
		return c.reclaim(ctx, pv)
	}
	return c.volumeStatus(ctx, pv, phase, "", "")
}

// reclaim carries out a released volume's reclaim policy.
func (c *Controller) reclaim(ctx context.Context, pv *corev1.PersistentVolume) error {
	if err := c.volumeStatus(ctx, pv, corev1.VolumeReleased, "", ""); err != nil {
		return err
	}
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRetain:
		return nil
	case corev1.PersistentVolumeReclaimDelete:
		by := pv.Annotations[AnnProvisionedBy]
		switch {
		case by == LocalPathProvisioner:
			err := c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			c.recorder.Eventf(pv, corev1.EventTypeNormal, "VolumeDelete", "deleted released volume %s; its node's agent removes the data", pv.Name)
			return nil
		case by != "":
			return nil // the external provisioner that made it deletes it
		}
		c.recorder.Event(pv, corev1.EventTypeWarning, "VolumeFailedDelete", "no deleter for a volume not provisioned dynamically")
		return c.volumeStatus(ctx, pv, corev1.VolumeFailed, "", "error getting deleter volume plugin for volume \""+pv.Name+"\": no deletable volume plugin matched")
	default:
		c.recorder.Event(pv, corev1.EventTypeWarning, "VolumeFailedRecycle", "Recycle is not supported by skiff")
		return c.volumeStatus(ctx, pv, corev1.VolumeFailed, "", "Recycle is not supported by skiff")
	}
}

func (c *Controller) volumeStatus(ctx context.Context, pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, reason, message string) error {
	if pv.Status.Phase == phase && pv.Status.Reason == reason && pv.Status.Message == message {
		return nil
	}
	cp := pv.DeepCopy()
	if cp.Status.Phase != phase {
		now := metav1.Now()
		cp.Status.LastPhaseTransitionTime = &now
	}
	cp.Status.Phase, cp.Status.Reason, cp.Status.Message = phase, reason, message
	_, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	return err
}

func setAnnotation(m *metav1.ObjectMeta, k, v string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[k] = v
}
