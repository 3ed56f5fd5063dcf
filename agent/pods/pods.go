// Package pods runs the pods bound to this node through CRI, as the kubelet's pod workers do:
// a sandbox per pod (its network set up by skiff-cni), the image checked or pulled per
// imagePullPolicy, init containers in order, then the containers; exited containers are
// restarted per restartPolicy with upstream's backoff; the pod's status (phase, conditions,
// IPs, container states) is written through the status subresource; a pod being deleted is
// stopped within its grace period and then removed from the API, as the kubelet does.
package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
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
	"github.com/skiff-sh/skiff/agent/downward"
	"github.com/skiff-sh/skiff/agent/eviction"
	"github.com/skiff-sh/skiff/agent/netnsdial"
	"github.com/skiff-sh/skiff/agent/pullsecrets"
	"github.com/skiff-sh/skiff/agent/volumes"
	"github.com/skiff-sh/skiff/controlplane/controllers/loop"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
)

// Options configure the pod manager.
type Options struct {
	NodeName string
	// HostIP is the node's address, reported as status.hostIP.
	HostIP string
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
	// Informers, if set, is the agent's shared factory (else the manager watches Services
	// on its own).
	Informers *sharedinformers.Shared
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

	mu      sync.Mutex
	backoff map[string]time.Time // container key -> earliest restart
	delay   map[string]time.Duration
	prober  *prober
	// prepared is when each pod's volumes were last written.
	prepared map[types.UID]time.Time
	// startErrs is each container's last failed start, reported while its retry backs off.
	startErrs map[string]*waitingError
	// hosts is what each pod's hosts file was last written for.
	hosts map[types.UID]string
	// applied is the resources each running container was started or last resized with
	// ("<uid>/<name>"), to see a pods/resize through.
	applied map[string]corev1.ResourceRequirements
	// evictions are the pods node-pressure eviction asked to end (see Evict).
	evictions map[types.UID]*evictionRequest
	// synced is set once the pod cache has synced: lister may be read from other goroutines.
	synced atomic.Bool

	staticMu sync.Mutex
	static   map[string]*corev1.Pod // namespace/name -> static pod from a manifest file

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
		backoff:  map[string]time.Time{}, delay: map[string]time.Duration{}}
	m.prober = newProber(rt, netnsdial.Dialer(o.Netns, 5*time.Second))
	m.prepared = map[types.UID]time.Time{}
	m.startErrs = map[string]*waitingError{}
	m.applied = map[string]corev1.ResourceRequirements{}
	m.hosts = map[types.UID]string{}
	m.static = map[string]*corev1.Pod{}
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
	svcFactory, start := sharedinformers.Factory(ctx, m.opts.Informers, m.client)
	svcs := svcFactory.Core().V1().Services()
	m.services = svcs.Lister()
	svcInformer := svcs.Informer()
	factory.Start(ctx.Done())
	start()
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

// SetStatic replaces the set of static pods (from manifest files); changed and removed ones
// are synced at once.
func (m *Manager) SetStatic(pods []*corev1.Pod) {
	next := map[string]*corev1.Pod{}
	for _, p := range pods {
		next[p.Namespace+"/"+p.Name] = p
	}
	m.staticMu.Lock()
	prev := m.static
	m.static = next
	m.staticMu.Unlock()
	for k, p := range next {
		if old, ok := prev[k]; !ok || old.UID != p.UID {
			m.loop.Add(k)
		}
	}
	for k := range prev {
		if _, ok := next[k]; !ok {
			m.loop.Add(k)
		}
	}
}

func (m *Manager) staticPod(key string) *corev1.Pod {
	m.staticMu.Lock()
	defer m.staticMu.Unlock()
	return m.static[key]
}

func isStatic(p *corev1.Pod) bool {
	return p.Annotations[staticSource] == "file" && p.ResourceVersion == ""
}

const (
	staticSource = "kubernetes.io/config.source"
	mirrorKey    = corev1.MirrorPodAnnotationKey
)

// runStatic runs a static pod. Its mirror in the API is only a view: deleting the mirror
// finishes the API deletion at once and leaves the containers running.
func (m *Manager) runStatic(ctx context.Context, sp *corev1.Pod) error {
	if mirror, err := m.lister.Pods(sp.Namespace).Get(sp.Name); err == nil && mirror.DeletionTimestamp != nil {
		_ = m.client.CoreV1().Pods(sp.Namespace).Delete(ctx, sp.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
			Preconditions: &metav1.Preconditions{UID: &mirror.UID}})
	}
	// An edited manifest is a new pod (new UID): the old version's sandbox goes.
	resp, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": sp.Namespace, "io.kubernetes.pod.name": sp.Name}}})
	if err != nil {
		return err
	}
	for _, sb := range resp.Items {
		if types.UID(sb.Metadata.Uid) != sp.UID {
			if err := m.stopAll(ctx, types.UID(sb.Metadata.Uid), 30, nil); err != nil {
				return err
			}
		}
	}
	return m.run(ctx, sp)
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

func logDir(root string, p *corev1.Pod) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID))
}

// sandbox returns the pod's ready sandbox, if any.
func (m *Manager) sandbox(ctx context.Context, uid types.UID) (*runtimeapi.PodSandbox, error) {
	resp, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(uid)}}})
	if err != nil {
		return nil, err
	}
	var best *runtimeapi.PodSandbox
	for _, s := range resp.Items {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY && (best == nil || s.CreatedAt > best.CreatedAt) {
			best = s
		}
	}
	return best, nil
}

// sandboxConfig is the pod's sandbox config: its hostname (none for a host network pod,
// which shares the node's UTS namespace and so its name), resolver configuration dns (see
// dnsConfig) and sysctls.
func sandboxConfig(p *corev1.Pod, logRoot, cgroupParent, hostname string, dns *runtimeapi.DNSConfig) *runtimeapi.PodSandboxConfig {
	nsMode := runtimeapi.NamespaceMode_POD
	if p.Spec.HostNetwork {
		nsMode = runtimeapi.NamespaceMode_NODE
		hostname = ""
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: string(p.UID)},
		Hostname:     hostname,
		LogDirectory: logDir(logRoot, p),
		DnsConfig:    dns,
		Labels: map[string]string{"io.kubernetes.pod.name": p.Name, "io.kubernetes.pod.namespace": p.Namespace,
			"io.kubernetes.pod.uid": string(p.UID)},
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: cgroupParent, Sysctls: sysctls(p),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				// containerd refuses a privileged container in a sandbox that is not.
				Privileged:       hasPrivilegedContainer(p),
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: nsMode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}}},
	}
}

// hasPrivilegedContainer reports whether any of the pod's containers, init containers or
// ephemeral containers asks for privileged, which makes the sandbox privileged (as the
// kubelet does).
func hasPrivilegedContainer(p *corev1.Pod) bool {
	for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			return true
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
			return true
		}
	}
	return false
}

// podContext is what every container start of one sync shares: the sandbox, its config and
// addresses, and the pod's hosts file.
type podContext struct {
	sandboxID string
	cfg       *runtimeapi.PodSandboxConfig
	ips       []string
	hostsFile string
}

// sandboxIPs are the sandbox's addresses; a host network pod's are the node's.
func (m *Manager) sandboxIPs(pod *corev1.Pod, st *runtimeapi.PodSandboxStatus) []string {
	if pod.Spec.HostNetwork {
		if m.opts.HostIP == "" {
			return nil
		}
		return []string{m.opts.HostIP}
	}
	if st == nil || st.Network == nil || st.Network.Ip == "" {
		return nil
	}
	ips := []string{st.Network.Ip}
	for _, a := range st.Network.AdditionalIps {
		ips = append(ips, a.Ip)
	}
	return ips
}

// hostsFile writes the pod's hosts file once per sandbox, addresses and hostAliases (not on
// every 2-second resync) and returns its path.
func (m *Manager) hostsFile(pod *corev1.Pod, sandboxID string, ips []string, hostname, domain string) (string, error) {
	key := fmt.Sprint(sandboxID, ips, hostname, domain, pod.Spec.HostAliases)
	m.mu.Lock()
	written := m.hosts[pod.UID] == key
	m.mu.Unlock()
	path := filepath.Join(m.podDir(pod.UID), "etc-hosts")
	if written {
		return path, nil
	}
	path, err := writeHostsFile(m.podDir(pod.UID), pod, ips, hostname, domain)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	m.hosts[pod.UID] = key
	m.mu.Unlock()
	return path, nil
}

// podDir is the pod's directory on the node (its hosts file, termination message files).
func (m *Manager) podDir(uid types.UID) string {
	return filepath.Join(m.opts.PodsDir, string(uid))
}

// prepareVolumes writes the pod's volumes when it is new and every 30 s after, so mounted
// configMaps, secrets and tokens follow their sources without an API read every resync.
func (m *Manager) prepareVolumes(ctx context.Context, pod *corev1.Pod) error {
	if m.opts.Volumes == nil {
		return nil
	}
	m.mu.Lock()
	last := m.prepared[pod.UID]
	m.mu.Unlock()
	if time.Since(last) < 30*time.Second {
		return nil
	}
	if err := m.opts.Volumes.Prepare(ctx, pod); err != nil {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed: %v", err)
		return err
	}
	m.mu.Lock()
	m.prepared[pod.UID] = time.Now()
	m.mu.Unlock()
	return nil
}

// runtimeHandler is the CRI runtime handler of the pod's RuntimeClass ("" for containerd's
// default): containerd runs the sandbox with the runtime of that name in its config.
func (m *Manager) runtimeHandler(ctx context.Context, pod *corev1.Pod) (string, error) {
	name := ptr.Deref(pod.Spec.RuntimeClassName, "")
	if name == "" {
		return "", nil
	}
	rc, err := m.client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to get RuntimeClass %q: %w", name, err)
	}
	return rc.Handler, nil
}

// Backoff of a pod's failed sandbox and container starts, as the kubelet's: 10 s doubling to
// 5 min, so a start that cannot succeed (a bad hostname, a missing ConfigMap key) neither
// spins nor takes a new address each time.
const (
	startBackoffInitial = 10 * time.Second
	startBackoffMax     = 5 * time.Minute
)

// run makes the pod's sandbox and containers exist and reports its status.
func (m *Manager) run(ctx context.Context, pod *corev1.Pod) error {
	if err := m.prepareVolumes(ctx, pod); err != nil {
		return m.writeStatus(ctx, pod, nil, nil, "ContainerCreating", nil)
	}
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
		if hostErr != nil {
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to generate sandbox config: %v", hostErr)
			return m.writeStatus(ctx, pod, nil, nil, "ContainerCreating", nil)
		}
		key := string(pod.UID) + "/sandbox"
		if m.inPullBackoff(key, time.Now()) {
			return m.writeStatus(ctx, pod, nil, nil, "ContainerCreating", nil)
		}
		for _, w := range dnsWarns {
			m.recorder.Event(pod, corev1.EventTypeWarning, w.Reason, w.Message)
		}
		if err := m.ensurePodCgroup(pod); err != nil {
			m.backoffFailed(key, time.Now(), startBackoffInitial, startBackoffMax)
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create the pod's cgroup: %v", err)
			return m.writeStatus(ctx, pod, nil, nil, "ContainerCreating", nil)
		}
		handler, err := m.runtimeHandler(ctx, pod)
		var resp *runtimeapi.RunPodSandboxResponse
		if err == nil {
			resp, err = m.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
		}
		if err != nil {
			m.backoffFailed(key, time.Now(), startBackoffInitial, startBackoffMax)
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", pullError(err))
			return m.writeStatus(ctx, pod, nil, nil, "ContainerCreating", nil)
		}
		m.pullSucceeded(key)
		sb = &runtimeapi.PodSandbox{Id: resp.PodSandboxId}
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

// deadlineExceeded ends a pod that ran longer than its activeDeadlineSeconds, as the
// kubelet: its containers are stopped and it fails with reason DeadlineExceeded.
func (m *Manager) deadlineExceeded(ctx context.Context, pod *corev1.Pod) error {
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
	codes, err := m.stopContainers(ctx, pod, gracePeriod(pod))
	if err != nil {
		return err
	}
	return m.writeTerminal(ctx, pod, codes, corev1.PodFailed, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
}

// latestContainers maps each container name to its newest attempt in the sandbox.
func (m *Manager) latestContainers(ctx context.Context, sandboxID string) (map[string]*runtimeapi.Container, error) {
	list, err := m.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sandboxID}})
	if err != nil {
		return nil, err
	}
	latest := map[string]*runtimeapi.Container{}
	for _, c := range list.Containers {
		if cur := latest[c.Metadata.Name]; cur == nil || c.Metadata.Attempt > cur.Metadata.Attempt {
			latest[c.Metadata.Name] = c
		}
	}
	return latest, nil
}

// isSidecar says whether an init container is a sidecar: restartPolicy Always, running
// beside the pod's containers (upstream's native sidecars).
func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// shouldRestart applies a restart policy (the pod's, or Always for a sidecar) and upstream's
// crash backoff (10 s doubling to 5 min).
func (m *Manager) shouldRestart(ctx context.Context, pod *corev1.Pod, c *runtimeapi.Container, policy corev1.RestartPolicy) bool {
	s, err := m.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
	if err != nil {
		return false
	}
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		if s.Status.ExitCode == 0 {
			return false
		}
	}
	key := string(pod.UID) + "/" + c.Metadata.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if until, ok := m.backoff[key]; ok && now.Before(until) {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)",
			c.Metadata.Name, pod.Name, pod.Namespace, pod.UID)
		return false
	}
	d := m.delay[key]
	if d == 0 {
		d = 10 * time.Second
	} else {
		d = min(d*2, 5*time.Minute)
	}
	// A container that ran long enough resets its backoff, as upstream (10 min).
	if fin := time.Unix(0, s.Status.FinishedAt); s.Status.StartedAt > 0 && fin.Sub(time.Unix(0, s.Status.StartedAt)) > 10*time.Minute {
		d = 10 * time.Second
	}
	m.delay[key] = d
	m.backoff[key] = now.Add(d)
	return true
}

// Image pull backoff, as the kubelet's: 10 s after a failed pull, doubling to 5 min; a failure
// more than twice the maximum after the previous one starts again at 10 s.
const (
	imagePullBackoffInitial = 10 * time.Second
	imagePullBackoffMax     = 5 * time.Minute
)

// ensureImage makes an image present per its pull policy (a container's imagePullPolicy, an
// image volume's pullPolicy), with the kubelet's events: Pulling, then Pulled ("Successfully
// pulled image ... Image size: N bytes.") or a Warning Failed "Failed to pull image ..." and "Error: ErrImagePull"; while the pod's pull of
// the image backs off, BackOff "Back-off pulling image ..." and "Error: ImagePullBackOff". Its
// error is an *waitingError.
func (m *Manager) ensureImage(ctx context.Context, pod *corev1.Pod, image string, policy corev1.PullPolicy) error {
	st, err := m.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
		m.recorder.Event(pod, corev1.EventTypeWarning, "InspectFailed", msg)
		return m.imageFailed(pod, "ImageInspectError", msg)
	}
	present := st.Image != nil
	if present && policy != corev1.PullAlways {
		m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", image)
		return nil
	}
	if policy == corev1.PullNever {
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
		m.recorder.Event(pod, corev1.EventTypeWarning, "ErrImageNeverPull", msg)
		return m.imageFailed(pod, "ErrImageNeverPull", msg)
	}
	key := pullBackoffKey(pod, image)
	if m.inPullBackoff(key, time.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", image)
		m.recorder.Event(pod, corev1.EventTypeNormal, "BackOff", msg)
		return m.imageFailed(pod, "ImagePullBackOff", msg)
	}
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulling", "Pulling image %q", image)
	start := time.Now()
	if err := m.pull(ctx, pod, image); err != nil {
		if present && !authRefused(err) {
			// Always, but the registry cannot be reached: run what is here. Upstream fails;
			// skiff's lab nodes reach no registry by design. A registry that refused the pod's
			// credentials is another matter: Always is how a pod proves it may use a private
			// image, so a refusal fails the pod as upstream, even with the image cached.
			m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", image)
			return nil
		}
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", image, err)
		m.pullFailed(key, time.Now())
		return m.imageFailed(pod, "ErrImagePull", err.Error())
	}
	// The size is the image's as the runtime reports it after the pull (best effort, as upstream).
	var size uint64
	if st, err := m.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err == nil && st.Image != nil {
		size = st.Image.GetSize()
	}
	m.pullSucceeded(key)
	// Upstream's first duration is the pull's own, the second includes waiting in the kubelet's
	// pull queue; skiff pulls at once, so the two are the same.
	d := time.Since(start).Truncate(time.Millisecond)
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.",
		image, d, d, size)
	return nil
}

// pull pulls image with the credentials the pod's image pull secrets hold for its registry,
// trying each in turn (the most specific registry key first) as the kubelet does, or with none
// when none match. Its error is the runtime's, as the kubelet reports it (pullError); with
// several credentials tried, all of theirs.
func (m *Manager) pull(ctx context.Context, pod *corev1.Pod, image string) error {
	creds, err := m.pullCredentials(ctx, pod, image)
	if err != nil {
		return err
	}
	auths := []*runtimeapi.AuthConfig{nil} // no login matches: pull without
	if len(creds) > 0 {
		auths = auths[:0]
		for _, c := range creds {
			auths = append(auths, &runtimeapi.AuthConfig{Username: c.Username, Password: c.Password})
		}
	}
	var msgs []string
	for _, auth := range auths {
		_, err := m.images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}, Auth: auth})
		if err == nil {
			return nil
		}
		msgs = append(msgs, pullError(err).Error())
	}
	if len(msgs) == 1 {
		return errors.New(msgs[0])
	}
	return fmt.Errorf("[%s]", strings.Join(msgs, ", "))
}

// authRefused says whether a pull failed because the registry refused the credentials (or
// their absence): containerd reports the registry's 401 or 403, or a failed authorization.
func authRefused(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "401 unauthorized") || strings.Contains(msg, "403 forbidden") || strings.Contains(msg, "failed to authorize")
}

// pullCredentials are the credentials the pod's image pull secrets hold for image's registry.
// A secret that cannot be read is said in the kubelet's event and the pull goes on without it;
// one whose docker config does not parse fails the pull, naming it.
func (m *Manager) pullCredentials(ctx context.Context, pod *corev1.Pod, image string) ([]pullsecrets.Credential, error) {
	node := m.nodeLogins()
	if len(pod.Spec.ImagePullSecrets) == 0 {
		return node.Lookup(image), nil
	}
	var secrets []*corev1.Secret
	var missing []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := m.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			missing = append(missing, ref.Name)
			continue
		}
		secrets = append(secrets, s)
	}
	if len(missing) > 0 {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", "))
	}
	keyring, err := pullsecrets.FromSecrets(secrets)
	if err != nil {
		return nil, err
	}
	return pullsecrets.Union{keyring, node}.Lookup(image), nil
}

// nodeLogins reads the node's docker config (Options.RegistryLogins); one that cannot be read
// or parsed is logged and serves no logins, as the kubelet does with its config.json.
func (m *Manager) nodeLogins() *pullsecrets.Keyring {
	if m.opts.RegistryLogins == "" {
		return nil
	}
	b, err := os.ReadFile(m.opts.RegistryLogins)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		var k *pullsecrets.Keyring
		if k, err = pullsecrets.FromDockerConfig(b); err == nil {
			return k
		}
	}
	m.log.Warn("node registry logins not used", "file", m.opts.RegistryLogins, "err", err)
	return nil
}

// imageVolumes are the image volumes c mounts that are not mounted yet.
func (m *Manager) imageVolumes(pod *corev1.Pod, c corev1.Container) []corev1.Volume {
	if m.opts.Volumes == nil {
		return nil
	}
	mounted := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		mounted[vm.Name] = true
	}
	var out []corev1.Volume
	for _, v := range pod.Spec.Volumes {
		if v.Image != nil && mounted[v.Name] && !m.opts.Volumes.ImageMounted(pod, v.Name) {
			out = append(out, v)
		}
	}
	return out
}

// pullImageVolumes makes the images of c's image volumes present per their pullPolicy, as the
// kubelet does before it starts a container that mounts them. A volume whose image cannot be
// had keeps c waiting with the pull's reason (ErrImagePull, ImagePullBackOff, ErrImageNeverPull)
// and message; the others are still pulled.
func (m *Manager) pullImageVolumes(ctx context.Context, pod *corev1.Pod, c corev1.Container) error {
	var last error
	for _, v := range m.imageVolumes(pod, c) {
		if err := m.ensureImage(ctx, pod, v.Image.Reference, v.Image.PullPolicy); err != nil {
			last = err
		}
	}
	return last
}

// mountImageVolumes mounts c's image volumes that are not mounted yet, their images pulled.
// A mount that fails is a CreateContainerError (upstream's runtime fails the container's
// creation the same way), retried with the container's start backoff.
func (m *Manager) mountImageVolumes(ctx context.Context, pod *corev1.Pod, c corev1.Container) error {
	for _, v := range m.imageVolumes(pod, c) {
		if err := m.opts.Volumes.MountImage(ctx, pod, v.Name, v.Image.Reference); err != nil {
			return &waitingError{Reason: "CreateContainerError", Message: fmt.Sprintf("failed to mount image volume %q: %v", v.Name, err)}
		}
	}
	return nil
}

// imageFailed records the kubelet's Warning Failed "Error: <reason>" of a container whose image
// is not there and returns the error carrying its waiting state.
func (m *Manager) imageFailed(pod *corev1.Pod, reason, msg string) error {
	m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %s", reason)
	return &waitingError{Reason: reason, Message: msg}
}

// pullError is a CRI pull error as the kubelet reports it: a gRPC status of code Unknown (what
// containerd returns for most failures) loses its "rpc error: code = Unknown desc = " prefix.
func pullError(err error) error {
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unknown {
		return errors.New(s.Message())
	}
	return err
}

// pullBackoffKey keys a pod's pull backoff of an image in m.backoff and m.delay, upstream's
// "<uid>_<image>" beside the crash backoff's "<uid>/<container>"; stopAll drops both with the pod.
func pullBackoffKey(pod *corev1.Pod, image string) string { return string(pod.UID) + "_" + image }

// inPullBackoff reports whether the last failed pull of key is more recent than its backoff.
func (m *Manager) inPullBackoff(key string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.backoff[key]
	return ok && now.Before(until)
}

// pullFailed starts or doubles key's pull backoff.
func (m *Manager) pullFailed(key string, now time.Time) {
	m.backoffFailed(key, now, imagePullBackoffInitial, imagePullBackoffMax)
}

// backoffFailed starts key's backoff at initial or doubles it up to maxDelay; a failure more
// than twice maxDelay after the previous one starts again at initial.
func (m *Manager) backoffFailed(key string, now time.Time, initial, maxDelay time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.delay[key]
	if last := m.backoff[key].Add(-d); d == 0 || now.Sub(last) > 2*maxDelay {
		d = initial
	} else {
		d = min(d*2, maxDelay)
	}
	m.delay[key] = d
	m.backoff[key] = now.Add(d)
}

// pullSucceeded forgets key's backoff.
func (m *Manager) pullSucceeded(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.backoff, key)
	delete(m.delay, key)
}

// start creates and starts one container (a new attempt after prev, if any). A container
// whose configuration or start fails is an error of type *waitingError, and its next try
// backs off.
func (m *Manager) start(ctx context.Context, pod *corev1.Pod, pc *podContext, c corev1.Container, prev *runtimeapi.Container) error {
	if err := m.ensureImage(ctx, pod, c.Image, c.ImagePullPolicy); err != nil {
		return err
	}
	if err := m.pullImageVolumes(ctx, pod, c); err != nil {
		return err
	}
	key := string(pod.UID) + "/start/" + c.Name
	if m.inPullBackoff(key, time.Now()) {
		m.mu.Lock()
		last := m.startErrs[key]
		m.mu.Unlock()
		if last != nil {
			return last
		}
	}
	err := m.createAndStart(ctx, pod, pc, c, prev)
	var we *waitingError
	if errors.As(err, &we) {
		m.backoffFailed(key, time.Now(), startBackoffInitial, startBackoffMax)
		m.mu.Lock()
		m.startErrs[key] = we
		m.mu.Unlock()
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %s", we.Message)
		return err
	}
	if err == nil {
		m.pullSucceeded(key)
		m.mu.Lock()
		delete(m.startErrs, key)
		m.mu.Unlock()
	}
	return err
}

func (m *Manager) createAndStart(ctx context.Context, pod *corev1.Pod, pc *podContext, c corev1.Container, prev *runtimeapi.Container) error {
	attempt := uint32(0)
	if prev != nil {
		attempt = prev.Metadata.Attempt + 1
	}
	if m.resizeCondition(pod.UID) != nil {
		// A resize the node has not taken on does not reach a restarted container either.
		c.Resources = m.appliedTo(pod, c)
	}
	envs, err := m.containerEnv(ctx, pod, c, pc.ips)
	if err != nil {
		return &waitingError{Reason: "CreateContainerConfigError", Message: err.Error()}
	}
	env := envMap(envs)
	var mounts []*runtimeapi.Mount
	if m.opts.Volumes != nil {
		if err := m.mountImageVolumes(ctx, pod, c); err != nil {
			return err
		}
		if mounts, err = m.opts.Volumes.MountsFor(pod, c, env); err != nil {
			return &waitingError{Reason: "CreateContainerConfigError", Message: err.Error()}
		}
	}
	if pc.hostsFile != "" && !mountsHosts(c) {
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: pc.hostsFile})
	}
	annotations := map[string]string{}
	if path := c.TerminationMessagePath; path != "" && m.opts.PodsDir != "" {
		host, err := terminationFile(m.podDir(pod.UID), c.Name, attempt)
		if err != nil {
			return &waitingError{Reason: "CreateContainerConfigError", Message: fmt.Sprintf("termination message file: %v", err)}
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: path, HostPath: host})
		annotations[annotationTerminationPath] = path
		annotations[annotationTerminationPolicy] = string(c.TerminationMessagePolicy)
	}
	if err := m.takeCPUs(ctx, pod); err != nil {
		return &waitingError{Reason: "CreateContainerConfigError", Message: err.Error()}
	}
	if prev != nil {
		_, _ = m.runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: prev.Id})
	}
	res := m.containerResources(pod, c)
	cfg := &runtimeapi.ContainerConfig{
		Mounts:      mounts,
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: attempt},
		Image:       &runtimeapi.ImageSpec{Image: c.Image},
		Command:     expandAll(c.Command, env),
		Args:        expandAll(c.Args, env),
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Annotations: annotations,
		LogPath:     filepath.Join(c.Name, fmt.Sprintf("%d.log", attempt)),
		Labels: map[string]string{"io.kubernetes.pod.name": pod.Name, "io.kubernetes.pod.namespace": pod.Namespace,
			"io.kubernetes.pod.uid": string(pod.UID), "io.kubernetes.container.name": c.Name, imageLabel: c.Image},
		Linux: &runtimeapi.LinuxContainerConfig{Resources: res, SecurityContext: securityContext(pod, c)},
	}
	created, err := m.runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pc.sandboxID, Config: cfg, SandboxConfig: pc.cfg})
	if err != nil {
		return &waitingError{Reason: "CreateContainerError", Message: pullError(err).Error()}
	}
	m.setCPUsApplied(created.ContainerId, res.CpusetCpus)
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Created", "Created container: %s", c.Name)
	if _, err := m.runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId}); err != nil {
		return &waitingError{Reason: "RunContainerError", Message: pullError(err).Error()}
	}
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
	m.setApplied(pod, c)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		// As the kubelet: the hook runs before the container counts as started, and a failed
		// hook kills the container (its restart policy decides what follows).
		podIP := ""
		if len(pc.ips) > 0 {
			podIP = pc.ips[0]
		}
		if err := m.prober.runHook(ctx, pod, c, created.ContainerId, podIP, c.Lifecycle.PostStart); err != nil {
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed: %v", err)
			_, _ = m.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: created.ContainerId, Timeout: gracePeriod(pod)})
		}
	}
	return nil
}

// setApplied records the resources a container now runs with.
func (m *Manager) setApplied(pod *corev1.Pod, c corev1.Container) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applied[string(pod.UID)+"/"+c.Name] = *c.Resources.DeepCopy()
}

// appliedTo is what a container runs with; one the agent did not start (it restarted since)
// is taken to run with its spec.
func (m *Manager) appliedTo(pod *corev1.Pod, c corev1.Container) corev1.ResourceRequirements {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.applied[string(pod.UID)+"/"+c.Name]
	if !ok {
		r = *c.Resources.DeepCopy()
		m.applied[string(pod.UID)+"/"+c.Name] = r
	}
	return r
}

// resized says whether the spec asks for other cpu or memory than the container runs with.
func (m *Manager) resized(pod *corev1.Pod, c corev1.Container) bool {
	return !sameCPUMemory(m.appliedTo(pod, c), c.Resources)
}

func sameCPUMemory(a, b corev1.ResourceRequirements) bool {
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !sameQuantity(a.Requests, b.Requests, r) || !sameQuantity(a.Limits, b.Limits, r) {
			return false
		}
	}
	return true
}

func sameQuantity(a, b corev1.ResourceList, r corev1.ResourceName) bool {
	qa, oka := a[r]
	qb, okb := b[r]
	return oka == okb && qa.Cmp(qb) == 0
}

// restartOnResize says whether a resource that changed has resizePolicy RestartContainer.
func restartOnResize(c corev1.Container, applied corev1.ResourceRequirements) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy != corev1.RestartContainer {
			continue
		}
		if !sameQuantity(applied.Requests, c.Resources.Requests, p.ResourceName) || !sameQuantity(applied.Limits, c.Resources.Limits, p.ResourceName) {
			return true
		}
	}
	return false
}

// imageLabel records the image a container was created for, to see the pod's spec change it.
const imageLabel = "skiff.sh/image"

// gracePeriod is the pod's termination grace period in seconds (30 unless set).
func gracePeriod(pod *corev1.Pod) int64 {
	if pod.DeletionGracePeriodSeconds != nil {
		return *pod.DeletionGracePeriodSeconds
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return 30
}

// stopContainer stops a running container within grace seconds, running its preStop hook
// first (the hook's time counts against the grace period, as upstream).
func (m *Manager) stopContainer(ctx context.Context, pod *corev1.Pod, c corev1.Container, id string, grace int64) {
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
		start := time.Now()
		hctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
		if err := m.prober.runHook(hctx, pod, c, id, pod.Status.PodIP, c.Lifecycle.PreStop); err != nil {
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %v", err)
		}
		cancel()
		grace = max(grace-int64(time.Since(start).Seconds()), 2) // upstream leaves at least 2 s
	}
	_, _ = m.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: grace})
}

// terminate stops the pod's containers within the grace period (preStop hooks first),
// reports the pod's terminal phase (a pod kept by a finalizer must not look Running), removes
// its sandbox (which runs CNI DEL) and then deletes the pod object for good.
func (m *Manager) terminate(ctx context.Context, pod *corev1.Pod) error {
	codes, err := m.stopContainers(ctx, pod, gracePeriod(pod))
	if err != nil {
		return err
	}
	// An evicted pod keeps the status its eviction wrote.
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && m.eviction(pod.UID) == nil {
		phase := corev1.PodSucceeded
		for _, c := range pod.Spec.Containers {
			if code, ok := codes[c.Name]; !ok || code != 0 {
				phase = corev1.PodFailed
			}
		}
		if err := m.writeTerminal(ctx, pod, codes, phase, "", ""); err != nil {
			return err
		}
	}
	if err := m.stopAll(ctx, pod.UID, 0, pod); err != nil {
		return err
	}
	m.forgetEviction(pod.UID, "")
	err = m.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// stopContainers stops the running containers of the pod's sandboxes within grace seconds,
// each after its preStop hook, and returns every container's exit code by name.
func (m *Manager) stopContainers(ctx context.Context, pod *corev1.Pod, grace int64) (map[string]int32, error) {
	resp, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pod.UID)}}})
	if err != nil {
		return nil, err
	}
	specs := map[string]corev1.Container{}
	for _, c := range pod.Spec.Containers {
		specs[c.Name] = c
	}
	codes := map[string]int32{}
	var mu sync.Mutex
	for _, sb := range resp.Items {
		list, err := m.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb.Id}})
		if err != nil {
			return nil, err
		}
		// The containers first (their preStop hooks may need the sidecars), then the
		// sidecars and whatever else runs, as upstream orders termination.
		var first, then []*runtimeapi.Container
		for _, c := range list.Containers {
			if _, ok := specs[c.Metadata.Name]; ok {
				first = append(first, c)
			} else {
				then = append(then, c)
			}
		}
		for _, group := range [][]*runtimeapi.Container{first, then} {
			var wg sync.WaitGroup
			for _, c := range group {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
						m.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Metadata.Name)
						m.stopContainer(ctx, pod, m.containerSpec(pod, c.Metadata.Name), c.Id, grace)
					}
					if s, err := m.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id}); err == nil {
						mu.Lock()
						if prev, ok := codes[c.Metadata.Name]; !ok || prev == 0 {
							codes[c.Metadata.Name] = s.Status.ExitCode
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
		}
	}
	return codes, nil
}

// containerSpec is the pod's container (regular, init or ephemeral) of that name.
func (m *Manager) containerSpec(pod *corev1.Pod, name string) corev1.Container {
	if c := downward.ContainerByName(pod, name); c != nil {
		return *c
	}
	for _, ec := range pod.Spec.EphemeralContainers {
		if ec.Name == name {
			return corev1.Container(ec.EphemeralContainerCommon)
		}
	}
	return corev1.Container{Name: name}
}

// writeTerminal reports the pod finished: phase (with reason and message, if any), every
// container terminated with its exit code, nothing ready.
func (m *Manager) writeTerminal(ctx context.Context, pod *corev1.Pod, codes map[string]int32, phase corev1.PodPhase, reason, message string, conds ...corev1.PodCondition) error {
	err := m.writeTerminalStrict(ctx, pod, codes, phase, reason, message, conds...)
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// writeTerminalStrict is writeTerminal that returns a conflict, for a caller that retries
// over a fresh copy.
func (m *Manager) writeTerminalStrict(ctx context.Context, pod *corev1.Pod, codes map[string]int32, phase corev1.PodPhase, reason, message string, conds ...corev1.PodCondition) error {
	if isStatic(pod) {
		return nil
	}
	cp := pod.DeepCopy()
	cp.Status.Phase, cp.Status.Reason, cp.Status.Message = phase, reason, message
	now := metav1.Now()
	for i := range cp.Status.ContainerStatuses {
		cs := &cp.Status.ContainerStatuses[i]
		code, ok := codes[cs.Name]
		if !ok {
			code = 137
		}
		if cs.State.Terminated == nil {
			r := "Error"
			if code == 0 {
				r = "Completed"
			}
			started := now
			if cs.State.Running != nil {
				started = cs.State.Running.StartedAt
			}
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: r,
				StartedAt: started, FinishedAt: now, ContainerID: cs.ContainerID}}
		}
		cs.Ready = false
		cs.Started = ptr.To(false)
	}
	setCond(&cp.Status, corev1.ContainersReady, false)
	setCond(&cp.Status, corev1.PodReady, false)
	for _, c := range conds {
		setCondReason(&cp.Status, c.Type, c.Status == corev1.ConditionTrue, c.Reason, c.Message)
	}
	_, err := m.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// stopAll stops the pod's containers (without hooks: the pod is gone or being replaced) and
// removes its sandboxes, cgroup, volumes and bookkeeping.
func (m *Manager) stopAll(ctx context.Context, uid types.UID, grace int64, pod *corev1.Pod) error {
	resp, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(uid)}}})
	if err != nil {
		return err
	}
	for _, sb := range resp.Items {
		list, err := m.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb.Id}})
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		for _, c := range list.Containers {
			if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			if pod != nil {
				m.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Metadata.Name)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = m.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.Id, Timeout: grace})
			}()
		}
		wg.Wait()
		if _, err := m.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			return err
		}
		if _, err := m.runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			return err
		}
	}
	if err := cgroups.Remove(m.cgroupMounts, m.opts.CgroupRoot, string(uid)); err != nil {
		m.log.Warn("pod cgroup", "uid", uid, "err", err)
	}
	m.releaseCPUs(ctx, uid)
	_ = m.syncQOS(nil, false)
	m.prober.forget(string(uid))
	if m.opts.Volumes != nil {
		m.opts.Volumes.Cleanup(string(uid))
	}
	if m.opts.PodsDir != "" {
		// Only what the pod manager wrote: the volumes (a tmpfs among them) are the volume
		// manager's to remove.
		for _, name := range []string{"etc-hosts", "etc-hosts.tmp", "containers"} {
			_ = os.RemoveAll(filepath.Join(m.podDir(uid), name))
		}
		_ = os.Remove(m.podDir(uid)) // if nothing else is left
	}
	m.mu.Lock()
	delete(m.prepared, uid)
	delete(m.hosts, uid)
	for k := range m.backoff {
		if strings.HasPrefix(k, string(uid)) {
			delete(m.backoff, k)
			delete(m.delay, k)
		}
	}
	for k := range m.startErrs {
		if strings.HasPrefix(k, string(uid)) {
			delete(m.startErrs, k)
		}
	}
	for k := range m.applied {
		if strings.HasPrefix(k, string(uid)) {
			delete(m.applied, k)
		}
	}
	delete(m.resizePending, uid)
	for k := range m.allocated {
		if strings.HasPrefix(k, string(uid)+"/") {
			delete(m.allocated, k)
		}
	}
	m.mu.Unlock()
	return nil
}

// stopSandboxes stops a pod's ready sandboxes, which runs CNI DEL and frees the address.
func (m *Manager) stopSandboxes(ctx context.Context, uid types.UID) error {
	resp, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(uid)}}})
	if err != nil {
		return err
	}
	for _, sb := range resp.Items {
		if _, err := m.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			return err
		}
	}
	return nil
}

// cleanupOrphans removes sandboxes of a pod that is gone from the API (deleted with grace 0).
func (m *Manager) cleanupOrphans(ctx context.Context, ns, name string) error {
	resp, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": name}}})
	if err != nil {
		return err
	}
	for _, sb := range resp.Items {
		if err := m.stopAll(ctx, types.UID(sb.Metadata.Uid), 0, nil); err != nil {
			return err
		}
	}
	return nil
}
