// Package scheduler assigns pods to nodes, as kube-scheduler does: while holding the
// kube-system/kube-scheduler Lease it watches pods and nodes, keeps an incremental snapshot of
// the cluster, asks the decision core (package core) for a node for each pending pod of
// schedulerName default-scheduler, assumes the pod there, binds it through pods/binding and
// records Scheduled or FailedScheduling events. A pod that fits nowhere may preempt pods of
// lower priority (package core decides; this package nominates the pod, marks the victims
// with a DisruptionTarget condition and deletes them). Pods with PersistentVolumeClaims are
// held to their volumes' node affinity, and their WaitForFirstConsumer claims get the chosen
// node's volume.kubernetes.io/selected-node annotation before the pod is bound. Health and
// metrics are served on https://127.0.0.1:10259.
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/controlplane/healthserver"
	"github.com/skiff-sh/skiff/controlplane/leader"
	"github.com/skiff-sh/skiff/controlplane/scheduler/core"
)

// DefaultSchedulerName is the schedulerName this scheduler serves.
const DefaultSchedulerName = corev1.DefaultSchedulerName

// Options configure the scheduler.
type Options struct {
	// SecureAddress serves health and metrics (127.0.0.1:10259).
	SecureAddress string
	// Parallelism bounds concurrent bind calls (64).
	Parallelism int
	// Informers, if set, is the server's factory shared with the controller manager: one
	// cache of each pod and node between them. Nil: a factory of the scheduler's own.
	Informers *sharedinformers.Shared
}

// Run serves health and campaigns for leadership; while leading, schedules.
func Run(ctx context.Context, cfg *rest.Config, o Options, log *slog.Logger) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // the scheduler's writes are bounded by Parallelism, not a client rate limit
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	go func() {
		if err := healthserver.Serve(ctx, o.SecureAddress, nil, log); err != nil {
			log.Error("scheduler health server", "err", err)
		}
	}()
	return leader.Run(ctx, client, leader.Options{Namespace: "kube-system", Name: "kube-scheduler"}, log, func(ctx context.Context) {
		New(client, o, log).Run(ctx)
	})
}

// Scheduler is the scheduling loop and the cluster state it decides on.
type Scheduler struct {
	client   kubernetes.Interface
	opts     Options
	log      *slog.Logger
	queue    *queue
	recorder record.EventRecorder
	events   record.EventBroadcaster

	// Set by Run from its informers.
	pdbs    policylisters.PodDisruptionBudgetLister
	volumes *volumeListers

	mu       sync.Mutex
	snapshot *core.Snapshot
	start    int
	// preempting holds the pods whose victims are being evicted; they are not retried until
	// that is done, so they do not preempt twice (upstream's async preemption does the same).
	preempting map[types.UID]bool
}

// New builds a scheduler; Run starts it.
func New(client kubernetes.Interface, o Options, log *slog.Logger) *Scheduler {
	if o.Parallelism == 0 {
		o.Parallelism = 64
	}
	b := record.NewBroadcaster()
	return &Scheduler{client: client, opts: o, log: log, queue: newQueue(), snapshot: core.NewSnapshot(nil, nil), events: b,
		recorder:   b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: DefaultSchedulerName}),
		preempting: map[types.UID]bool{}}
}

// Run watches pods, nodes, PodDisruptionBudgets and the storage objects and schedules until
// ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	s.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.client.CoreV1().Events("")})
	defer s.events.Shutdown()
	var factory informers.SharedInformerFactory = sharedinformers.NewFactory(s.client)
	if s.opts.Informers != nil {
		scope := s.opts.Informers.Scope()
		defer scope.Release() // this term's handlers go; the caches stay for the next
		factory = scope
	}
	nodes, pods := factory.Core().V1().Nodes().Informer(), factory.Core().V1().Pods().Informer()
	nodesSeen, nodesErr := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.nodeChanged(obj.(*corev1.Node)) },
		UpdateFunc: func(_, obj any) { s.nodeChanged(obj.(*corev1.Node)) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				s.mu.Lock()
				s.snapshot.RemoveNode(n.Name)
				s.mu.Unlock()
			}
		},
	})
	podsSeen, podsErr := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.podChanged(nil, obj.(*corev1.Pod)) },
		UpdateFunc: func(old, obj any) { s.podChanged(old.(*corev1.Pod), obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				s.podDeleted(p)
			}
		},
	})
	pdbs := factory.Policy().V1().PodDisruptionBudgets()
	claims, volumes := factory.Core().V1().PersistentVolumeClaims(), factory.Core().V1().PersistentVolumes()
	classes := factory.Storage().V1().StorageClasses()
	s.pdbs = pdbs.Lister()
	s.volumes = &volumeListers{claims: claims.Lister(), volumes: volumes.Lister(), classes: classes.Lister()}
	// A claim bound, a volume provisioned or a class created may be what a waiting pod needs.
	storageChanged := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.queue.MoveAll() },
		UpdateFunc: func(any, any) { s.queue.MoveAll() },
		DeleteFunc: func(any) { s.queue.MoveAll() },
	}
	if err := errors.Join(nodesErr, podsErr); err != nil {
		s.log.Error("scheduler's informers", "err", err) // stopped: the server is stopping
		return
	}
	// Synced means this run's handlers have seen every node and pod, not only that the
	// informers have: a shared informer synced long ago, and a snapshot short of a node's
	// pods would overcommit it.
	synced := []cache.InformerSynced{nodesSeen.HasSynced, podsSeen.HasSynced, pdbs.Informer().HasSynced}
	for _, inf := range []cache.SharedIndexInformer{claims.Informer(), volumes.Informer(), classes.Informer()} {
		_, _ = inf.AddEventHandler(storageChanged)
		synced = append(synced, inf.HasSynced)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	s.log.Info("scheduler started")
	go func() {
		<-ctx.Done()
		s.queue.Close()
	}()
	// Pods that failed wait for a cluster change; flush them periodically too, in case the
	// change that helps them is one the scheduler does not watch.
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.queue.MoveAll()
			}
		}
	}()
	sem := make(chan struct{}, s.opts.Parallelism)
	var wg sync.WaitGroup
	for {
		pod, ok := s.queue.Pop()
		if !ok {
			break
		}
		s.scheduleOne(ctx, pod, sem, &wg)
	}
	wg.Wait()
	factory.Shutdown()
}

func (s *Scheduler) nodeChanged(n *corev1.Node) {
	s.mu.Lock()
	s.snapshot.SetNode(n)
	s.mu.Unlock()
	s.queue.MoveAll()
}

func responsible(p *corev1.Pod) bool {
	return p.Spec.SchedulerName == DefaultSchedulerName && p.Spec.NodeName == "" && p.DeletionTimestamp == nil &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && len(p.Spec.SchedulingGates) == 0
}

// podChanged follows a pod; old is nil when it was added.
func (s *Scheduler) podChanged(old, p *corev1.Pod) {
	switch {
	case p.Spec.NodeName != "":
		s.queue.Delete(p)
		s.mu.Lock()
		s.snapshot.RemoveNominatedPod(p)
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			s.snapshot.RemovePod(p)
		} else {
			s.snapshot.AddPod(p)
		}
		s.mu.Unlock()
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			s.queue.MoveAll()
		}
	case responsible(p):
		s.queue.Add(p)
		// An update that neither had nor has a nominatedNodeName may predate the status write
		// of a preemption that nominated the pod in memory already: keep that nomination, as
		// upstream's nominator does.
		if old == nil || old.Status.NominatedNodeName != "" || p.Status.NominatedNodeName != "" {
			s.mu.Lock()
			s.snapshot.AddNominatedPod(p) // or forgets the nomination, if it has none
			s.mu.Unlock()
		}
	default:
		s.queue.Delete(p)
		s.mu.Lock()
		s.snapshot.RemoveNominatedPod(p)
		s.mu.Unlock()
	}
}

func (s *Scheduler) podDeleted(p *corev1.Pod) {
	s.queue.Delete(p)
	s.mu.Lock()
	s.snapshot.RemoveNominatedPod(p)
	s.mu.Unlock()
	if p.Spec.NodeName != "" {
		s.mu.Lock()
		s.snapshot.RemovePod(p)
		s.mu.Unlock()
		s.queue.MoveAll() // freed resources may let a waiting pod fit
	}
}

func (s *Scheduler) scheduleOne(ctx context.Context, pod *corev1.Pod, sem chan struct{}, wg *sync.WaitGroup) {
	vols, err := s.volumes.resolve(pod)
	if err != nil {
		s.unschedulable(ctx, pod, err, nil)
		return
	}
	s.mu.Lock()
	if s.preempting[pod.UID] {
		s.mu.Unlock()
		s.queue.Done(pod, true) // retried once its victims are gone
		return
	}
	opts := core.Options{Start: s.start, Volumes: vols.constraint}
	res, err := core.Schedule(s.snapshot, pod, opts)
	var assumed *corev1.Pod
	var preemption *core.PreemptionResult
	if err == nil {
		s.start = res.NextStart
		assumed = pod.DeepCopy()
		assumed.Spec.NodeName = res.Node
		s.snapshot.AddPod(assumed)
		s.snapshot.RemoveNominatedPod(pod)
	} else if fit := (*core.FitError)(nil); errors.As(err, &fit) {
		var pdbs []*policyv1.PodDisruptionBudget
		if s.pdbs != nil {
			pdbs, _ = s.pdbs.List(labels.Everything()) // a cache lister does not fail
		}
		pr, ok := core.Preempt(s.snapshot, pod, pdbs, opts)
		fit.PostFilterMsg = pr.Message
		preemption = &pr
		if ok {
			// Hold the room at once, before the API round trips: the next decisions must not
			// give it away.
			nominated := pod.DeepCopy()
			nominated.Status.NominatedNodeName = pr.Node
			s.snapshot.AddNominatedPod(nominated)
			for _, p := range pr.LowerNominated {
				s.snapshot.RemoveNominatedPod(p)
			}
			s.preempting[pod.UID] = true
		} else if pr.ClearNominatedNode {
			s.snapshot.RemoveNominatedPod(pod)
		}
	}
	s.mu.Unlock()
	if err != nil {
		s.unschedulable(ctx, pod, err, preemption)
		if preemption != nil && preemption.Node != "" {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				s.preempt(ctx, pod, preemption)
			}()
		}
		return
	}
	sem <- struct{}{}
	wg.Add(1)
	go func() {
		defer func() { <-sem; wg.Done() }()
		if err := selectNode(ctx, s.client.CoreV1(), vols.delayed, res.Node); err != nil {
			// Not "deleted or bound meanwhile" even when the claim is gone: retry the pod.
			s.bindFailed(pod, assumed, res.Node, err, true)
			return
		}
		err := s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: res.Node},
		}, metav1.CreateOptions{})
		if err != nil {
			s.bindFailed(pod, assumed, res.Node, err, false)
			return
		}
		s.queue.Done(pod, false)
		s.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, res.Node)
	}()
}

// bindFailed forgets the assumed placement and retries the pod unless the binding said it is
// gone or bound already.
func (s *Scheduler) bindFailed(pod, assumed *corev1.Pod, node string, err error, retry bool) {
	s.mu.Lock()
	s.snapshot.RemovePod(assumed)
	s.mu.Unlock()
	if !retry && (apierrors.IsNotFound(err) || apierrors.IsConflict(err)) {
		s.queue.Done(pod, false) // deleted or bound meanwhile
		return
	}
	s.log.Warn("binding failed", "pod", keyOf(pod), "node", node, "err", err)
	s.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "Binding rejected: %v", err)
	s.queue.Done(pod, true)
	s.queue.MoveAll()
}

// unschedulable records why the pod fits nowhere and parks it until the cluster changes. With
// a preemption outcome it also sets (or clears) the pod's nominatedNodeName, in the same
// status write as the PodScheduled condition, as upstream's failure handler does.
func (s *Scheduler) unschedulable(ctx context.Context, pod *corev1.Pod, err error, preemption *core.PreemptionResult) {
	s.queue.Done(pod, true)
	var fit *core.FitError
	msg := err.Error()
	if !errors.As(err, &fit) {
		msg = fmt.Sprintf("scheduling failed: %v", err)
	}
	s.recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", msg)
	status := map[string]any{}
	switch {
	case preemption == nil:
	case preemption.Node != "" && preemption.Node != pod.Status.NominatedNodeName:
		status["nominatedNodeName"] = preemption.Node
	case preemption.ClearNominatedNode && pod.Status.NominatedNodeName != "":
		status["nominatedNodeName"] = nil
	}
	current := false
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == msg {
			current = true
		}
	}
	if !current {
		status["conditions"] = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: metav1.Now()}}
	}
	if len(status) == 0 {
		return
	}
	if err := s.patchStatus(ctx, pod, status); err != nil && !apierrors.IsNotFound(err) {
		s.log.Debug("pod status", "pod", keyOf(pod), "err", err)
	}
}

// patchStatus applies a strategic merge patch to the pod's status subresource: conditions
// merge by type, so other writers' conditions are left alone, and no resourceVersion is
// needed, so a concurrent status update by the agent does not make the write fail.
func (s *Scheduler) patchStatus(ctx context.Context, pod *corev1.Pod, status map[string]any) error {
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// preempt carries out a preemption decided by core.Preempt, as upstream's executor does: the
// pods of lower priority nominated to the node lose their nomination (the room is the
// preemptor's now), then each victim gets a DisruptionTarget condition, so that controllers
// and users can tell why it goes, and is deleted with its default grace period. The preemptor
// waits in the queue; the deletions wake it.
func (s *Scheduler) preempt(ctx context.Context, preemptor *corev1.Pod, res *core.PreemptionResult) {
	defer func() {
		s.mu.Lock()
		delete(s.preempting, preemptor.UID)
		s.mu.Unlock()
		s.queue.MoveAll()
	}()
	for _, p := range res.LowerNominated {
		if err := s.patchStatus(ctx, p, map[string]any{"nominatedNodeName": nil}); err != nil && !apierrors.IsNotFound(err) {
			s.log.Warn("clearing nominatedNodeName", "pod", keyOf(p), "err", err)
		}
	}
	schedulerName := preemptor.Spec.SchedulerName
	if schedulerName == "" {
		schedulerName = DefaultSchedulerName
	}
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler,
		Message: schedulerName + ": preempting to accommodate a higher priority pod"}
	for _, victim := range res.Victims {
		if victim.DeletionTimestamp != nil {
			continue // already on its way out
		}
		if !hasCondition(victim, cond) {
			c := cond
			c.LastTransitionTime = metav1.Now()
			if err := s.patchStatus(ctx, victim, map[string]any{"conditions": []corev1.PodCondition{c}}); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				s.log.Warn("preemption: DisruptionTarget condition", "victim", keyOf(victim), "preemptor", keyOf(preemptor), "err", err)
				return
			}
		}
		err := s.client.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &victim.UID}})
		if err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				continue // gone, or a new pod of the same name
			}
			s.log.Warn("preemption: deleting victim", "victim", keyOf(victim), "preemptor", keyOf(preemptor), "err", err)
			return
		}
		s.log.Info("preempted", "victim", keyOf(victim), "preemptor", keyOf(preemptor), "node", res.Node)
		s.recorder.Eventf(victim, corev1.EventTypeNormal, "Preempted", "Preempted by pod %s on node %s", preemptor.UID, res.Node)
	}
}

func hasCondition(p *corev1.Pod, want corev1.PodCondition) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == want.Type {
			return c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message
		}
	}
	return false
}
