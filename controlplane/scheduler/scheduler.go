// Package scheduler assigns pods to nodes, as kube-scheduler does: while holding the
// kube-system/kube-scheduler Lease it watches pods and nodes, keeps an incremental snapshot of
// the cluster, asks the decision core (package core) for a node for each pending pod of
// schedulerName default-scheduler, assumes the pod there, binds it through pods/binding and
// records Scheduled or FailedScheduling events. Health and metrics are served on
// https://127.0.0.1:10259.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
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

	mu       sync.Mutex
	snapshot *core.Snapshot
	start    int
}

// New builds a scheduler; Run starts it.
func New(client kubernetes.Interface, o Options, log *slog.Logger) *Scheduler {
	if o.Parallelism == 0 {
		o.Parallelism = 64
	}
	b := record.NewBroadcaster()
	return &Scheduler{client: client, opts: o, log: log, queue: newQueue(), snapshot: core.NewSnapshot(nil, nil), events: b,
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: DefaultSchedulerName})}
}

// Run watches pods and nodes and schedules until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	s.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.client.CoreV1().Events("")})
	defer s.events.Shutdown()
	factory := informers.NewSharedInformerFactory(s.client, 0)
	nodes, pods := factory.Core().V1().Nodes().Informer(), factory.Core().V1().Pods().Informer()
	_, _ = nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
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
	_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.podChanged(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { s.podChanged(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				s.podDeleted(p)
			}
		},
	})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.HasSynced, pods.HasSynced) {
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

func (s *Scheduler) podChanged(p *corev1.Pod) {
	switch {
	case p.Spec.NodeName != "":
		s.queue.Delete(p)
		s.mu.Lock()
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
	default:
		s.queue.Delete(p)
	}
}

func (s *Scheduler) podDeleted(p *corev1.Pod) {
	s.queue.Delete(p)
	if p.Spec.NodeName != "" {
		s.mu.Lock()
		s.snapshot.RemovePod(p)
		s.mu.Unlock()
		s.queue.MoveAll() // freed resources may let a waiting pod fit
	}
}

func (s *Scheduler) scheduleOne(ctx context.Context, pod *corev1.Pod, sem chan struct{}, wg *sync.WaitGroup) {
	s.mu.Lock()
	res, err := core.Schedule(s.snapshot, pod, core.Options{Start: s.start})
	var assumed *corev1.Pod
	if err == nil {
		s.start = res.NextStart
		assumed = pod.DeepCopy()
		assumed.Spec.NodeName = res.Node
		s.snapshot.AddPod(assumed)
	}
	s.mu.Unlock()
	if err != nil {
		s.unschedulable(ctx, pod, err)
		return
	}
	sem <- struct{}{}
	wg.Add(1)
	go func() {
		defer func() { <-sem; wg.Done() }()
		err := s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: res.Node},
		}, metav1.CreateOptions{})
		if err != nil {
			s.mu.Lock()
			s.snapshot.RemovePod(assumed)
			s.mu.Unlock()
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				s.queue.Done(pod, false) // deleted or bound meanwhile
				return
			}
			s.log.Warn("binding failed", "pod", keyOf(pod), "node", res.Node, "err", err)
			s.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "Binding rejected: %v", err)
			s.queue.Done(pod, true)
			s.queue.MoveAll()
			return
		}
		s.queue.Done(pod, false)
		s.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, res.Node)
	}()
}

// unschedulable records why the pod fits nowhere and parks it until the cluster changes.
func (s *Scheduler) unschedulable(ctx context.Context, pod *corev1.Pod, err error) {
	s.queue.Done(pod, true)
	var fit *core.FitError
	msg := err.Error()
	if !errors.As(err, &fit) {
		msg = fmt.Sprintf("scheduling failed: %v", err)
	}
	s.recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", msg)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == msg {
			return
		}
	}
	cp := pod.DeepCopy()
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: msg, LastTransitionTime: metav1.Now()}
	replaced := false
	for i := range cp.Status.Conditions {
		if cp.Status.Conditions[i].Type == corev1.PodScheduled {
			cp.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		cp.Status.Conditions = append(cp.Status.Conditions, cond)
	}
	if _, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		s.log.Debug("pod condition", "pod", keyOf(pod), "err", err)
	}
}
