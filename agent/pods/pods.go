// Package pods runs the pods bound to this node through CRI, as the kubelet's pod workers do:
// a sandbox per pod (its network set up by skiff-cni), the image checked or pulled per
// imagePullPolicy, init containers in order, then the containers; exited containers are
// restarted per restartPolicy with upstream's backoff; the pod's status (phase, conditions,
// IPs, container states) is written through the status subresource; a pod being deleted is
// stopped within its grace period and then removed from the API, as the kubelet does.
//
// One Manager runs every pod; a workqueue hands each pod to one worker at a time (never two
// workers on one pod), and the state the workers keep is held by types that own it:
//   - pods.go       the Manager, its watch and resync, and the sync of one pod (run)
//   - admit.go      admission (resources, node pressure, host ports) before a pod runs
//   - sandbox.go    the pod sandbox: its configuration, hostname, creation under backoff
//   - container.go  containers: start (create, start, hooks), restart policy and crash backoff, stop
//   - images.go     image pulls per pull policy, pull secrets, image volumes
//   - backoff.go    backoffs: every retry delay (crashes, pulls, sandbox and container starts)
//   - static.go     staticPods: the pods of manifest files and their mirrors
//   - resize.go     in-place resize: admission, the resources each container runs with
//   - terminate.go  stopping a pod: grace periods, terminal status, cleanup of what it left
//   - status.go     the pod status written through the status subresource
//   - podfiles.go   the files the agent writes for a pod (hosts file, volumes' refresh)
//   - probes.go, evict.go, cpus.go, cgroups.go, dns.go, env.go: probes, eviction, CPU
//     pinning, cgroups, DNS configuration, environment
package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/agent/cpumanager"
	"github.com/skiff-sh/skiff/agent/eviction"
	"github.com/skiff-sh/skiff/agent/netnsdial"
	"github.com/skiff-sh/skiff/agent/volumes"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Options configure the pod manager.
type Options struct {
	NodeName string
	// HostIPs are the node's addresses, one per family, the primary first: status.hostIP is
	// the first, status.hostIPs all; a pod's addresses are ordered to put the primary's
	// family first, as the kubelet orders them.
	HostIPs []string
	// PodLogDir is the root of pod logs (/var/log/pods).
	PodLogDir string
	// Netns is the runtime's network namespace, from which probes reach pods ("" for here).
	Netns string
	// CgroupRoot is the parent of every pod cgroup (cgroups.DefaultRoot).
	CgroupRoot string
	// FlatCgroups puts every pod's cgroup right under CgroupRoot with no limits of its own
	// (the kubelet's --cgroups-per-qos=false); by default each goes under its QoS class's tier
	// with the pod's CPU weight, quota and memory limit (see agent/cgroups).
	FlatCgroups bool
	// PodMaxPIDs limits each pod's tasks (--pod-max-pids; 0 or less: no limit).
	PodMaxPIDs int64
	// NoCFSQuota leaves CPU limits unenforced: no CFS quota on pods or containers
	// (--cpu-cfs-quota=false).
	NoCFSQuota bool
	// CPUs is the static CPU manager policy (--cpu-manager-policy static): whole CPUs to
	// themselves for the containers of Guaranteed pods that ask for them, the shared pool
	// for the others; nil is the none policy, every container on every CPU.
	CPUs *cpumanager.Manager
	// MemoryCapacity is the node's memory in bytes, against which a Burstable container's
	// OOM score adjustment is reckoned.
	MemoryCapacity int64
	// CPUReconcilePeriod is how often containers are checked to be on their CPUs (10 s).
	CPUReconcilePeriod time.Duration
	// Volumes materializes pod volumes; nil runs containers without them.
	Volumes *volumes.Manager
	// ClusterDNS are the cluster DNS servers' IPs (the kubelet's --cluster-dns), the only
	// nameservers of ClusterFirst pods; none makes those pods use the host's resolv.conf.
	ClusterDNS []string
	// ClusterDNSService, when ClusterDNS is empty, gives pods the addresses of the
	// kube-system/kube-dns Service (this node's agent answers them).
	ClusterDNSService bool
	// ClusterDomain is the cluster's DNS domain (--cluster-domain; "" means cluster.local).
	ClusterDomain string
	// ResolvConf is the host resolver configuration Default-policy pods get (--resolv-conf;
	// "" means /etc/resolv.conf); a missing file is an empty one.
	ResolvConf string
	// Services feed every container's environment: the agent's shared Service informer.
	Services coreinformers.ServiceInformer
	// StartInformers starts the shared informers asked for so far (sharedinformers.Shared.Start).
	StartInformers func()
	// PodsDir holds each pod's directory (<agent-data-dir>/pods/<uid>: its hosts file and
	// termination message files, beside the volumes); "" manages neither.
	PodsDir string
	// Allocatable is the node's allocatable resources: the downward API reports them for
	// limits a container does not set.
	Allocatable corev1.ResourceList
	// RegistryLogins is the node's docker config file (<agent-data-dir>/config.json, as the
	// kubelet's config.json): its logins serve every pod after the pod's own pull secrets. It
	// is read at each pull, so logins can change without a restart; "" or a missing file means
	// none.
	RegistryLogins string
	// Pressure, if set, is the node's pressure conditions now; a node under pressure admits
	// pods as agent/eviction says.
	Pressure func() eviction.Conditions
}

// Manager runs this node's pods.
type Manager struct {
	client   kubernetes.Interface
	runtime  runtimeapi.RuntimeServiceClient
	images   runtimeapi.ImageServiceClient
	opts     Options
	log      *slog.Logger
	recorder record.EventRecorder
	events   record.EventBroadcaster
	lister   corelisters.PodLister
	// services feeds the service environment variables of every container start from a
	// watch, rather than two LISTs from the API server per container.
	services corelisters.ServiceLister
	loop     *loop.Loop

	mu sync.Mutex
	// backoffs are every retry delay of the node's pods (crashes, pulls, starts).
	backoffs *backoffs
	prober   *prober
	// prepared is when each pod's volumes were last written.
	prepared map[types.UID]time.Time
	// hosts is what each pod's hosts file was last written for.
	hosts map[types.UID]string
	// applied is the resources each running container was started or last resized with
	// ("<uid>/<name>"), to see a pods/resize through.
	applied map[string]corev1.ResourceRequirements
	// evictions are the pods node-pressure eviction asked to end (see Evict).
	evictions map[types.UID]*evictionRequest
	// synced is set once the pod cache has synced: lister may be read from other goroutines.
	synced atomic.Bool

	// static are the pods of manifest files (see static.go).
	static *staticPods

	// qosShares is the burstable tier's weight as last written (0: not yet, or failed).
	qosMu     sync.Mutex
	qosShares uint64
	// cgroupMounts are the cgroup hierarchies, read once: they do not change under a running agent.
	cgroupMounts []string
	// cpuMu serializes moving containers between CPUs; cpusApplied (under mu) is the CPU
	// list each running container was last put on, by container ID.
	cpuMu       sync.Mutex
	cpusApplied map[string]string
	// resizePending (under mu) are the in-place resizes the node has not taken on, by pod.
	resizePending map[types.UID]pendingResize
	// allocated (under mu) are the resources of admitted resizes, by pod UID/container, from
	// their admission until their containers run with them (then applied says the same).
	allocated map[string]corev1.ResourceRequirements

	// admitMu serializes admission, so two pods cannot both take the last of a resource.
	admitMu  sync.Mutex
	admitted map[types.UID]bool
}

// resyncPeriod is how often each pod's containers are checked, events or not.
const resyncPeriod = 2 * time.Second

// New builds a manager over CRI clients. Its options come whole from the agent (every
// default is system's).
func New(client kubernetes.Interface, rt runtimeapi.RuntimeServiceClient, img runtimeapi.ImageServiceClient, o Options, log *slog.Logger) *Manager {
	b := record.NewBroadcaster()
	m := &Manager{client: client, runtime: rt, images: img, opts: o, log: log.With("component", "pods"), events: b,
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: o.NodeName}),
		backoffs: newBackoffs()}
	m.prober = newProber(rt, netnsdial.Dialer(o.Netns, 5*time.Second))
	m.prepared = map[types.UID]time.Time{}
	m.applied = map[string]corev1.ResourceRequirements{}
	m.hosts = map[types.UID]string{}
	m.static = &staticPods{byKey: map[string]*corev1.Pod{}}
	m.admitted = map[types.UID]bool{}
	m.cgroupMounts = cgroups.Mounts()
	m.cpusApplied = map[string]string{}
	m.resizePending = map[types.UID]pendingResize{}
	m.allocated = map[string]corev1.ResourceRequirements{}
	m.loop = loop.New("pods", m.sync, log)
	return m
}

// Run watches this node's pods and runs them until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	m.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.client.CoreV1().Events("")})
	defer m.events.Shutdown()
	factory := informers.NewSharedInformerFactoryWithOptions(m.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", m.opts.NodeName).String()
	}))
	inf := factory.Core().V1().Pods()
	m.lister = inf.Lister()
	_, _ = inf.Informer().AddEventHandler(m.loop.Handler())
	// Services feed every container's environment; they come from the agent's shared
	// factory. The pods are this node's alone (a field selector), so they have their own.
	svcs := m.opts.Services
	m.services = svcs.Lister()
	svcInformer := svcs.Informer()
	factory.Start(ctx.Done())
	m.opts.StartInformers()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced, svcInformer.HasSynced) {
		return
	}
	m.synced.Store(true)
	go m.syncQOSPeriodically(ctx)
	go m.reconcileCPUsPeriodically(ctx, m.opts.CPUReconcilePeriod)
	go func() {
		t := time.NewTicker(resyncPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pods, _ := m.lister.List(everything())
				for _, p := range pods {
					m.loop.Enqueue(p)
				}
			}
		}
	}()
	m.loop.Run(ctx, 16)
	factory.Shutdown()
}

func (m *Manager) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	if sp := m.staticPod(key); sp != nil {
		return m.runStatic(ctx, sp)
	}
	pod, err := m.lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		m.forgetEviction("", key)
		return m.cleanupOrphans(ctx, ns, name)
	}
	if err != nil {
		return err
	}
	if pod.Annotations[mirrorKey] != "" {
		// The mirror of a static pod whose manifest is gone: remove both.
		_ = m.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
			Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		return m.cleanupOrphans(ctx, ns, name)
	}
	if req := m.eviction(pod.UID); req != nil && pod.DeletionTimestamp == nil {
		return m.syncEviction(ctx, pod, req)
	}
	if pod.DeletionTimestamp != nil {
		return m.terminate(ctx, pod)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		// A finished pod keeps its containers (and logs) until it is deleted, but gives its
		// network back at once, as the kubelet does.
		m.forgetAdmitted(pod.UID)
		return m.stopSandboxes(ctx, pod.UID)
	}
	if ok, err := m.admit(ctx, pod); !ok || err != nil {
		return err
	}
	return m.run(ctx, pod)
}

// podContext is what every container start of one sync shares: the sandbox, its config and
// addresses, and the pod's hosts file.
type podContext struct {
	sandboxID string
	cfg       *runtimeapi.PodSandboxConfig
	ips       []string
	hostsFile string
}

// A pod's failed sandbox and container starts back off (backoffs), so a start that cannot
// succeed (a bad hostname, a missing ConfigMap key) neither spins nor takes a new address
// each time.
// run makes the pod's sandbox and containers exist and reports its status.
func (m *Manager) run(ctx context.Context, pod *corev1.Pod) error {
	if err := m.prepareVolumes(ctx, pod); err != nil && !m.volumesInUse(pod) {
		return m.writeStatus(ctx, pod, nil, nil, "ContainerCreating", nil)
	}
	// A refresh of a started pod's volumes that failed (its event is recorded; the next sync
	// tries again) changes nothing of the pod: its containers run with what the volumes
	// held, and its status stays what the runtime says. Reporting it ContainerCreating
	// would take a serving pod out of its Services' endpoints on a slow API call.
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && pod.Status.StartTime != nil &&
		time.Since(pod.Status.StartTime.Time) >= time.Duration(*d)*time.Second {
		return m.deadlineExceeded(ctx, pod)
	}
	sb, err := m.sandbox(ctx, pod.UID)
	if err != nil {
		return err
	}
	hostname, domain, hostErr := podHostname(pod, m.opts.ClusterDomain)
	// The DNS config matters when the sandbox is made (the runtime writes its resolv.conf then);
	// containers of an existing sandbox start without it if it cannot be formed now.
	opts := m.opts
	if len(opts.ClusterDNS) == 0 && opts.ClusterDNSService {
		opts.ClusterDNS = m.clusterDNSService()
	}
	dns, dnsWarns, dnsErr := podDNSConfig(pod, opts)
	cfg := sandboxConfig(pod, m.opts.PodLogDir, cgroups.Parent(m.opts.CgroupRoot, pod, !m.opts.FlatCgroups), hostname, dns)
	if sb == nil {
		if hostErr == nil {
			hostErr = dnsErr
		}
		if sb, err = m.createSandbox(ctx, pod, cfg, hostErr, dnsWarns); sb == nil {
			return err
		}
	}
	st, err := m.runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id})
	if err != nil {
		return err
	}
	pc := &podContext{sandboxID: sb.Id, cfg: cfg, ips: m.sandboxIPs(pod, st.Status)}
	if len(pc.ips) > 0 && m.opts.PodsDir != "" {
		if pc.hostsFile, err = m.hostsFile(pod, sb.Id, pc.ips, hostname, domain); err != nil {
			return fmt.Errorf("hosts file: %w", err)
		}
	}
	latest, err := m.latestContainers(ctx, sb.Id)
	if err != nil {
		return err
	}
	// A container that cannot start waits with the reason (ErrImagePull, ImagePullBackOff,
	// CreateContainerConfigError, ...), as the kubelet reports it.
	waitErrs := map[string]*waitingError{}
	waitErr := func(name string, err error) bool {
		var we *waitingError
		if errors.As(err, &we) {
			waitErrs[name] = we
		}
		return we != nil
	}
	// Init containers run one after another to completion; a failed one is restarted with
	// backoff, or, under restartPolicy Never, fails the pod.
	for _, c := range pod.Spec.InitContainers {
		cur := latest[c.Name]
		if isSidecar(c) {
			// A sidecar (restartPolicy Always) starts in its turn and keeps running beside
			// the containers; the next init container waits only for it to run.
			if cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				// Started means running and, with a startup probe, past it.
				if c.StartupProbe == nil {
					continue
				}
				m.probe(ctx, pod, c, cur)
				if m.prober.started(pod, c, cur.Id) {
					continue
				}
				return m.writeStatus(ctx, pod, st.Status, latest, "PodInitializing", waitErrs)
			}
			if cur == nil || (cur.State == runtimeapi.ContainerState_CONTAINER_EXITED && m.shouldRestart(ctx, pod, cur, corev1.RestartPolicyAlways)) {
				if err := m.start(ctx, pod, pc, c, cur); err != nil && !waitErr(c.Name, err) {
					return err
				}
				if latest, err = m.latestContainers(ctx, sb.Id); err != nil {
					return err
				}
				if now := latest[c.Name]; now != nil && now.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
					continue
				}
			}
			return m.writeStatus(ctx, pod, st.Status, latest, "PodInitializing", waitErrs)
		}
		if cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			s, err := m.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cur.Id})
			if err != nil {
				return err
			}
			if s.Status.ExitCode == 0 {
				continue
			}
			if pod.Spec.RestartPolicy == corev1.RestartPolicyNever || !m.shouldRestart(ctx, pod, cur, pod.Spec.RestartPolicy) {
				return m.writeStatus(ctx, pod, st.Status, latest, "PodInitializing", waitErrs)
			}
		}
		if cur == nil || cur.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if err := m.start(ctx, pod, pc, c, cur); err != nil && !waitErr(c.Name, err) {
				return err
			}
			if latest, err = m.latestContainers(ctx, sb.Id); err != nil {
				return err
			}
		}
		return m.writeStatus(ctx, pod, st.Status, latest, "PodInitializing", waitErrs)
	}
	started := false
	// An in-place resize is taken on only once the node admits it; until then the containers
	// keep what they run with and the pod says why (PodResizePending).
	resizeAdmitted := true
	if m.resizeRequested(pod, latest) {
		resizeAdmitted = m.admitResize(pod)
	} else {
		m.noResize(pod.UID)
	}
	resizing := resizeAdmitted && m.resizing(pod, latest)
	if resizing {
		// The pod's cgroup takes the larger limits before its containers do.
		m.resizePodCgroup(pod, true)
	}
	for _, c := range pod.Spec.Containers {
		cur := latest[c.Name]
		switch {
		case cur == nil:
			started = true
			if err := m.start(ctx, pod, pc, c, nil); err != nil && !waitErr(c.Name, err) {
				m.log.Warn("start container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "err", err)
			}
		case cur.Labels[imageLabel] != "" && cur.Labels[imageLabel] != c.Image:
			// The pod's spec names another image (the one mutable part of a container):
			// replace the container at once, as the kubelet does on a changed definition.
			m.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Container %s definition changed, will be restarted", c.Name)
			if cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				m.stopContainer(ctx, pod, c, cur.Id, gracePeriod(pod))
			}
			started = true
			if err := m.start(ctx, pod, pc, c, cur); err != nil && !waitErr(c.Name, err) {
				m.log.Warn("replace container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "err", err)
			}
		case cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING && m.resized(pod, c) && resizeAdmitted:
			// In-place resize: the cgroup is updated, or, where the container's resizePolicy
			// asks for it, the container restarted with the new resources.
			if restartOnResize(c, m.appliedTo(pod, c)) {
				m.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Container %s resized, will be restarted", c.Name)
				m.stopContainer(ctx, pod, c, cur.Id, gracePeriod(pod))
				started = true
				if err := m.start(ctx, pod, pc, c, cur); err != nil && !waitErr(c.Name, err) {
					m.log.Warn("restart resized container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "err", err)
				}
				break
			}
			if _, err := m.runtime.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: cur.Id,
				Linux: m.containerResources(pod, c)}); err != nil {
				m.recorder.Eventf(pod, corev1.EventTypeWarning, "ResizeFailed", "Resizing container %s failed: %v", c.Name, pullError(err))
			} else {
				m.setApplied(pod, c)
			}
		case cur.State == runtimeapi.ContainerState_CONTAINER_EXITED && m.shouldRestart(ctx, pod, cur, pod.Spec.RestartPolicy):
			started = true
			if err := m.start(ctx, pod, pc, c, cur); err != nil && !waitErr(c.Name, err) {
				m.log.Warn("restart container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "err", err)
			}
		}
	}
	if resizing {
		m.resizePodCgroup(pod, false)
	}
	// Ephemeral containers (kubectl debug) run once, never restarted.
	for _, ec := range pod.Spec.EphemeralContainers {
		if latest[ec.Name] == nil {
			started = true
			if err := m.start(ctx, pod, pc, corev1.Container(ec.EphemeralContainerCommon), nil); err != nil && !waitErr(ec.Name, err) {
				m.log.Warn("start ephemeral container", "pod", pod.Namespace+"/"+pod.Name, "container", ec.Name, "err", err)
			}
		}
	}
	// The resync visits every pod every 2 s: list again only when this sync changed something.
	if started {
		if latest, err = m.latestContainers(ctx, sb.Id); err != nil {
			return err
		}
	}
	probed := append([]corev1.Container(nil), pod.Spec.Containers...)
	for _, c := range pod.Spec.InitContainers {
		if isSidecar(c) {
			probed = append(probed, c)
		}
	}
	for _, c := range probed {
		if rc := latest[c.Name]; m.probe(ctx, pod, c, rc) {
			m.stopContainer(ctx, pod, c, rc.Id, gracePeriod(pod))
			m.loop.Add(pod.Namespace + "/" + pod.Name)
		}
	}
	return m.writeStatus(ctx, pod, st.Status, latest, "", waitErrs)
}
