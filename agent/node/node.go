// Package node registers the agent's Node object and keeps it alive: addresses, capacity,
// node info and conditions at start, and a Lease in kube-node-lease renewed every 10 s (40 s
// duration) that the node-lifecycle controller watches.
package node

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/agent/eviction"
	"github.com/skiff-sh/skiff/internal/version"
)

// Options describe the node.
type Options struct {
	Name string
	// InternalIPs are the node's addresses, one per family, the primary first.
	InternalIPs []string
	// RuntimeVersion is "containerd://<version>".
	RuntimeVersion string
	// Taints are set at registration (control-plane nodes: node-role.kubernetes.io/control-plane:NoSchedule).
	Taints []corev1.Taint
	// Labels are added to the standard ones.
	Labels map[string]string
	// Annotations are set at registration (skiff.sh/local-path-root).
	Annotations map[string]string
	// MaxPods is the pods capacity (110).
	MaxPods int
	// APIPort is the agent API's port (10250), published as daemonEndpoints.kubeletEndpoint.
	APIPort int
	// Health, if set, says why the agent cannot do its job (a part of it is down): the node
	// is then NotReady with that message, as the kubelet reports a broken runtime.
	Health func() error
	// NodeFs is a directory on the node's file system (the agent's data directory), whose
	// size is the node's ephemeral storage; Reserved (--kube-reserved, --system-reserved)
	// and EvictionHard are what allocatable keeps back.
	NodeFs       string
	Reserved     []corev1.ResourceList
	EvictionHard []eviction.Threshold
	// Pressure, if set, is the node's pressure conditions now (agent/pressure), and
	// PressureChanged receives when they change; without them the node reports none.
	Pressure        func() eviction.Conditions
	PressureChanged <-chan struct{}
	// Conditions, if set, are further conditions other parts report (the service maps'
	// SkiffServiceMapsFull), posted with the others.
	Conditions func() []corev1.NodeCondition
}

// Capacity reads CPUs and memory of this machine, and the size of the file system holding
// nodeFs ("/" when empty) as its ephemeral storage, as the kubelet reports its root
// directory's.
func Capacity(maxPods int, nodeFs string) corev1.ResourceList {
	mem := int64(0)
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(fields[1], 10, 64)
				mem = kb * 1024
			}
		}
		f.Close()
	}
	out := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	if nodeFs == "" {
		nodeFs = "/"
	}
	var st unix.Statfs_t
	if err := unix.Statfs(nodeFs, &st); err == nil {
		out[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(st.Blocks)*st.Bsize, resource.BinarySI)
	}
	return out
}

// Allocatable is what the scheduler may fill the node with, as the kubelet computes it: the
// capacity less what is reserved for the node's own daemons (--kube-reserved and
// --system-reserved) and less what the hard eviction thresholds of memory.available and
// nodefs.available hold back, so that pods never push the node to its eviction threshold.
func Allocatable(capacity corev1.ResourceList, reserved []corev1.ResourceList, hard []eviction.Threshold) corev1.ResourceList {
	out := PodsLimit(capacity, reserved...)
	for _, th := range hard {
		var name corev1.ResourceName
		switch th.Signal {
		case eviction.MemoryAvailable:
			name = corev1.ResourceMemory
		case eviction.NodeFsAvailable:
			name = corev1.ResourceEphemeralStorage
		default:
			continue
		}
		q, ok := out[name]
		if !ok {
			continue
		}
		// Percentages are of the capacity, as the kubelet's.
		left := q.Value() - th.Min(capacity.Name(name, resource.BinarySI).Value())
		if left < 0 {
			left = 0
		}
		out[name] = *resource.NewQuantity(left, resource.BinarySI)
	}
	return out
}

func kernelVersion() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

func osImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "Linux"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}

// Status is the node's status as the agent reports it.
func Status(o Options) corev1.NodeStatus {
	if o.MaxPods == 0 {
		o.MaxPods = 110
	}
	capacity := Capacity(o.MaxPods, o.NodeFs)
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	var pressure eviction.Conditions
	if o.Pressure != nil {
		pressure = o.Pressure()
	}
	// The kubelet's reasons and messages for each pressure condition, off and on.
	pressureCond := func(t corev1.NodeConditionType, offReason, offMsg, onReason, onMsg string) corev1.NodeCondition {
		if pressure[t] {
			return cond(t, corev1.ConditionTrue, onReason, onMsg)
		}
		return cond(t, corev1.ConditionFalse, offReason, offMsg)
	}
	readyCond := cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "skiff agent is posting ready status")
	if o.Health != nil {
		if err := o.Health(); err != nil {
			readyCond = cond(corev1.NodeReady, corev1.ConditionFalse, "KubeletNotReady", "skiff agent: "+err.Error())
		}
	}
	conditions := []corev1.NodeCondition{
		pressureCond(corev1.NodeMemoryPressure, "KubeletHasSufficientMemory", "kubelet has sufficient memory available",
			"KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
		pressureCond(corev1.NodeDiskPressure, "KubeletHasNoDiskPressure", "kubelet has no disk pressure",
			"KubeletHasDiskPressure", "kubelet has disk pressure"),
		pressureCond(corev1.NodePIDPressure, "KubeletHasSufficientPID", "kubelet has sufficient PID available",
			"KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
		cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "SkiffCNIReady", "skiff-cni is installed and pod addresses come from the node's block"),
		readyCond,
	}
	if o.Conditions != nil {
		conditions = append(conditions, o.Conditions()...)
	}
	return corev1.NodeStatus{
		Capacity:        capacity,
		Allocatable:     Allocatable(capacity, o.Reserved, o.EvictionHard),
		Addresses:       addresses(o),
		Conditions:      conditions,
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(o.APIPort)}},
		NodeInfo: corev1.NodeSystemInfo{
			KernelVersion: kernelVersion(), OSImage: osImage(), OperatingSystem: "linux", Architecture: runtime.GOARCH,
			ContainerRuntimeVersion: o.RuntimeVersion, KubeletVersion: kubeletVersion(), KubeProxyVersion: "",
		},
	}
}

func kubeletVersion() string {
	v := version.String()
	if i := strings.Index(v, "Kubernetes API "); i >= 0 {
		rest := v[i+len("Kubernetes API "):]
		if j := strings.IndexAny(rest, ",)"); j > 0 {
			return rest[:j]
		}
	}
	return "v0.0.0"
}

// Register creates the Node, or updates an existing one's labels and status (an agent
// restart), and returns it.
func Register(ctx context.Context, c kubernetes.Interface, o Options, log *slog.Logger) (*corev1.Node, error) {
	labels := map[string]string{
		"kubernetes.io/hostname": o.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH,
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": runtime.GOARCH,
	}
	for k, v := range o.Labels {
		labels[k] = v
	}
	var out *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			n, err = c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: labels},
				Spec: corev1.NodeSpec{Taints: o.Taints}}, metav1.CreateOptions{})
			if err == nil {
				log.Info("node registered", "node", o.Name)
			}
		}
		if err != nil {
			return err
		}
		n = n.DeepCopy()
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for k, v := range labels {
			n.Labels[k] = v
		}
		if len(o.Annotations) > 0 && n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		for k, v := range o.Annotations {
			n.Annotations[k] = v
		}
		// Other writers (nodeipam, node-lifecycle) change the node meanwhile: conflicts retry.
		if n, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		st := Status(o)
		st.Conditions = MergeConditions(n.Status.Conditions, st.Conditions)
		n.Status = st
		out, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("register node %s: %w", o.Name, err)
	}
	return out, nil
}

// Heartbeat renews the node's Lease in kube-node-lease every 10 s (40 s duration, owned by
// the Node so it goes with it), with component-helpers' lease controller as the kubelet does,
// and re-posts the conditions every minute and whenever the agent's health changes, until
// ctx ends.
func Heartbeat(ctx context.Context, c kubernetes.Interface, o Options, log *slog.Logger) {
	lc := lease.NewController(clock.RealClock{}, c, o.Name, 40, nil, 10*time.Second, o.Name, corev1.NamespaceNodeLease,
		func(l *coordinationv1.Lease) error {
			if len(l.OwnerReferences) > 0 {
				return nil
			}
			n, err := c.CoreV1().Nodes().Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
			return nil
		})
	go lc.Run(ctx)
	lastStatus := time.Now()
	health := func() string {
		if o.Health == nil {
			return ""
		}
		if err := o.Health(); err != nil {
			return err.Error()
		}
		return ""
	}
	pressure := func() string {
		if o.Pressure == nil {
			return ""
		}
		return fmt.Sprint(o.Pressure().Pressures())
	}
	lastHealth, lastPressure := health(), pressure()
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		// Re-post the conditions every minute, at once when the agent's health or the node's
		// pressure changed, and when the control plane marked the node otherwise while this
		// agent was unreachable.
		h, p := health(), pressure()
		if n, err := c.CoreV1().Nodes().Get(ctx, o.Name, metav1.GetOptions{}); err == nil &&
			(time.Since(lastStatus) > time.Minute || h != lastHealth || p != lastPressure || ready(n) != (h == "")) {
			n.Status.Conditions = MergeConditions(n.Status.Conditions, Status(o).Conditions)
			if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err == nil {
				lastStatus, lastHealth, lastPressure = time.Now(), h, p
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-o.PressureChanged:
		}
	}
}

// MergeConditions is the new conditions, each keeping its old lastTransitionTime when its
// status did not change (the heartbeat time moves on; the transition stays when it happened).
func MergeConditions(old, next []corev1.NodeCondition) []corev1.NodeCondition {
	out := make([]corev1.NodeCondition, len(next))
	for i, c := range next {
		for _, o := range old {
			if o.Type == c.Type && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		out[i] = c
	}
	return out
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// addresses are the node's InternalIPs, the primary first (upstream's order: a dual-stack
// node's first InternalIP is the family its hostIPs[0] and the API server's proxying use),
// and its hostname.
func addresses(o Options) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for _, ip := range o.InternalIPs {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: o.Name})
}
