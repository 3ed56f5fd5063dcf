package pods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPodHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b-c" // cut at 63 leaves a trailing '-'
	for _, tc := range []struct {
		name, hostname, subdomain string
		override                  *string
		want, wantDomain          string
		err                       bool
	}{
		{name: "web", want: "web"},
		{name: "web", hostname: "h1", want: "h1"},
		{name: "web", hostname: "h1", subdomain: "sub", want: "h1", wantDomain: "sub.ns.svc.cluster.local"},
		{name: strings.Repeat("x", 63), want: strings.Repeat("x", 63)},
		{name: strings.Repeat("x", 80), want: strings.Repeat("x", 63)},
		{name: long, want: strings.Repeat("a", 62)},
		{name: strings.Repeat("a", 61) + ".-.-.-", want: strings.Repeat("a", 61)},
		{name: "web", hostname: "Not_A_Label", err: true},
		{name: "web", subdomain: "bad.sub", err: true},
		{name: "web", override: ptr.To("my.host.example"), subdomain: "sub", want: "my.host.example"},
		{name: "web", override: ptr.To("UPPER"), err: true},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: "ns"},
			Spec: corev1.PodSpec{Hostname: tc.hostname, Subdomain: tc.subdomain, HostnameOverride: tc.override}}
		h, d, err := podHostname(pod, "")
		if (err != nil) != tc.err || h != tc.want || d != tc.wantDomain {
			t.Errorf("podHostname(%q, %q, %q) = %q, %q, %v; want %q, %q (error %v)", tc.name, tc.hostname, tc.subdomain, h, d, err, tc.want, tc.wantDomain, tc.err)
		}
	}
}

func TestHostsFile(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{HostAliases: []corev1.HostAlias{
		{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}, {IP: "::1", Hostnames: []string{"six"}}}}}
	got := string(hostsFile(pod, []string{"10.244.1.5"}, "web", "sub.ns.svc.cluster.local", nil))
	want := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
		"10.244.1.5\tweb.sub.ns.svc.cluster.local\tweb\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n::1\tsix\n"
	if got != want {
		t.Errorf("pod network hosts file:\n%q\nwant\n%q", got, want)
	}
	if got := string(hostsFile(&corev1.Pod{}, []string{"10.244.1.5"}, "web", "", nil)); !strings.HasSuffix(got, "fe00::2\tip6-allrouters\n10.244.1.5\tweb\n") {
		t.Errorf("without a domain: %q", got)
	}
	hostNet := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}}
	if got := string(hostsFile(hostNet, []string{"192.0.2.1"}, "", "", []byte("127.0.0.1 localhost\n192.0.2.1 node1\n"))); got != "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n192.0.2.1 node1\n" {
		t.Errorf("host network hosts file: %q", got)
	}
}

func TestMountsHosts(t *testing.T) {
	if mountsHosts(corev1.Container{VolumeMounts: []corev1.VolumeMount{{MountPath: "/etc"}}}) {
		t.Error("/etc is not /etc/hosts")
	}
	if !mountsHosts(corev1.Container{VolumeMounts: []corev1.VolumeMount{{MountPath: "/etc/hosts/"}}}) {
		t.Error("/etc/hosts/ is /etc/hosts")
	}
}

func TestSysctls(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{
		{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "kernel/shm_rmid_forced2", Value: "0"},
		{Name: "net/ipv4/conf/eno2.100/rp_filter", Value: "1"}, {Name: "net.ipv4.conf.eno2/100.rp_filter", Value: "2"}}}}}
	got := sysctls(pod)
	want := map[string]string{"kernel.shm_rmid_forced": "1", "kernel.shm_rmid_forced2": "0", "net.ipv4.conf.eno2/100.rp_filter": "2"}
	if len(got) != len(want) {
		t.Fatalf("sysctls = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("sysctls[%s] = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if sysctls(&corev1.Pod{}) != nil {
		t.Error("a pod without sysctls has some")
	}
}
