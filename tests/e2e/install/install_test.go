// Package install walks an operator's path on two fresh machines with systemd: `skiff install
// server` on one, `skiff install agent` on the other with the server's token, a pod on each
// with traffic to both across a `systemctl restart` of each unit, then `skiff uninstall --data`
// on both and a check that nothing skiff made is left. The machines are framework.SystemdHosts:
// Debian's systemd as PID 1 in namespaces of their own over an overlay of this machine's root,
// linked by a veth pair; image archives come from beside the binary (no registry).
package install

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const (
	serverIP = "198.18.200.1"
	agentIP  = "198.18.200.2"
)

func kubectl(t *testing.T, h *framework.SystemdHost, args ...string) (string, error) {
	return h.Exec(append([]string{"env", "KUBECONFIG=/var/lib/skiff/server/admin.kubeconfig", framework.Kubectl(t, 33)}, args...)...)
}

var received = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

// ping sends n echo requests from inside h to addr, 5 a second, and returns sent and answered.
func ping(h *framework.SystemdHost, addr string, n int) (int, int, string) {
	out, _ := h.Exec("ping", "-n", "-q", "-c", strconv.Itoa(n), "-i", "0.2", "-w", strconv.Itoa(n/5+30), addr)
	m := received.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, out
	}
	sent, _ := strconv.Atoi(m[1])
	got, _ := strconv.Atoi(m[2])
	return sent, got, out
}

func TestInstallServerAndAgent(t *testing.T) {
	bin := framework.Binary(t)
	framework.AgentArtifacts(t) // the image archives beside the binary, which install copies (air-gapped)
	server := framework.NewSystemdHost(t, "hosta")
	agent := framework.NewSystemdHost(t, "hostb")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out, _ := kubectl(t, server, "describe", "pods")
		t.Logf("pods:\n%s", out)
		for _, h := range []*framework.SystemdHost{server, agent} {
			out, _ := h.Exec("sh", "-c", "systemctl status --no-pager -n 0 skiff.service skiff-agent.service; journalctl --no-pager -n 40 2>&1 | tail -40")
			t.Logf("%s:\n%s", h.Name, out)
		}
	})
	framework.Link(t, server, serverIP+"/24", agent, agentIP+"/24")

	// Nothing is running yet; the checks skiff needs pass on this host.
	if out, err := server.Exec(bin, "check-config"); err != nil {
		t.Fatalf("check-config: %v\n%s", err, out)
	} else if !strings.Contains(out, "systemd:") || !strings.Contains(out, "running") {
		t.Errorf("check-config does not see systemd running:\n%s", out)
	}
	out := server.MustExec(bin, "install", "server", "--tls-san", "skiff.example")
	for _, want := range []string{"installed /usr/local/bin/skiff", "wrote /etc/skiff/config.yaml", "copied /var/lib/skiff/agent/images/netutil.tar", "skiff.service enabled and started"} {
		if !strings.Contains(out, want) {
			t.Errorf("install server said:\n%s\nwant %q", out, want)
		}
	}
	if cfg := server.MustExec("cat", "/etc/skiff/config.yaml"); !strings.Contains(cfg, "tls-san:\n    - skiff.example") {
		t.Errorf("/etc/skiff/config.yaml:\n%s", cfg)
	}
	// Type=notify: the unit is active only once the API server is ready.
	if state := strings.TrimSpace(server.MustExec("systemctl", "is-active", "skiff.service")); state != "active" {
		t.Fatalf("skiff.service is %s", state)
	}
	token := strings.TrimSpace(server.MustExec("cat", "/var/lib/skiff/server/token"))
	out = agent.MustExec(bin, "install", "agent", "--server", "https://"+serverIP+":6443", "--token", token)
	if !strings.Contains(out, "skiff-agent.service enabled and started") {
		t.Errorf("install agent said:\n%s", out)
	}
	framework.Eventually(t, 2*time.Minute, "both nodes Ready", func() (bool, string) {
		out, err := kubectl(t, server, "get", "nodes", "--no-headers")
		return err == nil && strings.Count(out, " Ready ") == 2 && strings.Contains(out, "hosta") && strings.Contains(out, "hostb"), out
	})

	// A pod on each node.
	for _, node := range []string{"hosta", "hostb"} {
		manifest := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"on-%s"},"spec":{"nodeName":"%s",
"tolerations":[{"operator":"Exists"}],"terminationGracePeriodSeconds":0,
"containers":[{"name":"c","image":"localhost/skiff/netutil:1","command":["netutil","serve"]}]}}`, node, node)
		if out, err := server.Exec("sh", "-c", "echo '"+manifest+"' | env KUBECONFIG=/var/lib/skiff/server/admin.kubeconfig "+framework.Kubectl(t, 33)+" apply -f -"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	podIP := map[string]string{}
	framework.Eventually(t, 2*time.Minute, "both pods running with addresses", func() (bool, string) {
		for _, node := range []string{"hosta", "hostb"} {
			out, err := kubectl(t, server, "get", "pod", "on-"+node, "-o", "jsonpath={.status.phase} {.status.podIP}")
			f := strings.Fields(out)
			if err != nil || len(f) != 2 || f[0] != "Running" {
				return false, node + ": " + out
			}
			podIP[node] = f[1]
		}
		return true, ""
	})
	// Each machine reaches both pods, its own and (over the routes BGP exchanged) the other's.
	for _, h := range []*framework.SystemdHost{server, agent} {
		for _, node := range []string{"hosta", "hostb"} {
			framework.Eventually(t, time.Minute, h.Name+" reaches the pod on "+node, func() (bool, string) {
				sent, got, out := ping(h, podIP[node], 1)
				return sent == 1 && got == 1, out
			})
		}
	}

	// Restart each unit while both machines ping both pods: not one echo is lost.
	type result struct {
		what      string
		sent, got int
		out       string
	}
	var mu sync.Mutex
	var results []result
	var wg sync.WaitGroup
	const n = 150 // 30 s at 5 a second
	for _, h := range []*framework.SystemdHost{server, agent} {
		for _, node := range []string{"hosta", "hostb"} {
			wg.Add(1)
			go func(h *framework.SystemdHost, node string) {
				defer wg.Done()
				sent, got, out := ping(h, podIP[node], n)
				mu.Lock()
				results = append(results, result{h.Name + " -> pod on " + node, sent, got, out})
				mu.Unlock()
			}(h, node)
		}
	}
	time.Sleep(3 * time.Second)
	server.MustExec("systemctl", "restart", "skiff.service")
	agent.MustExec("systemctl", "restart", "skiff-agent.service")
	wg.Wait()
	for _, r := range results {
		if r.sent != n || r.got != n {
			t.Errorf("%s across the restarts: %d of %d answered\n%s", r.what, r.got, r.sent, r.out)
		}
	}
	framework.Eventually(t, 2*time.Minute, "both nodes Ready after the restarts", func() (bool, string) {
		out, err := kubectl(t, server, "get", "nodes", "--no-headers")
		return err == nil && strings.Count(out, " Ready ") == 2, out
	})
	for _, node := range []string{"hosta", "hostb"} {
		out, err := kubectl(t, server, "get", "pod", "on-"+node, "-o", "jsonpath={.status.phase} {.status.containerStatuses[0].restartCount}")
		if err != nil || strings.TrimSpace(out) != "Running 0" {
			t.Errorf("pod on %s after the restarts: %q %v (want it running, never restarted)", node, out, err)
		}
	}

	// Uninstall, data and all: nothing skiff made is left.
	for _, h := range []*framework.SystemdHost{agent, server} {
		out := h.MustExec("/usr/local/bin/skiff", "uninstall", "--data")
		t.Logf("%s: skiff uninstall --data:\n%s", h.Name, out)
		checkNothingLeft(t, h)
	}
}

// checkNothingLeft looks for everything skiff makes on a host.
func checkNothingLeft(t *testing.T, h *framework.SystemdHost) {
	t.Helper()
	for _, path := range []string{"/usr/local/bin/skiff", "/etc/skiff", "/etc/systemd/system/skiff.service",
		"/etc/systemd/system/skiff-agent.service", "/var/lib/skiff", "/sys/fs/bpf/skiff", "/var/log/pods"} {
		if out, err := h.Exec("test", "!", "-e", path); err != nil {
			t.Errorf("%s: %s is left (%v %s)", h.Name, path, err, out)
		}
	}
	if out := h.MustExec("ps", "-e", "-o", "comm="); strings.Contains(out, "skiff") || strings.Contains(out, "containerd") || strings.Contains(out, "netutil") {
		t.Errorf("%s: processes left:\n%s", h.Name, out)
	}
	if out := h.MustExec("ip", "-o", "link"); strings.Count(out, "\n") != 2 { // lo and the link to the other host
		t.Errorf("%s: links left:\n%s", h.Name, out)
	}
	if out := h.MustExec("ip", "route", "show", "proto", "bgp"); strings.TrimSpace(out) != "" {
		t.Errorf("%s: BGP routes left:\n%s", h.Name, out)
	}
	if out := h.MustExec("sh", "-c", "ls -d /sys/fs/cgroup/*/skiff* /sys/fs/cgroup/*/*/skiff* 2>/dev/null || true"); strings.TrimSpace(out) != "" {
		t.Errorf("%s: cgroups left:\n%s", h.Name, out)
	}
	if state, _ := h.Exec("systemctl", "is-active", "skiff.service", "skiff-agent.service"); strings.Contains(state, "active\n") && !strings.Contains(state, "inactive") {
		t.Errorf("%s: units still active: %s", h.Name, state)
	}
}
