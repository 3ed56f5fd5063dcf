package pods

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// hostnameMax is the kernel's limit (64 bytes with the terminating NUL).
const hostnameMax = 63

// podHostname is the pod's hostname and, with a subdomain, its domain, as the kubelet makes
// them: spec.hostname or the pod's name, cut to 63 characters without a trailing '-' or '.'
// (a longer name would fail sethostname), and "<subdomain>.<namespace>.svc.<cluster domain>".
func podHostname(pod *corev1.Pod, clusterDomain string) (hostname, domain string, err error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
		h, err := truncateHostname(pod.Name, *o)
		return h, "", err
	}
	hostname = pod.Name
	if h := pod.Spec.Hostname; h != "" {
		if msgs := validation.IsDNS1123Label(h); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", h, strings.Join(msgs, ";"))
		}
		hostname = h
	}
	if hostname, err = truncateHostname(pod.Name, hostname); err != nil {
		return "", "", err
	}
	if sub := pod.Spec.Subdomain; sub != "" {
		if msgs := validation.IsDNS1123Label(sub); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", sub, strings.Join(msgs, ";"))
		}
		if clusterDomain == "" {
			clusterDomain = "cluster.local"
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", sub, pod.Namespace, clusterDomain)
	}
	return hostname, domain, nil
}

func truncateHostname(podName, hostname string) (string, error) {
	if len(hostname) <= hostnameMax {
		return hostname, nil
	}
	cut := strings.TrimRight(hostname[:hostnameMax], "-.")
	if cut == "" {
		return "", fmt.Errorf("hostname for pod %q was invalid: %q", podName, hostname)
	}
	return cut, nil
}

const (
	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// hostsFile is the /etc/hosts every container of the pod gets, as the kubelet writes it: for a
// pod network, localhost, the IPv6 names and the pod's addresses under its hostname; for a host
// network pod, the node's own file. hostAliases are appended to both.
func hostsFile(pod *corev1.Pod, podIPs []string, hostname, domain string, nodeHosts []byte) []byte {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		b.WriteString(managedHostsHeaderHostNetwork)
		b.Write(nodeHosts)
	} else {
		b.WriteString(managedHostsHeader)
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		for _, ip := range podIPs {
			if domain != "" {
				fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes()
}

// writeHostsFile writes the pod's hosts file under dir (the pod's directory) and returns its
// path; a host network pod's starts from the node's /etc/hosts.
func writeHostsFile(dir string, pod *corev1.Pod, podIPs []string, hostname, domain string) (string, error) {
	var node []byte
	if pod.Spec.HostNetwork {
		b, err := os.ReadFile("/etc/hosts")
		if err != nil && !os.IsNotExist(err) {
			return "", err
		}
		node = b
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "etc-hosts")
	content := hostsFile(pod, podIPs, hostname, domain, node)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, content) {
		return p, nil
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		return "", err
	}
	return p, os.Rename(tmp, p)
}

// mountsHosts says whether the container mounts its own /etc/hosts (then the kubelet's is not
// mounted over it).
func mountsHosts(c corev1.Container) bool {
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == "/etc/hosts" {
			return true
		}
	}
	return false
}

// sysctls are the pod's sysctls for its sandbox, names normalized to dots as the kubelet does
// ("kernel/shm_rmid_forced" is kernel.shm_rmid_forced; a dot inside a slash-separated name is a
// slash: "net/ipv4/conf/eno2.100/rp_filter" is net.ipv4.conf.eno2/100.rp_filter).
func sysctls(pod *corev1.Pod) map[string]string {
	if pod.Spec.SecurityContext == nil || len(pod.Spec.SecurityContext.Sysctls) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		out[normalizeSysctl(s.Name)] = s.Value
	}
	return out
}

func normalizeSysctl(name string) string {
	// Dotted already, or slash-separated with no dots: the separator decides, as upstream.
	first := strings.IndexAny(name, "./")
	if first < 0 || name[first] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
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

// sandboxIPs are the sandbox's addresses, the node's primary family first (containerd puts
// IPv4 first whatever the cluster's order); a host network pod's are the node's.
func (m *Manager) sandboxIPs(pod *corev1.Pod, st *runtimeapi.PodSandboxStatus) []string {
	if pod.Spec.HostNetwork {
		return m.opts.HostIPs
	}
	if st == nil || st.Network == nil || st.Network.Ip == "" {
		return nil
	}
	ips := []string{st.Network.Ip}
	for _, a := range st.Network.AdditionalIps {
		ips = append(ips, a.Ip)
	}
	return primaryFirst(ips, m.hostIP())
}

// hostIP is the node's primary address ("" when it has none).
func (m *Manager) hostIP() string {
	if len(m.opts.HostIPs) == 0 {
		return ""
	}
	return m.opts.HostIPs[0]
}

// primaryFirst moves the first address of primary's family to the front, keeping the others'
// order.
func primaryFirst(ips []string, primary string) []string {
	p, err := netip.ParseAddr(primary)
	if err != nil {
		return ips
	}
	for i, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is4() == p.Is4() {
			if i == 0 {
				return ips
			}
			out := append([]string{ip}, ips[:i]...)
			return append(out, ips[i+1:]...)
		}
	}
	return ips
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

// createSandbox makes the pod's sandbox, its cgroup first, under the sandbox start backoff
// (a failure waits 10 s doubling to 5 min, so a start that cannot succeed neither spins nor
// takes a new address each time). When it cannot now (configErr, the backoff, a failure) it
// writes the pod's ContainerCreating status and returns nil and that write's error.
func (m *Manager) createSandbox(ctx context.Context, pod *corev1.Pod, cfg *runtimeapi.PodSandboxConfig, configErr error, dnsWarns []dnsWarning) (*runtimeapi.PodSandbox, error) {
	creating := func() (*runtimeapi.PodSandbox, error) {
		return nil, m.writeStatus(ctx, pod, nil, nil, "ContainerCreating", nil)
	}
	if configErr != nil {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to generate sandbox config: %v", configErr)
		return creating()
	}
	key := string(pod.UID) + "/sandbox"
	if m.backoffs.blocked(key, time.Now()) {
		return creating()
	}
	for _, w := range dnsWarns {
		m.recorder.Event(pod, corev1.EventTypeWarning, w.Reason, w.Message)
	}
	if err := m.ensurePodCgroup(pod); err != nil {
		m.backoffs.failed(key, time.Now(), startBackoffInitial, startBackoffMax)
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create the pod's cgroup: %v", err)
		return creating()
	}
	handler, err := m.runtimeHandler(ctx, pod)
	var resp *runtimeapi.RunPodSandboxResponse
	if err == nil {
		resp, err = m.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	}
	if err != nil {
		m.backoffs.failed(key, time.Now(), startBackoffInitial, startBackoffMax)
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", pullError(err))
		return creating()
	}
	m.backoffs.succeeded(key)
	return &runtimeapi.PodSandbox{Id: resp.PodSandboxId}, nil
}
