package pods

// Pod DNS, as the kubelet forms it (pkg/kubelet/network/dns): the pod's dnsPolicy picks a
// base (the cluster's DNS, the host's resolv.conf, or nothing), the pod's dnsConfig is merged
// on top, and the result is cut to what resolvers accept. The runtime writes it as the
// sandbox's resolv.conf.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

const (
	// DefaultClusterDomain is the cluster domain when none is configured.
	DefaultClusterDomain = "cluster.local"
	// DefaultResolvConf is the host resolver configuration read for Default-policy pods.
	DefaultResolvConf = "/etc/resolv.conf"

	// Limits as upstream's API validation (MaxDNSNameservers, and the expanded DNS config
	// limits that are GA since 1.28).
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	// A search path longer than a DNS-1123 subdomain makes some glibc versions abort.
	maxDNSSearchPathChars = 253
	// maxResolvConfSize bounds how much of the host file is read, as upstream (10 MiB).
	maxResolvConfSize = 10 << 20
)

// DNSSettings is the node's cluster DNS: the kubelet's --cluster-dns and --cluster-domain.
type DNSSettings struct {
	// Servers are the cluster DNS servers' IPs; none makes ClusterFirst pods fall back to Default.
	Servers []string
	// Domain is the cluster domain; "" means DefaultClusterDomain.
	Domain string
}

// HostResolv is a parsed resolv.conf.
type HostResolv struct {
	Servers  []string
	Searches []string
	Options  []string
}

// dnsWarning is something the kubelet reports as a Warning event on the pod while forming
// its DNS config; the config is still usable.
type dnsWarning struct {
	Reason  string // MissingClusterDNS or DNSConfigForming, as upstream
	Message string
}

// dnsConfig returns the DNS config of the pod's sandbox. It reports, as warnings, what
// upstream reports as events (a ClusterFirst pod without cluster DNS servers, an unknown
// dnsPolicy, limits exceeded); the error is for a cluster DNS server that is not an IP.
func dnsConfig(pod *corev1.Pod, cluster DNSSettings, host HostResolv) (*runtimeapi.DNSConfig, []dnsWarning, error) {
	var warns []dnsWarning
	policy := pod.Spec.DNSPolicy
	switch policy {
	case "", corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone:
	default:
		// The API server rejects this; a static pod may still carry it. Upstream falls back too.
		warns = append(warns, dnsWarning{"DNSConfigForming", fmt.Sprintf("invalid dnsPolicy %q, falling back to the cluster DNS", policy)})
		policy = corev1.DNSClusterFirstWithHostNet
	}
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	if policy == corev1.DNSClusterFirst || policy == corev1.DNSClusterFirstWithHostNet {
		if len(cluster.Servers) == 0 {
			warns = append(warns, dnsWarning{"MissingClusterDNS", fmt.Sprintf(
				"node has no cluster DNS server configured and cannot create the pod using %q policy; falling back to %q policy",
				corev1.DNSClusterFirst, corev1.DNSDefault)})
			policy = corev1.DNSDefault
		}
		for _, s := range cluster.Servers {
			if _, err := netip.ParseAddr(s); err != nil {
				return nil, nil, fmt.Errorf("cluster DNS server %q is not an IP address", s)
			}
		}
	}

	var servers, searches, options []string
	switch policy {
	case corev1.DNSNone:
		// Nothing: the pod's dnsConfig supplies everything.
	case corev1.DNSDefault:
		servers, searches, options = host.Servers, host.Searches, host.Options
	default: // cluster first
		domain := cluster.Domain
		if domain == "" {
			domain = DefaultClusterDomain
		}
		servers = cluster.Servers
		searches = append([]string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}, host.Searches...)
		options = []string{"ndots:5"}
	}
	// The pod's dnsConfig is appended; the lists are fresh slices, never the inputs'.
	var podDNS corev1.PodDNSConfig
	if pod.Spec.DNSConfig != nil {
		podDNS = *pod.Spec.DNSConfig
	}
	servers = uniqueNonEmpty(servers, podDNS.Nameservers)
	searches = uniqueNonEmpty(searches, podDNS.Searches)
	options = mergeDNSOptions(options, podDNS.Options)

	if len(servers) > maxDNSNameservers {
		servers = servers[:maxDNSNameservers]
		warns = append(warns, dnsWarning{"DNSConfigForming", "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(servers, " ")})
	}
	var cut bool
	if searches, cut = fitSearches(searches); cut {
		warns = append(warns, dnsWarning{"DNSConfigForming", "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(searches, " ")})
	}
	return &runtimeapi.DNSConfig{Servers: servers, Searches: searches, Options: options}, warns, nil
}

// fitSearches cuts the search list to the limits: at most maxDNSSearchPaths paths, none
// longer than maxDNSSearchPathChars, the line at most maxDNSSearchListChars (dropping from
// the end). It reports whether anything was cut; an empty list is nil.
func fitSearches(searches []string) ([]string, bool) {
	cut := false
	if len(searches) > maxDNSSearchPaths {
		searches, cut = searches[:maxDNSSearchPaths], true
	}
	var out []string
	for _, s := range searches {
		if len(s) > maxDNSSearchPathChars {
			cut = true
			continue
		}
		out = append(out, s)
	}
	for len(out) > 0 && len(strings.Join(out, " ")) > maxDNSSearchListChars {
		out, cut = out[:len(out)-1], true
	}
	return out, cut
}

// mergeDNSOptions merges options by name ("name" or "name:value"): a later one replaces an
// earlier one's value in place, the pod's replacing the base's; new names are appended.
func mergeDNSOptions(base []string, pod []corev1.PodDNSConfigOption) []string {
	var names []string
	values := map[string]string{}
	set := func(name, value string) {
		if name == "" {
			return
		}
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = value
	}
	for _, o := range base {
		name, value, _ := strings.Cut(o, ":")
		set(name, value)
	}
	for _, o := range pod {
		set(o.Name, ptr.Deref(o.Value, ""))
	}
	var out []string
	for _, n := range names {
		if v := values[n]; v != "" {
			out = append(out, n+":"+v)
		} else {
			out = append(out, n)
		}
	}
	return out
}

// uniqueNonEmpty concatenates the lists into a new one without empty and repeated entries,
// keeping the first of each; nil if none is left.
func uniqueNonEmpty(lists ...[]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range lists {
		for _, s := range l {
			if s != "" && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// parseResolvConf parses a resolv.conf as glibc reads it: "nameserver" lines accumulate,
// "search" and "domain" lines replace the search list (the last one wins; "domain x" is the
// list [x]), "options" lines accumulate (a later value of an option replaces an earlier one).
// Lines starting with '#' or ';' are comments; unknown keywords and nameserver lines without
// an address are ignored. Search paths lose a trailing dot, as upstream.
func parseResolvConf(r io.Reader) (HostResolv, error) {
	var h HostResolv
	sc := bufio.NewScanner(io.LimitReader(r, maxResolvConfSize))
	sc.Buffer(make([]byte, 0, 4096), maxResolvConfSize)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		f := strings.Fields(line)
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				h.Servers = append(h.Servers, f[1])
			}
		case "search", "domain":
			args := f[1:]
			if f[0] == "domain" && len(args) > 1 {
				args = args[:1]
			}
			h.Searches = nil
			for _, s := range args {
				if s = strings.TrimSuffix(s, "."); s != "" {
					h.Searches = append(h.Searches, s)
				}
			}
		case "options":
			h.Options = append(h.Options, f[1:]...)
		}
	}
	if err := sc.Err(); err != nil {
		return HostResolv{}, err
	}
	h.Options = mergeDNSOptions(h.Options, nil)
	return h, nil
}

// hostResolvCache holds the host resolv.conf last read, re-read when the file changes.
var hostResolvCache struct {
	sync.Mutex
	path  string
	mod   time.Time
	size  int64
	value HostResolv
}

// readHostResolv returns the parsed resolv.conf at path; a missing file is an empty config.
func readHostResolv(path string) (HostResolv, error) {
	c := &hostResolvCache
	c.Lock()
	defer c.Unlock()
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		c.path = ""
		return HostResolv{}, nil
	}
	if err != nil {
		return HostResolv{}, err
	}
	if c.path == path && c.mod.Equal(fi.ModTime()) && c.size == fi.Size() {
		return c.value, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return HostResolv{}, nil
	}
	if err != nil {
		return HostResolv{}, err
	}
	defer f.Close()
	h, err := parseResolvConf(f)
	if err != nil {
		return HostResolv{}, fmt.Errorf("%s: %w", path, err)
	}
	c.path, c.mod, c.size, c.value = path, fi.ModTime(), fi.Size(), h
	return h, nil
}

// clusterDNSService is the addresses of kube-system/kube-dns (none while it does not exist).
func (m *Manager) clusterDNSService() []string {
	if m.services == nil {
		return nil
	}
	svc, err := m.services.Services(metav1.NamespaceSystem).Get("kube-dns")
	if err != nil || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil
	}
	if len(svc.Spec.ClusterIPs) > 0 {
		return svc.Spec.ClusterIPs
	}
	return []string{svc.Spec.ClusterIP}
}

// podDNSConfig forms the pod's DNS config from the manager's options.
func podDNSConfig(pod *corev1.Pod, o Options) (*runtimeapi.DNSConfig, []dnsWarning, error) {
	path := o.ResolvConf
	if path == "" {
		path = DefaultResolvConf
	}
	host, err := readHostResolv(path)
	if err != nil {
		return nil, nil, err
	}
	return dnsConfig(pod, DNSSettings{Servers: o.ClusterDNS, Domain: o.ClusterDomain}, host)
}
