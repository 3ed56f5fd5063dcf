package pods

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestDNSConfig(t *testing.T) {
	cluster := DNSSettings{Servers: []string{"10.96.0.10"}, Domain: "cluster.local"}
	host := HostResolv{Servers: []string{"192.168.1.1", "8.8.8.8"}, Searches: []string{"corp.example", "example.com"},
		Options: []string{"ndots:1", "timeout:2"}}
	clusterSearch := []string{"web.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	hostCfg := &runtimeapi.DNSConfig{Servers: host.Servers, Searches: host.Searches, Options: host.Options}
	clusterCfg := &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"},
		Searches: append(append([]string(nil), clusterSearch...), host.Searches...), Options: []string{"ndots:5"}}
	many := func(prefix string, n int) []string {
		var s []string
		for i := 0; i < n; i++ {
			s = append(s, fmt.Sprintf("%s%d", prefix, i))
		}
		return s
	}

	for _, tc := range []struct {
		name        string
		policy      corev1.DNSPolicy
		hostNetwork bool
		podDNS      *corev1.PodDNSConfig
		cluster     *DNSSettings // nil: cluster
		host        *HostResolv  // nil: host
		want        *runtimeapi.DNSConfig
		warn        []string // reasons
	}{
		{name: "empty policy is ClusterFirst", want: clusterCfg},
		{name: "ClusterFirst", policy: corev1.DNSClusterFirst, want: clusterCfg},
		{name: "ClusterFirst with hostNetwork is Default", policy: corev1.DNSClusterFirst, hostNetwork: true, want: hostCfg},
		{name: "empty policy with hostNetwork is Default", hostNetwork: true, want: hostCfg},
		{name: "ClusterFirstWithHostNet with hostNetwork", policy: corev1.DNSClusterFirstWithHostNet, hostNetwork: true, want: clusterCfg},
		{name: "ClusterFirstWithHostNet without hostNetwork", policy: corev1.DNSClusterFirstWithHostNet, want: clusterCfg},
		{name: "Default", policy: corev1.DNSDefault, want: hostCfg},
		{name: "Default with hostNetwork", policy: corev1.DNSDefault, hostNetwork: true, want: hostCfg},
		{name: "None without dnsConfig is empty", policy: corev1.DNSNone, want: &runtimeapi.DNSConfig{}},
		{name: "None with hostNetwork", policy: corev1.DNSNone, hostNetwork: true,
			podDNS: &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}},
			want:   &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}}},
		{name: "None takes everything from dnsConfig", policy: corev1.DNSNone,
			podDNS: &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "1.0.0.1"}, Searches: []string{"a.example", "b.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}}},
			want: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1", "1.0.0.1"}, Searches: []string{"a.example", "b.example"},
				Options: []string{"ndots:2", "edns0"}}},
		{name: "ClusterFirst without cluster DNS falls back to Default", policy: corev1.DNSClusterFirst,
			cluster: &DNSSettings{Domain: "cluster.local"}, want: hostCfg, warn: []string{"MissingClusterDNS"}},
		{name: "ClusterFirstWithHostNet without cluster DNS falls back to Default", policy: corev1.DNSClusterFirstWithHostNet, hostNetwork: true,
			cluster: &DNSSettings{}, want: hostCfg, warn: []string{"MissingClusterDNS"}},
		{name: "empty cluster domain is cluster.local", cluster: &DNSSettings{Servers: []string{"10.96.0.10"}}, want: clusterCfg},
		{name: "other cluster domain", cluster: &DNSSettings{Servers: []string{"10.0.0.10", "fd00::a"}, Domain: "k8s.test"},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10", "fd00::a"},
				Searches: []string{"web.svc.k8s.test", "svc.k8s.test", "k8s.test", "corp.example", "example.com"}, Options: []string{"ndots:5"}}},
		{name: "ClusterFirst without host searches", host: &HostResolv{Servers: []string{"192.168.1.1"}},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "host searches repeating the cluster's are dropped", host: &HostResolv{Searches: []string{"cluster.local", "x.example"}},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: append(append([]string(nil), clusterSearch...), "x.example"),
				Options: []string{"ndots:5"}}},
		{name: "Default with empty host has nothing", policy: corev1.DNSDefault, host: &HostResolv{}, want: &runtimeapi.DNSConfig{}},
		{name: "dnsConfig merges into ClusterFirst", policy: corev1.DNSClusterFirst,
			podDNS: &corev1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "1.1.1.1"}, Searches: []string{"svc.cluster.local", "my.example", "my.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}, {Name: "timeout", Value: ptr.To("3")}}},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "1.1.1.1"},
				Searches: []string{"web.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "example.com", "my.example"},
				Options:  []string{"ndots:2", "edns0", "timeout:3"}}},
		{name: "dnsConfig merges into Default", policy: corev1.DNSDefault,
			podDNS: &corev1.PodDNSConfig{Nameservers: []string{"8.8.8.8", "9.9.9.9"}, Searches: []string{"example.com", "z.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "timeout", Value: ptr.To("5")}, {Name: "ndots"}, {Name: "rotate"}}},
			want: &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1", "8.8.8.8", "9.9.9.9"},
				Searches: []string{"corp.example", "example.com", "z.example"}, Options: []string{"ndots", "timeout:5", "rotate"}}},
		{name: "dnsConfig option with empty value drops the value", policy: corev1.DNSNone,
			podDNS: &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("3")}, {Name: "ndots", Value: ptr.To("")}}},
			want:   &runtimeapi.DNSConfig{Options: []string{"ndots"}}},
		{name: "empty entries are dropped", policy: corev1.DNSNone,
			podDNS: &corev1.PodDNSConfig{Nameservers: []string{"", "1.1.1.1"}, Searches: []string{"", "a.example", ""}, Options: []corev1.PodDNSConfigOption{{Name: ""}}},
			want:   &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"a.example"}}},
		{name: "at most 3 nameservers", policy: corev1.DNSDefault,
			podDNS: &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "1.0.0.1"}},
			want:   &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1", "8.8.8.8", "1.1.1.1"}, Searches: host.Searches, Options: host.Options},
			warn:   []string{"DNSConfigForming"}},
		{name: "at most 32 search paths", policy: corev1.DNSNone,
			podDNS: &corev1.PodDNSConfig{Searches: many("s", 40)},
			want:   &runtimeapi.DNSConfig{Searches: many("s", 32)}, warn: []string{"DNSConfigForming"}},
		{name: "32 search paths fit", policy: corev1.DNSNone,
			podDNS: &corev1.PodDNSConfig{Searches: many("s", 32)},
			want:   &runtimeapi.DNSConfig{Searches: many("s", 32)}},
		{name: "cluster searches count toward the limit", policy: corev1.DNSClusterFirst, host: &HostResolv{Searches: many("h", 31)},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: append(append([]string(nil), clusterSearch...), many("h", 29)...),
				Options: []string{"ndots:5"}},
			warn: []string{"DNSConfigForming"}},
		{name: "search paths longer than 253 are dropped", policy: corev1.DNSNone,
			podDNS: &corev1.PodDNSConfig{Searches: []string{"a.example", strings.Repeat("x", 254), "b.example"}},
			want:   &runtimeapi.DNSConfig{Searches: []string{"a.example", "b.example"}}, warn: []string{"DNSConfigForming"}},
		{name: "search line at most 2048 chars", policy: corev1.DNSNone,
			// 10 paths of 250 chars: 8 make 8*250+7 = 2007 chars, 9 make 2258.
			podDNS: &corev1.PodDNSConfig{Searches: longSearches(10, 250)},
			want:   &runtimeapi.DNSConfig{Searches: longSearches(8, 250)}, warn: []string{"DNSConfigForming"}},
		{name: "unknown policy is cluster first", policy: "Bogus", hostNetwork: true, want: clusterCfg, warn: []string{"DNSConfigForming"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "web"},
				Spec: corev1.PodSpec{DNSPolicy: tc.policy, HostNetwork: tc.hostNetwork, DNSConfig: tc.podDNS}}
			c, h := cluster, host
			if tc.cluster != nil {
				c = *tc.cluster
			}
			if tc.host != nil {
				h = *tc.host
			}
			got, warns, err := dnsConfig(pod, c, h)
			if err != nil {
				t.Fatal(err)
			}
			if !sameDNS(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
			var reasons []string
			for _, w := range warns {
				if w.Message == "" {
					t.Errorf("warning %s has no message", w.Reason)
				}
				reasons = append(reasons, w.Reason)
			}
			if !reflect.DeepEqual(reasons, tc.warn) {
				t.Errorf("warnings %v, want %v", warns, tc.warn)
			}
		})
	}
}

// sameDNS compares the lists exactly (a nil list is not an empty one); the messages' internal
// protobuf state is not compared.
func sameDNS(a, b *runtimeapi.DNSConfig) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(a.Servers, b.Servers) && reflect.DeepEqual(a.Searches, b.Searches) && reflect.DeepEqual(a.Options, b.Options)
}

func longSearches(n, size int) []string {
	var s []string
	for i := 0; i < n; i++ {
		s = append(s, fmt.Sprintf("%d", i)+strings.Repeat("x", size-len(fmt.Sprintf("%d", i))))
	}
	return s
}

func TestDNSConfigDoesNotAlias(t *testing.T) {
	host := HostResolv{Servers: make([]string, 1, 8), Searches: make([]string, 1, 8), Options: []string{"ndots:1"}}
	host.Servers[0], host.Searches[0] = "192.168.1.1", "corp.example"
	cluster := DNSSettings{Servers: []string{"10.96.0.10", "10.96.0.11", "10.96.0.12", "10.96.0.13"}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{DNSPolicy: corev1.DNSDefault, DNSConfig: &corev1.PodDNSConfig{
		Nameservers: []string{"1.1.1.1"}, Searches: []string{"x.example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("4")}}}}}
	got, _, err := dnsConfig(pod, cluster, host)
	if err != nil {
		t.Fatal(err)
	}
	got.Servers[0], got.Searches[0], got.Options[0] = "changed", "changed", "changed"
	if host.Servers[0] != "192.168.1.1" || host.Searches[0] != "corp.example" || host.Options[0] != "ndots:1" ||
		host.Servers[:2][1] != "" || host.Searches[:2][1] != "" {
		t.Errorf("host config changed: %+v", host)
	}
	pod.Spec.DNSPolicy = corev1.DNSClusterFirst
	if got, _, _ = dnsConfig(pod, cluster, host); len(got.Servers) != 3 {
		t.Fatalf("servers %v", got.Servers)
	}
	got.Servers[0] = "changed"
	if cluster.Servers[0] != "10.96.0.10" {
		t.Errorf("cluster servers changed: %v", cluster.Servers)
	}
}

func TestDNSConfigInvalidClusterDNS(t *testing.T) {
	cluster := DNSSettings{Servers: []string{"kube-dns"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web"}}
	if _, _, err := dnsConfig(pod, cluster, HostResolv{}); err == nil || !strings.Contains(err.Error(), "kube-dns") {
		t.Errorf("err = %v, want one naming the bad server", err)
	}
	// Pods that do not use the cluster DNS do not fail over it.
	pod.Spec.DNSPolicy = corev1.DNSDefault
	got, _, err := dnsConfig(pod, cluster, HostResolv{Servers: []string{"192.168.1.1"}})
	if err != nil || !reflect.DeepEqual(got.Servers, []string{"192.168.1.1"}) {
		t.Errorf("Default pod: %v, %v", got, err)
	}
}

func TestParseResolvConf(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     HostResolv
	}{
		{name: "empty", in: "", want: HostResolv{}},
		{name: "typical", in: "# Generated by NetworkManager\nsearch corp.example example.com\nnameserver 192.168.1.1\nnameserver 8.8.8.8\noptions ndots:2 edns0\n",
			want: HostResolv{Servers: []string{"192.168.1.1", "8.8.8.8"}, Searches: []string{"corp.example", "example.com"}, Options: []string{"ndots:2", "edns0"}}},
		{name: "comments", in: "#nameserver 1.1.1.1\n; nameserver 1.0.0.1\n   # search skipped.example\n\t;options rotate\nnameserver 9.9.9.9\n",
			want: HostResolv{Servers: []string{"9.9.9.9"}}},
		{name: "last search line wins", in: "search a.example b.example\nnameserver 1.1.1.1\nsearch c.example\n",
			want: HostResolv{Servers: []string{"1.1.1.1"}, Searches: []string{"c.example"}}},
		{name: "domain line", in: "domain corp.example\nnameserver 1.1.1.1\n",
			want: HostResolv{Servers: []string{"1.1.1.1"}, Searches: []string{"corp.example"}}},
		{name: "domain after search wins", in: "search a.example b.example\ndomain corp.example\n",
			want: HostResolv{Searches: []string{"corp.example"}}},
		{name: "search after domain wins", in: "domain corp.example\nsearch a.example b.example\n",
			want: HostResolv{Searches: []string{"a.example", "b.example"}}},
		{name: "trailing dots and tabs", in: "search\tcorp.example.  example.com.\r\nnameserver\t10.0.0.1\t# resolver\r\n",
			want: HostResolv{Servers: []string{"10.0.0.1"}, Searches: []string{"corp.example", "example.com"}}},
		{name: "root search is no search", in: "search .\n", want: HostResolv{}},
		{name: "empty search line clears", in: "search a.example\nsearch\n", want: HostResolv{}},
		{name: "options accumulate, later value wins", in: "options ndots:1 rotate\noptions timeout:2 ndots:3\n",
			want: HostResolv{Options: []string{"ndots:3", "rotate", "timeout:2"}}},
		{name: "malformed and unknown lines ignored", in: "nameserver\nsortlist 130.155.160.0/255.255.240.0\nlookup file bind\nnameserver fd00::53\n",
			want: HostResolv{Servers: []string{"fd00::53"}}},
		{name: "no trailing newline", in: "nameserver 1.1.1.1", want: HostResolv{Servers: []string{"1.1.1.1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseResolvConf(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestReadHostResolv(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	if got, err := readHostResolv(path); err != nil || !reflect.DeepEqual(got, HostResolv{}) {
		t.Fatalf("missing file: %+v, %v", got, err)
	}
	if err := os.WriteFile(path, []byte("nameserver 1.1.1.1\nsearch a.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := HostResolv{Servers: []string{"1.1.1.1"}, Searches: []string{"a.example"}}
	for i := 0; i < 2; i++ { // the second read comes from the cache
		if got, err := readHostResolv(path); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("read %d: %+v, %v", i, got, err)
		}
	}
	// A changed file is read again.
	if err := os.WriteFile(path, []byte("nameserver 9.9.9.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if got, err := readHostResolv(path); err != nil || !reflect.DeepEqual(got, HostResolv{Servers: []string{"9.9.9.9"}}) {
		t.Fatalf("changed file: %+v, %v", got, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got, err := readHostResolv(path); err != nil || !reflect.DeepEqual(got, HostResolv{}) {
		t.Fatalf("removed file: %+v, %v", got, err)
	}
	if _, err := readHostResolv(dir); err == nil { // a directory cannot be read
		t.Error("reading a directory: no error")
	}
}

func TestSandboxConfigDNS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("nameserver 192.168.1.1\nsearch corp.example\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{PodLogDir: "/var/log/pods", ClusterDNS: []string{"10.96.0.10"}, ResolvConf: path}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "web", UID: "u1"}}
	dns, warns, err := podDNSConfig(pod, o)
	if err != nil || len(warns) != 0 {
		t.Fatalf("%v %v", warns, err)
	}
	cfg := sandboxConfig(pod, o.PodLogDir, "/skiff/podu", "p", dns)
	want := &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"},
		Searches: []string{"web.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, Options: []string{"ndots:5"}}
	if !sameDNS(cfg.DnsConfig, want) {
		t.Errorf("DnsConfig %v, want %v", cfg.DnsConfig, want)
	}
	if cfg.LogDirectory != "/var/log/pods/web_p_u1" || cfg.Hostname != "p" {
		t.Errorf("log dir %q hostname %q", cfg.LogDirectory, cfg.Hostname)
	}

	pod.Spec.HostNetwork = true
	if dns, _, err = podDNSConfig(pod, o); err != nil {
		t.Fatal(err)
	}
	want = &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1"}, Searches: []string{"corp.example"}, Options: []string{"edns0"}}
	if !sameDNS(dns, want) {
		t.Errorf("hostNetwork DnsConfig %v, want %v", dns, want)
	}
	// A host network pod shares the node's UTS namespace: no hostname of its own (runc would
	// refuse to set one), and the node's network namespace.
	if cfg := sandboxConfig(pod, o.PodLogDir, "/skiff/podu", "p", dns); cfg.Hostname != "" ||
		cfg.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_NODE {
		t.Errorf("host network sandbox: hostname %q, network %v", cfg.Hostname, cfg.Linux.SecurityContext.NamespaceOptions.Network)
	}

	o.ResolvConf = filepath.Join(t.TempDir(), "missing")
	if dns, _, err = podDNSConfig(pod, o); err != nil || !sameDNS(dns, &runtimeapi.DNSConfig{}) {
		t.Errorf("missing resolv.conf: %v, %v", dns, err)
	}
}
