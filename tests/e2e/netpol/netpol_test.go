package netpol

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

const pods = `apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - name: web
    image: localhost/skiff/netutil:1
    args: [serve, --port, "8080"]
    ports: [{name: http, containerPort: 8080}]
  - name: echo
    image: localhost/skiff/netutil:1
    args: [echo, --port, "7", --udp]
---
apiVersion: v1
kind: Pod
metadata: {name: client, labels: {role: client}}
spec:
  containers: [{name: c, image: localhost/skiff/netutil:1, args: [sleep, 1h]}]
---
apiVersion: v1
kind: Pod
metadata: {name: other, labels: {role: other}}
spec:
  containers: [{name: c, image: localhost/skiff/netutil:1, args: [sleep, 1h]}]
`

func TestNetworkPolicy(t *testing.T) {
	nsName, nsPath := framework.Netns(t)
	dir := t.TempDir()
	s := framework.NewServerWithAgent(t, dir, nsPath)
	// On failure, what the agent's policy part and CNI server said (the framework shows
	// only the log's tail).
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, l := range strings.Split(s.Log(), "\n") {
			if strings.Contains(l, "network-policy") || strings.Contains(l, "network policy") || strings.Contains(l, "cni") {
				t.Log(l)
			}
		}
	})
	s.Start()
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kc := framework.Kubectl(t, 33)
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := s.Run(ctx, kc, args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return out
	}
	apply := func(yaml string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "m.yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		kubectl("apply", "-f", f)
	}
	var node string
	framework.Eventually(t, 90*time.Second, "the node Ready", func() (bool, string) {
		l, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 1 {
			return false, fmt.Sprint(err)
		}
		for _, cond := range l.Items[0].Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && l.Items[0].Spec.PodCIDR != "" {
				node = l.Items[0].Name
				return true, ""
			}
		}
		return false, "not ready"
	})
	kubectl("taint", "nodes", node, "node-role.kubernetes.io/control-plane-")
	apply(pods)
	ip := map[string]string{}
	framework.Eventually(t, 2*time.Minute, "pods running", func() (bool, string) {
		for _, name := range []string{"web", "client", "other"} {
			p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning {
				ev, _ := s.Run(ctx, kc, "get", "events", "--field-selector", "involvedObject.name="+name)
				return false, fmt.Sprint(name, " ", err, " ", p.Status.Phase, "\n", ev)
			}
			ip[name] = p.Status.PodIP
		}
		return true, ""
	})
	webTCP, webUDP := ip["web"]+":8080", ip["web"]+":7"
	// can says whether pod reaches addr (TCP, or UDP with an echo back).
	can := func(pod, addr string, udp bool) bool {
		args := []string{"exec", pod, "--", "/bin/netutil", "connect", addr, "--timeout", "1s"}
		if udp {
			args = append(args, "--udp")
		}
		_, err := s.Run(ctx, kc, args...)
		return err == nil
	}
	netutil := filepath.Join(filepath.Dir(framework.Binary(t)), "netutil")
	fromNode := func() bool {
		return exec.Command("ip", "netns", "exec", nsName, netutil, "connect", webTCP, "--timeout", "1s").Run() == nil
	}
	expect := func(what string, want map[string]bool) {
		t.Helper()
		framework.Eventually(t, 15*time.Second, what, func() (bool, string) {
			got := map[string]bool{
				"client tcp": can("client", webTCP, false), "other tcp": can("other", webTCP, false),
				"client udp": can("client", webUDP, true), "node tcp": fromNode(),
			}
			for k, v := range want {
				if got[k] != v {
					return false, fmt.Sprint(got)
				}
			}
			return true, ""
		})
	}
	expect("no policy: everything passes", map[string]bool{"client tcp": true, "other tcp": true, "client udp": true, "node tcp": true})
	// The control of the start race below: without a policy, a pod whose first act is to
	// connect gets through (so the refusal below is the policy's, not the pod's).
	if phase := earlyPod(t, ctx, c, apply, "early-open", "other", webTCP); phase != corev1.PodSucceeded {
		t.Fatalf("a pod connecting at its first instant, no policy: %s, want Succeeded", phase)
	}

	apply(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny}
spec: {podSelector: {matchLabels: {app: web}}}
`)
	expect("default deny ingress: only the node passes", map[string]bool{"client tcp": false, "other tcp": false, "client udp": false, "node tcp": true})

	apply(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: clients-http}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from: [{podSelector: {matchLabels: {role: client}}}]
    ports: [{port: http}]
`)
	expect("clients on the named port, nothing else", map[string]bool{"client tcp": true, "other tcp": false, "client udp": false})

	// The live maps, in Kubernetes terms.
	skiff := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(framework.Binary(t), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("skiff %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := skiff("bpf", "policy", "--node", node)
	t.Logf("skiff bpf policy --node %s:\n%s", node, out)
	for _, want := range []string{"default/web", "isolated", "ingress from", "default:role=client", "TCP 8080", "default/clients-http"} {
		if !strings.Contains(out, want) {
			t.Errorf("skiff bpf policy lacks %q:\n%s", want, out)
		}
	}
	out = skiff("policy", "trace", ip["client"], ip["web"], "--port", "8080", "--node", node)
	if !strings.Contains(out, "networkpolicy default/clients-http admits peer default:role=client") || !strings.Contains(out, "verdict: ALLOWED") {
		t.Errorf("trace client -> web:8080:\n%s", out)
	}
	out = skiff("policy", "trace", ip["other"], ip["web"], "--port", "8080", "--node", node)
	t.Logf("skiff policy trace %s %s --port 8080:\n%s", ip["other"], ip["web"], out)
	if !strings.Contains(out, "no rule admits peer default:role=other on TCP/8080") || !strings.Contains(out, "verdict: DENIED") {
		t.Errorf("trace other -> web:8080:\n%s", out)
	}

	apply(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: client-no-egress}
spec:
  podSelector: {matchLabels: {role: client}}
  policyTypes: [Egress]
`)
	expect("the client's egress denied", map[string]bool{"client tcp": false, "other tcp": false})

	// No leak at pod start: a pod whose first act is to connect, under a deny-all egress
	// policy, never gets through.
	if phase := earlyPod(t, ctx, c, apply, "early", "client", webTCP); phase != corev1.PodFailed {
		t.Errorf("a pod isolated from its first packet: %s, want Failed (its connect refused)", phase)
	}

	// The drops are counted per pod and direction.
	healthz := ""
	for i, a := range s.Args() {
		if a == "--agent-healthz-address" {
			healthz = s.Args()[i+1]
		}
	}
	framework.Eventually(t, 15*time.Second, "drop metrics", func() (bool, string) {
		out, _ := exec.Command(netutil, "fetch", "http://"+healthz+"/metrics").CombinedOutput()
		return strings.Contains(string(out), `skiff_network_policy_drops_total{direction="egress",pod="default/client"}`) &&
			strings.Contains(string(out), `skiff_network_policy_drops_total{direction="ingress",pod="default/web"}`), string(out)
	})
	// bpftool shows the maps with their field names; no iptables or nftables rules.
	dump, err := exec.Command("bpftool", "map", "dump", "pinned", filepath.Join("/sys/fs/bpf/skiff", node, "skiff_pol_endpoints")).CombinedOutput()
	if err != nil || !strings.Contains(string(dump), `"flags"`) {
		t.Errorf("bpftool map dump skiff_pol_endpoints: %v\n%s", err, dump)
	}
	for _, cmd := range [][]string{{"iptables-save"}, {"nft", "list", "ruleset"}} {
		out, _ := exec.Command("ip", append([]string{"netns", "exec", nsName}, cmd...)...).CombinedOutput()
		if strings.Contains(strings.ToLower(string(out)), "skiff") {
			t.Errorf("%v in the node shows skiff rules:\n%s", cmd, out)
		}
	}

	kubectl("delete", "networkpolicy", "--all")
	expect("policies deleted: traffic restored", map[string]bool{"client tcp": true, "other tcp": true, "client udp": true})
}

// earlyPod runs a pod with the role label whose only act, at its first instant, is to connect
// to addr, and returns the phase it ends in.
func earlyPod(t *testing.T, ctx context.Context, c kubernetes.Interface, apply func(string), name, role, addr string) corev1.PodPhase {
	t.Helper()
	apply(`apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, labels: {role: ` + role + `}}
spec:
  restartPolicy: Never
  containers: [{name: c, image: localhost/skiff/netutil:1, args: [connect, "` + addr + `", --timeout, 3s]}]
`)
	var phase corev1.PodPhase
	framework.Eventually(t, 90*time.Second, name+" finished", func() (bool, string) {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		phase = p.Status.Phase
		return phase == corev1.PodFailed || phase == corev1.PodSucceeded, string(phase)
	})
	return phase
}
