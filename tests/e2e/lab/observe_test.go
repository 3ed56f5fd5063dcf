package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/dataplane/flows"
	skifflab "github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestLabObserve watches a lab's network with `skiff observe` (issue 45), everything made
// with the real kubectl: a connection a NetworkPolicy drops is followed live, named with its
// policy, within a second of the drop; an audit-mode policy drops nothing and reports what
// it would have; Service translations name the client pod and the Service; the agents count
// flows in their metrics; bad filters are refused, and a view-only user may not read flows.
func TestLabObserve(t *testing.T) {
	const name = "e2eobs"
	l, apply := twoWorkers(t, name, 8*time.Minute)
	ctx := l.ctx
	apply(`apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  nodeName: ` + name + `-node2
  containers: [{name: c, image: localhost/skiff/netutil:1}]
---
apiVersion: v1
kind: Pod
metadata: {name: web2, labels: {app: web2}}
spec:
  nodeName: ` + name + `-node2
  containers: [{name: c, image: localhost/skiff/netutil:1}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, labels: {app: client}}
spec:
  nodeName: ` + name + `-node1
  containers: [{name: c, image: localhost/skiff/netutil:1}]
---
apiVersion: v1
kind: Service
metadata: {name: web2}
spec:
  selector: {app: web2}
  ports: [{port: 80, targetPort: 8080}]
`)
	l.kubectl("wait", "--for=condition=Ready", "pod/web", "pod/web2", "pod/client", "--timeout=120s")
	web := l.podNamed("web")
	webURL := "http://" + web.Status.PodIP + ":8080/hostname"
	if got := l.fetch("client", webURL); got != "web" {
		t.Fatalf("client → web answered %q", got)
	}
	kubeconfig := skifflab.Kubeconfig(name)
	observe := func(args ...string) (string, error) { return observeLab(l, args...) }

	// 1. A dropped connection, followed live.
	follow := exec.CommandContext(ctx, l.bin, "observe", "--kubeconfig", kubeconfig, "-f", "-o", "json", "--verdict", "dropped", "--pod", "default/web")
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = follow.Process.Kill(); _ = follow.Wait() }()
	type arrival struct {
		flow flows.Flow
		at   time.Time
	}
	arrivals := make(chan arrival, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var r flows.Response
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.Flow != nil {
				arrivals <- arrival{*r.Flow, time.Now()}
			}
		}
	}()
	time.Sleep(2 * time.Second) // the streams reach every agent
	apply(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-allowed}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{from: [{podSelector: {matchLabels: {app: allowed}}}]}]
`)
	framework.Eventually(t, 30*time.Second, "client refused by web's policy", func() (bool, string) {
		out := l.fetchErr("client", webURL)
		return !strings.Contains(out, "web"), out
	})
	var dropped arrival
	framework.Eventually(t, 30*time.Second, "the drop followed by skiff observe -f", func() (bool, string) {
		select {
		case a := <-arrivals:
			dropped = a
			return a.flow.Verdict == "DROPPED" && a.flow.Destination != nil && a.flow.Destination.PodName == "web", a.flow.Type
		case <-time.After(5 * time.Second):
			l.fetchErr("client", webURL)
			return false, "nothing yet"
		}
	})
	f := dropped.flow
	if f.Node != name+"-node2" || f.Direction != "INGRESS" || f.DropReason != "POLICY_DENIED" || !slices.Equal(f.Policies, []string{"default/web-from-allowed"}) ||
		f.Source == nil || f.Source.PodName != "client" || f.L4.DestinationPort != 8080 || f.L4.Protocol != "TCP" || !slices.Contains(f.L4.Flags, "SYN") {
		t.Errorf("the dropped flow: %+v", f)
	}
	// From the packet's drop (the datapath's clock) to the line reaching skiff observe.
	if lag := dropped.at.Sub(f.Time); lag > time.Second || lag < -time.Second {
		t.Errorf("the drop reached skiff observe %v after it happened, want within a second", lag)
	}
	t.Logf("a drop reached skiff observe -f %v after the datapath dropped it", dropped.at.Sub(f.Time).Round(time.Millisecond))
	// The same, printed for people.
	out, err := observe("--verdict", "dropped", "--pod", "web", "--last", "1")
	if err != nil || !regexp.MustCompile(`\[`+name+`-node2\]: default/client:\d+ -> default/web:8080 policy-verdict:default/web-from-allowed INGRESS DROPPED \(TCP Flags: SYN\) no rule admits it`).MatchString(out) {
		t.Errorf("skiff observe --verdict dropped: %v\n%s", err, out)
	}

	// 2. Audit mode: the client's egress staged to DNS only. Nothing is dropped; what it
	// would have dropped is reported with the policy's name.
	apply(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: staged-dns-only, annotations: {policy.skiff.sh/mode: audit}}
spec:
  podSelector: {matchLabels: {app: client}}
  policyTypes: [Egress]
  egress: [{ports: [{port: 53, protocol: UDP}, {port: 53, protocol: TCP}]}]
`)
	time.Sleep(2 * time.Second) // the agents compile it
	for range 3 {
		if got := l.fetch("client", "http://web2.default/hostname"); got != "web2" {
			t.Fatalf("client → web2 under an audit-mode policy answered %q", got)
		}
	}
	framework.Eventually(t, 10*time.Second, "the audit verdict in skiff observe", func() (bool, string) {
		out, err := observe("--verdict", "audit", "-o", "json", "--last", "50")
		if err != nil {
			return false, out
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r flows.Response
			if json.Unmarshal([]byte(line), &r) != nil || r.Flow == nil {
				continue
			}
			f := r.Flow
			if f.Destination != nil && f.Destination.PodName == "web2" && f.Source.PodName == "client" && f.Direction == "EGRESS" &&
				slices.Equal(f.Policies, []string{"default/staged-dns-only"}) && f.Node == name+"-node1" {
				return true, ""
			}
		}
		return false, out
	})
	// DNS is what the staged policy admits: no audit verdict for it.
	if out, err := observe("--verdict", "audit", "--port", "53", "--last", "50"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("audit verdicts for DNS, which the staged policy admits: %v\n%s", err, out)
	}

	// 3. The Service translation: from the client pod (its socket's cgroup) to web2.
	out, err = observe("--type", "translation", "--service", "default/web2", "--last", "1")
	if err != nil || !regexp.MustCompile(`\[`+name+`-node1\]: default/client -> default/web2:8080 \(default/web2 [0-9.]+:80\) translation FORWARDED \(TCP\)`).MatchString(out) {
		t.Errorf("skiff observe --type translation: %v\n%s", err, out)
	}

	// 4. The agent's metrics count them.
	metrics, err := l.in("node1", "curl", "-s", "http://127.0.0.1:10248/metrics")
	re := regexp.MustCompile(`skiff_flows_total\{direction="EGRESS",policy="default/staged-dns-only",type="policy-verdict",verdict="AUDIT"\} (\d+)`)
	if m := re.FindStringSubmatch(metrics); err != nil || m == nil {
		t.Errorf("node1's metrics have no audit verdicts of the staged policy: %v\n%s", err, grepLines(metrics, "skiff_flow"))
	} else if n, _ := strconv.Atoi(m[1]); n < 3 {
		t.Errorf("node1 counted %d audit verdicts, want 3 or more", n)
	}
	if !strings.Contains(metrics, `skiff_flow_events_lost_total{where="ring"} 0`) {
		t.Errorf("events lost in a quiet lab:\n%s", grepLines(metrics, "lost"))
	}

	// 5. Bad filters are refused with the reason; a view-only user may not read flows.
	if out, err := observe("--verdict", "lost"); err == nil || !strings.Contains(out, `verdict "lost": want forwarded, dropped or audit`) {
		t.Errorf("skiff observe --verdict lost: %v\n%s", err, out)
	}
	l.kubectl("create", "serviceaccount", "viewer")
	l.kubectl("create", "clusterrolebinding", "viewer", "--clusterrole", "view", "--serviceaccount", "default:viewer")
	token := strings.TrimSpace(l.kubectl("create", "token", "viewer"))
	viewCfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range viewCfg.AuthInfos {
		ai.ClientCertificateData, ai.ClientKeyData, ai.ClientCertificate, ai.ClientKey, ai.Token = nil, nil, "", "", token
	}
	viewer := filepath.Join(t.TempDir(), "viewer.kubeconfig")
	if err := clientcmd.WriteToFile(*viewCfg, viewer); err != nil {
		t.Fatal(err)
	}
	vout, verr := exec.CommandContext(ctx, l.bin, "observe", "--kubeconfig", viewer, "--node", name+"-node2").CombinedOutput()
	if verr == nil || !strings.Contains(string(vout), "forbidden") || !strings.Contains(string(vout), "nodes/proxy") {
		t.Errorf("a view-only user reading flows: %v\n%s", verr, vout)
	}
}

// twoWorkers brings up a lab of two workers without a ToR for one test (taken down after it)
// and returns it with apply, which applies a manifest with the real kubectl.
func twoWorkers(t *testing.T, name string, timeout time.Duration) (*lab, func(yaml string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	l := &lab{t: t, name: name, bin: framework.Binary(t), ctx: ctx}
	downAtCleanup(t, name, l.bin, "master", "node1", "node2")
	l.skiff("up", "--nodes", "2", "--tor", "none", "--timeout", "4m")
	cfg, err := clientcmd.BuildConfigFromFlags("", skifflab.Kubeconfig(name))
	if err != nil {
		t.Fatal(err)
	}
	l.client = kubernetes.NewForConfigOrDie(cfg)
	return l, func(yaml string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "manifest.yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		l.kubectl("apply", "-f", f)
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
