// Package plainhost walks docs/getting-started.md's "Running skiff yourself" as a new user would, with no
// lab code: two "hosts" that are fresh network namespaces with the kernel's default sysctls
// (net.ipv4.ip_forward=0, as on a fresh Debian machine) and real addresses on one link;
// `skiff server` on one, `skiff agent --server … --token …` on the other; pods on both reach
// each other and Services same-node and cross-node, by address and by name (the cluster DNS),
// and `kubectl logs` and `kubectl exec` work.
// A part of the agent that cannot run (its BGP port taken) shows in the Node's Ready condition
// and /healthz, and the agent recovers on its own once it can.
package plainhost

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// host is one network namespace standing for a machine.
type host struct {
	t          *testing.T
	netns, dir string
	node, ip   string
	cgroupRoot string
}

func (h *host) run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + h.netns, "--", name}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (h *host) sysctl(key string) string {
	h.t.Helper()
	out, err := h.run(context.Background(), "cat", "/proc/sys/"+strings.ReplaceAll(key, ".", "/"))
	if err != nil {
		h.t.Fatalf("%s: %v %s", key, err, out)
	}
	return out
}

// start runs a skiff command on the host until the test ends; the process, whatever it
// started under the host's directory, its cgroups and its pins are removed at cleanup.
func (h *host) start(args ...string) {
	h.t.Helper()
	logf, err := os.Create(filepath.Join(h.dir, "skiff.log"))
	if err != nil {
		h.t.Fatal(err)
	}
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + h.netns, "--", framework.PlainBinary(h.t)}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
		framework.KillUnder(h.dir)
		_ = cgroups.KillAll(cgroups.Mounts(), h.cgroupRoot)
		_ = os.RemoveAll(filepath.Join("/sys/fs/bpf/skiff", h.node))
		if h.t.Failed() {
			b, _ := os.ReadFile(filepath.Join(h.dir, "skiff.log"))
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			h.t.Logf("--- %s log\n%s", h.node, b)
		}
	})
}

func newHost(t *testing.T, role, ip string) *host {
	suffix := fmt.Sprintf("%d", os.Getpid())
	h := &host{t: t, netns: "skiff-ph-" + role + "-" + suffix, dir: t.TempDir(), node: "ph-" + role + "-" + suffix, ip: ip,
		cgroupRoot: "/skiff/e2e-ph-" + role + "-" + suffix}
	if out, err := exec.Command("ip", "netns", "add", h.netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	// Registered after the processes' cleanups run (LIFO): the namespace goes last.
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", h.netns).Run() })
	if out, err := exec.Command("ip", "-n", h.netns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v %s", err, out)
	}
	return h
}

func TestRunningSkiffYourself(t *testing.T) {
	// The binary of a plain `go build ./cmd/skiff`, alone in its directory: it is its own CNI
	// plugin and carries its own images.
	if entries, _ := os.ReadDir(filepath.Dir(framework.PlainBinary(t))); len(entries) != 1 {
		t.Fatalf("the plain binary's directory holds %d entries, want only the binary", len(entries))
	}
	// Registered first, so it runs after every other cleanup: nothing the test made is left.
	var podNetns []string
	t.Cleanup(func() {
		for _, ns := range podNetns {
			if _, err := os.Stat(ns); err == nil {
				t.Errorf("pod network namespace %s left behind", ns)
			}
		}
		for _, h := range []string{"server", "worker"} {
			if out, _ := exec.Command("ip", "netns", "list").CombinedOutput(); strings.Contains(string(out), "skiff-ph-"+h+"-") {
				t.Errorf("namespaces left: %s", out)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	server, worker := newHost(t, "server", "198.18.9.1"), newHost(t, "worker", "198.18.9.2")
	// One link between the two machines, nothing else: no default route, no lab.
	for _, args := range [][]string{
		{"link", "add", "eth0", "netns", server.netns, "type", "veth", "peer", "name", "eth0", "netns", worker.netns},
		{"-n", server.netns, "addr", "add", server.ip + "/24", "dev", "eth0"},
		{"-n", worker.netns, "addr", "add", worker.ip + "/24", "dev", "eth0"},
		{"-n", server.netns, "link", "set", "eth0", "up"},
		{"-n", worker.netns, "link", "set", "eth0", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	for _, h := range []*host{server, worker} {
		if v := h.sysctl("net.ipv4.ip_forward"); v != "0" {
			t.Fatalf("%s starts with ip_forward=%s; the test needs the kernel's default 0", h.netns, v)
		}
	}

	// That page's two commands, with per-test paths (the defaults are shared by every
	// skiff on a machine: /var/lib/skiff, /var/log/pods, /etc/skiff/manifests, /skiff).
	server.start("server", "--data-dir", server.dir, "--node-name", server.node,
		"--agent-data-dir", filepath.Join(server.dir, "agent"), "--pod-log-dir", filepath.Join(server.dir, "logs"),
		"--pod-manifest-path", filepath.Join(server.dir, "manifests"), "--cgroup-root", server.cgroupRoot,
		// Both nodes share this machine's disk (see lab.EvictionHard); CI's machines also
		// keep most of it reserved for root, leaving about 16% available to the kubelet's
		// imagefs.available<15% default.
		"--eviction-hard="+lab.EvictionHard, "--image-gc-high-threshold=100")
	tokenFile := filepath.Join(server.dir, "token")
	framework.Eventually(t, 2*time.Minute, "the server's join token", func() (bool, string) {
		_, err := os.Stat(tokenFile)
		return err == nil, fmt.Sprint(err)
	})
	token, _ := os.ReadFile(tokenFile)
	// Something else holds the worker's BGP port when its agent starts: the speaker fails and
	// is restarted, and until it runs the node says so (below).
	var hold net.Listener
	if err := ns.WithNetNSPath("/run/netns/"+worker.netns, func(ns.NetNS) error {
		var err error
		hold, err = net.Listen("tcp", worker.ip+":179")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	worker.start("agent", "--server", "https://"+server.ip+":6443", "--token", strings.TrimSpace(string(token)),
		"--node-name", worker.node, "--data-dir", worker.dir, "--pod-log-dir", filepath.Join(worker.dir, "logs"),
		"--pod-manifest-path", filepath.Join(worker.dir, "manifests"), "--cgroup-root", worker.cgroupRoot,
		"--eviction-hard="+lab.EvictionHard, "--image-gc-high-threshold=100")

	kubectl := func(args ...string) (string, error) {
		return server.run(ctx, framework.Kubectl(t, 33), append([]string{"--kubeconfig", filepath.Join(server.dir, "admin.kubeconfig")}, args...)...)
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	framework.Eventually(t, 2*time.Minute, "the worker NotReady, naming its BGP speaker", func() (bool, string) {
		out, _ := kubectl("get", "node", worker.node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`)
		return strings.HasPrefix(out, "False skiff agent: bgp: ") && strings.Contains(out, "address already in use"), out
	})
	if out, _ := worker.run(ctx, "curl", "-s", "http://127.0.0.1:10248/healthz?verbose"); !strings.Contains(out, "[-]bgp failed: ") || !strings.Contains(out, "[+]pods ok") {
		t.Errorf("the worker's /healthz while its speaker is down:\n%s", out)
	}
	hold.Close()
	framework.Eventually(t, 3*time.Minute, "both nodes Ready", func() (bool, string) {
		out, _ := kubectl("get", "nodes", "--no-headers")
		return regexp.MustCompile(`(?m)^`+server.node+`\s+Ready\s+control-plane\s`).MatchString(out) &&
			regexp.MustCompile(`(?m)^`+worker.node+`\s+Ready\s+<none>\s`).MatchString(out), out
	})
	// The agents turned forwarding on themselves.
	for _, h := range []*host{server, worker} {
		if v := h.sysctl("net.ipv4.ip_forward"); v != "1" {
			t.Errorf("%s: ip_forward=%s after the agent started, want 1", h.node, v)
		}
	}

	// p1 on the server's node (it tolerates the control-plane taint), p2 and p3 on the worker.
	manifest := ""
	for _, p := range []struct{ name, node string }{{"p1", server.node}, {"p2", worker.node}, {"p3", worker.node}} {
		manifest += fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: %s, labels: {app: %s}}
spec:
  nodeName: %s
  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
  containers: [{name: web, image: localhost/skiff/netutil:1}]
`, p.name, p.name, p.node)
	}
	mf := filepath.Join(server.dir, "pods.yaml")
	if err := os.WriteFile(mf, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	must("apply", "-f", mf)
	must("expose", "pod", "p1", "--port", "80", "--target-port", "8080", "--name", "s1")
	must("expose", "pod", "p3", "--port", "80", "--target-port", "8080", "--name", "s3")
	ips := map[string]string{}
	framework.Eventually(t, 2*time.Minute, "three pods Running with addresses", func() (bool, string) {
		out, _ := kubectl("get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.podIP}{"\n"}{end}`)
		n := 0
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[1] == "Running" {
				ips[f[0]] = f[2]
				n++
			}
		}
		return n == 3, out
	})
	fetch := func(from, url, want string) {
		t.Helper()
		framework.Eventually(t, 30*time.Second, from+" fetches "+url, func() (bool, string) {
			out, err := kubectl("exec", from, "--", "netutil", "fetch", url)
			return err == nil && out == want, out
		})
	}
	fetch("p2", "http://"+ips["p3"]+":8080/hostname", "p3") // same node
	fetch("p2", "http://"+ips["p1"]+":8080/hostname", "p1") // worker → server's node
	fetch("p1", "http://"+ips["p2"]+":8080/hostname", "p2") // server's node → worker
	for _, s := range []struct{ svc, pod string }{{"s1", "p1"}, {"s3", "p3"}} {
		ip := must("get", "service", s.svc, "-o", "jsonpath={.spec.clusterIP}")
		fetch("p2", "http://"+ip+"/hostname", s.pod) // cross-node and same-node Services
	}
	// By name, through the cluster DNS each agent serves (kube-dns, 10.96.0.10, balanced to
	// the pod's own node), with the defaults: no flag asked for it.
	fetch("p2", "http://s1/hostname", "p1")
	fetch("p1", "http://s3.default/hostname", "p3")
	fetch("p2", "http://s3.default.svc.cluster.local/hostname", "p3")
	// A Service without a selector and Endpoints written by hand (an external backend): the
	// mirroring controller makes its EndpointSlice and the proxy balances to it.
	manual := fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: manual}
spec: {ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Endpoints
metadata: {name: manual}
subsets: [{addresses: [{ip: %s}], ports: [{port: 8080}]}]
`, ips["p1"])
	mf2 := filepath.Join(server.dir, "manual.yaml")
	if err := os.WriteFile(mf2, []byte(manual), 0o644); err != nil {
		t.Fatal(err)
	}
	must("apply", "-f", mf2)
	fetch("p2", "http://"+must("get", "service", "manual", "-o", "jsonpath={.spec.clusterIP}")+"/hostname", "p1")
	if out := must("get", "endpointslices", "-l", "kubernetes.io/service-name=manual", "-o", `jsonpath={.items[*].metadata.labels.endpointslice\.kubernetes\.io/managed-by}`); out != "endpointslicemirroring-controller.k8s.io" {
		t.Errorf("the manual Service's slices: managed by %q", out)
	}

	// The API server proxies to pods and Services (pods/proxy, services/proxy), on its own
	// node and across the fabric.
	for path, want := range map[string]string{
		"/api/v1/namespaces/default/pods/p1:8080/proxy/hostname":      "p1",
		"/api/v1/namespaces/default/pods/http:p2:8080/proxy/hostname": "p2",
		"/api/v1/namespaces/default/services/s3:80/proxy/hostname":    "p3",
	} {
		framework.Eventually(t, 30*time.Second, "GET "+path, func() (bool, string) {
			out, err := kubectl("get", "--raw", path)
			return err == nil && out == want, fmt.Sprint(err, " ", out)
		})
	}
	if out, _ := worker.run(ctx, "curl", "-s", "http://127.0.0.1:10248/metrics"); !regexp.MustCompile(`skiff_agent_part_restarts_total\{part="bgp"\} [1-9]`).MatchString(out) ||
		!strings.Contains(out, `skiff_agent_part_up{part="bgp"} 1`) {
		t.Errorf("the worker's part metrics after the speaker recovered:\n%s", out)
	}
	// Kill subsystems under a running node. The worker's service dataplane loses its pins
	// (rm -r under /sys/fs/bpf): the proxy notices, is restarted and repairs them, and
	// Services keep working.
	pins := filepath.Join("/sys/fs/bpf/skiff", worker.node)
	if _, err := os.Stat(filepath.Join(pins, "skiff_services")); err != nil {
		t.Fatalf("the worker's pinned service map: %v", err)
	}
	if err := os.RemoveAll(pins); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the service proxy restarted over its removed pins", func() (bool, string) {
		out, _ := worker.run(ctx, "curl", "-s", "http://127.0.0.1:10248/metrics")
		_, err := os.Stat(filepath.Join(pins, "skiff_services"))
		return regexp.MustCompile(`skiff_agent_part_restarts_total\{part="service-proxy"\} [1-9]`).MatchString(out) &&
			strings.Contains(out, `skiff_agent_part_up{part="service-proxy"} 1`) && err == nil, out
	})
	fetch("p2", "http://"+must("get", "service", "s1", "-o", "jsonpath={.spec.clusterIP}")+"/hostname", "p1")
	// The worker's Lease deleted: the heartbeat makes it again and the node stays Ready.
	must("delete", "lease", "-n", "kube-node-lease", worker.node)
	framework.Eventually(t, time.Minute, "the worker's Lease back", func() (bool, string) {
		out, err := kubectl("get", "lease", "-n", "kube-node-lease", worker.node, "-o", "jsonpath={.spec.holderIdentity}")
		return err == nil && out == worker.node, out
	})
	if out := must("get", "node", worker.node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`); out != "True" {
		t.Errorf("the worker after its Lease was deleted: Ready=%s", out)
	}

	if out := must("logs", "p1"); !strings.Contains(out, "netutil serving HTTP on :8080") {
		t.Errorf("kubectl logs p1 = %q", out)
	}
	podNetns = framework.RecordedPodNetns(server.dir, filepath.Join(server.dir, "agent"), worker.dir)
	if len(podNetns) < 3 {
		t.Errorf("found %d pod network namespaces in containerd's metadata, want 3: %v", len(podNetns), podNetns)
	}
}
