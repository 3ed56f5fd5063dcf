package pods

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
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
