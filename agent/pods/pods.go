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
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
	"log/slog"
	"path/filepath"
	"sync"
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
	"github.com/skiff-sh/skiff/agent/netnsdial"
	"github.com/skiff-sh/skiff/agent/volumes"
	"github.com/skiff-sh/skiff/controlplane/controllers/loop"
)

// Options configure the pod manager.
type Options struct {
	NodeName string
	// HostIP is the node's address, reported as status.hostIP.
	HostIP string
	// PodLogDir is the root of pod logs (/var/log/pods).
	PodLogDir string
	// ResyncPeriod is how often each pod's containers are checked (2 s).
	ResyncPeriod time.Duration
	// Netns is the runtime's network namespace, from which probes reach pods ("" for here).
	Netns string
	// CgroupRoot is the parent of every pod cgroup (cgroups.DefaultRoot).
	CgroupRoot string
	// Volumes materializes pod volumes; nil runs containers without them.
	Volumes *volumes.Manager
	// ClusterDNS are the cluster DNS servers' IPs (the kubelet's --cluster-dns), the only
	// nameservers of ClusterFirst pods; none makes those pods use the host's resolv.conf.
	ClusterDNS []string
	// ClusterDomain is the cluster's DNS domain (--cluster-domain; "" means cluster.local).
	ClusterDomain string
	// ResolvConf is the host resolver configuration Default-policy pods get (--resolv-conf;
	// "" means /etc/resolv.conf); a missing file is an empty one.
	ResolvConf string
	// Informers, if set, is the agent's shared factory (else the manager watches Services
	// on its own).
	Informers *sharedinformers.Shared
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

	staticMu sync.Mutex
	static   map[string]*corev1.Pod // namespace/name -> static pod from a manifest file
}

// New builds a manager over CRI clients.
func New(client kubernetes.Interface, rt runtimeapi.RuntimeServiceClient, img runtimeapi.ImageServiceClient, o Options, log *slog.Logger) *Manager {
	if o.CgroupRoot == "" {
		o.CgroupRoot = cgroups.DefaultRoot
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = 2 * time.Second
	}
	if o.PodLogDir == "" {
		o.PodLogDir = "/var/log/pods"
	}
	b := record.NewBroadcaster()
	m := &Manager{client: client, runtime: rt, images: img, opts: o, log: log.With("component", "pods"), events: b,
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: o.NodeName}),
		backoff:  map[string]time.Time{}, delay: map[string]time.Duration{}}
	m.prober = newProber(rt, netnsdial.Dialer(o.Netns, 5*time.Second))
	m.prepared = map[types.UID]time.Time{}
	m.static = map[string]*corev1.Pod{}
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
	go func() {
		t := time.NewTicker(m.opts.ResyncPeriod)
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
	if pod.DeletionTimestamp != nil {
		return m.terminate(ctx, pod)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		// A finished pod keeps its containers (and logs) until it is deleted, but gives its
		// network back at once, as the kubelet does.
		return m.stopSandboxes(ctx, pod.UID)
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

// sandboxConfig is the pod's sandbox config, its resolver configuration dns (see dnsConfig).
func sandboxConfig(p *corev1.Pod, logRoot, cgroupRoot string, dns *runtimeapi.DNSConfig) *runtimeapi.PodSandboxConfig {
	hostname := p.Name
	if p.Spec.Hostname != "" {
		hostname = p.Spec.Hostname
	}
	nsMode := runtimeapi.NamespaceMode_POD
	if p.Spec.HostNetwork {
		nsMode = runtimeapi.NamespaceMode_NODE
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: string(p.UID)},
		Hostname:     hostname,
		LogDirectory: logDir(logRoot, p),
		DnsConfig:    dns,
		Labels: map[string]string{"io.kubernetes.pod.name": p.Name, "io.kubernetes.pod.namespace": p.Namespace,
			"io.kubernetes.pod.uid": string(p.UID)},
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: cgroups.Parent(cgroupRoot, string(p.UID)), SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: nsMode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}}},
	}
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

// run makes the pod's sandbox and containers exist and reports its status.
func (m *Manager) run(ctx context.Context, pod *corev1.Pod) error {
	if err := m.prepareVolumes(ctx, pod); err != nil {
		return m.writeStatus(ctx, pod, nil, nil, "ContainerCreating", nil)
	}
	sb, err := m.sandbox(ctx, pod.UID)
	if err != nil {
		return err
	}
	// The DNS config matters when the sandbox is made (the runtime writes its resolv.conf then);
	// containers of an existing sandbox start without it if it cannot be formed now.
	dns, dnsWarns, dnsErr := podDNSConfig(pod, m.opts)
	cfg := sandboxConfig(pod, m.opts.PodLogDir, m.opts.CgroupRoot, dns)
	if sb == nil {
		if dnsErr != nil {
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to generate sandbox config: %v", dnsErr)
			return m.writeStatus(ctx, pod, nil, nil, "ContainerCreating", nil)
		}
		for _, w := range dnsWarns {
			m.recorder.Event(pod, corev1.EventTypeWarning, w.Reason, w.Message)
		}
		resp, err := m.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if err != nil {
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			return m.writeStatus(ctx, pod, nil, nil, "ContainerCreating", nil)
		}
		sb = &runtimeapi.PodSandbox{Id: resp.PodSandboxId}
	}
	st, err := m.runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id})
	if err != nil {
		return err
	}
	latest, err := m.latestContainers(ctx, sb.Id)
	if err != nil {
		return err
	}
	// A container whose image is not there waits with the pull's reason (ErrImagePull,
	// ImagePullBackOff, ...), as the kubelet reports it.
	imageErrs := map[string]*imagePullError{}
	imageErr := func(name string, err error) bool {
		var pe *imagePullError
		if errors.As(err, &pe) {
			imageErrs[name] = pe
		}
		return pe != nil
	}
	// Init containers run one after another to completion.
	for _, c := range pod.Spec.InitContainers {
		cur := latest[c.Name]
		if cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			s, err := m.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cur.Id})
			if err == nil && s.Status.ExitCode == 0 {
				continue
			}
		}
		if cur == nil || cur.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if err := m.start(ctx, pod, sb.Id, cfg, c, cur); err != nil && !imageErr(c.Name, err) {
				return err
			}
		}
		return m.writeStatus(ctx, pod, st.Status, latest, "PodInitializing", imageErrs)
	}
	started := false
	for _, c := range pod.Spec.Containers {
		cur := latest[c.Name]
		switch {
		case cur == nil:
			started = true
			if err := m.start(ctx, pod, sb.Id, cfg, c, nil); err != nil && !imageErr(c.Name, err) {
				m.log.Warn("start container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "err", err)
			}
		case cur.State == runtimeapi.ContainerState_CONTAINER_EXITED && m.shouldRestart(ctx, pod, cur):
			started = true
			if err := m.start(ctx, pod, sb.Id, cfg, c, cur); err != nil && !imageErr(c.Name, err) {
				m.log.Warn("restart container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "err", err)
			}
		}
	}
	// The resync visits every pod every 2 s: list again only when this sync changed something.
	if started {
		if latest, err = m.latestContainers(ctx, sb.Id); err != nil {
			return err
		}
	}
	for _, c := range pod.Spec.Containers {
		if rc := latest[c.Name]; m.probe(ctx, pod, c, rc) {
			grace := int64(30)
			if pod.Spec.TerminationGracePeriodSeconds != nil {
				grace = *pod.Spec.TerminationGracePeriodSeconds
			}
			_, _ = m.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: rc.Id, Timeout: grace})
			m.loop.Add(pod.Namespace + "/" + pod.Name)
		}
	}
	return m.writeStatus(ctx, pod, st.Status, latest, "", imageErrs)
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

// shouldRestart applies restartPolicy and upstream's crash backoff (10 s doubling to 5 min).
func (m *Manager) shouldRestart(ctx context.Context, pod *corev1.Pod, c *runtimeapi.Container) bool {
	s, err := m.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
	if err != nil {
		return false
	}
	switch pod.Spec.RestartPolicy {
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

// imagePullError is why a container's image is not there to run; its Reason and Message are the
// container's waiting state, as the kubelet's: ErrImagePull, ImagePullBackOff, ErrImageNeverPull
// or ImageInspectError.
type imagePullError struct {
	Reason, Message string
}

func (e *imagePullError) Error() string { return e.Reason + ": " + e.Message }

// ensureImage makes the container's image present per its imagePullPolicy, with the kubelet's
// events: Pulling, then Pulled ("Successfully pulled image ... Image size: N bytes.") or a
// Warning Failed "Failed to pull image ..." and "Error: ErrImagePull"; while the pod's pull of
// the image backs off, BackOff "Back-off pulling image ..." and "Error: ImagePullBackOff". Its
// error is an *imagePullError.
func (m *Manager) ensureImage(ctx context.Context, pod *corev1.Pod, c corev1.Container) error {
	st, err := m.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: c.Image}})
	if err != nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %v", c.Image, err)
		m.recorder.Event(pod, corev1.EventTypeWarning, "InspectFailed", msg)
		return m.imageFailed(pod, "ImageInspectError", msg)
	}
	present := st.Image != nil
	if present && c.ImagePullPolicy != corev1.PullAlways {
		m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", c.Image)
		return nil
	}
	if c.ImagePullPolicy == corev1.PullNever {
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		m.recorder.Event(pod, corev1.EventTypeWarning, "ErrImageNeverPull", msg)
		return m.imageFailed(pod, "ErrImageNeverPull", msg)
	}
	key := pullBackoffKey(pod, c.Image)
	if m.inPullBackoff(key, time.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		m.recorder.Event(pod, corev1.EventTypeNormal, "BackOff", msg)
		return m.imageFailed(pod, "ImagePullBackOff", msg)
	}
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulling", "Pulling image %q", c.Image)
	start := time.Now()
	if _, err := m.images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: c.Image}}); err != nil {
		if present {
			// Always, but no registry: run what is here, as a kubelet with a cached image would
			// after a failed pull? Upstream fails; skiff's nodes reach no registry by design.
			m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", c.Image)
			return nil
		}
		err = pullError(err)
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", c.Image, err)
		m.pullFailed(key, time.Now())
		return m.imageFailed(pod, "ErrImagePull", err.Error())
	}
	// The size is the image's as the runtime reports it after the pull (best effort, as upstream).
	var size uint64
	if st, err := m.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: c.Image}}); err == nil && st.Image != nil {
		size = st.Image.GetSize()
	}
	m.pullSucceeded(key)
	// Upstream's first duration is the pull's own, the second includes waiting in the kubelet's
	// pull queue; skiff pulls at once, so the two are the same.
	d := time.Since(start).Truncate(time.Millisecond)
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.",
		c.Image, d, d, size)
	return nil
}

// imageFailed records the kubelet's Warning Failed "Error: <reason>" of a container whose image
// is not there and returns the error carrying its waiting state.
func (m *Manager) imageFailed(pod *corev1.Pod, reason, msg string) error {
	m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %s", reason)
	return &imagePullError{Reason: reason, Message: msg}
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

// pullFailed starts or doubles key's backoff.
func (m *Manager) pullFailed(key string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.delay[key]
	if last := m.backoff[key].Add(-d); d == 0 || now.Sub(last) > 2*imagePullBackoffMax {
		d = imagePullBackoffInitial
	} else {
		d = min(d*2, imagePullBackoffMax)
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

func (m *Manager) start(ctx context.Context, pod *corev1.Pod, sandboxID string, sbCfg *runtimeapi.PodSandboxConfig, c corev1.Container, prev *runtimeapi.Container) error {
	if err := m.ensureImage(ctx, pod, c); err != nil {
		return err
	}
	attempt := uint32(0)
	if prev != nil {
		attempt = prev.Metadata.Attempt + 1
		_, _ = m.runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: prev.Id})
	}
	envs, err := m.containerEnv(ctx, pod, c)
	if err != nil {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return err
	}
	var mounts []*runtimeapi.Mount
	if m.opts.Volumes != nil {
		if mounts, err = m.opts.Volumes.Mounts(pod, c); err != nil {
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
			return err
		}
	}
	cfg := &runtimeapi.ContainerConfig{
		Mounts:     mounts,
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: attempt},
		Image:      &runtimeapi.ImageSpec{Image: c.Image},
		Command:    c.Command,
		Args:       c.Args,
		WorkingDir: c.WorkingDir,
		Envs:       envs,
		LogPath:    filepath.Join(c.Name, fmt.Sprintf("%d.log", attempt)),
		Labels: map[string]string{"io.kubernetes.pod.name": pod.Name, "io.kubernetes.pod.namespace": pod.Namespace,
			"io.kubernetes.pod.uid": string(pod.UID), "io.kubernetes.container.name": c.Name},
		Linux: &runtimeapi.LinuxContainerConfig{Resources: resources(c), SecurityContext: securityContext(pod, c)},
	}
	created, err := m.runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sbCfg})
	if err != nil {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return err
	}
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Created", "Created container %s", c.Name)
	if _, err := m.runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId}); err != nil {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return err
	}
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
	return nil
}

// terminate stops the pod's containers within the grace period, removes its sandbox (which
// runs CNI DEL) and then deletes the pod object for good.
func (m *Manager) terminate(ctx context.Context, pod *corev1.Pod) error {
	grace := int64(30)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = *pod.DeletionGracePeriodSeconds
	}
	if err := m.stopAll(ctx, pod.UID, grace, pod); err != nil {
		return err
	}
	err := m.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

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
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING && pod != nil {
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
	if err := cgroups.Remove(cgroups.Mounts(), m.opts.CgroupRoot, string(uid)); err != nil {
		m.log.Warn("pod cgroup", "uid", uid, "err", err)
	}
	m.prober.forget(string(uid))
	if m.opts.Volumes != nil {
		m.opts.Volumes.Cleanup(string(uid))
	}
	m.mu.Lock()
	delete(m.prepared, uid)
	for k := range m.backoff {
		if len(k) > len(uid) && k[:len(uid)] == string(uid) {
			delete(m.backoff, k)
			delete(m.delay, k)
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
