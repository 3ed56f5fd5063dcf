package lab

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	skifflab "github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestLabClusterNetworkPolicy applies ClusterNetworkPolicies (policy.networking.k8s.io,
// served out of the box) with the real kubectl beside a namespace's NetworkPolicy: an Admin
// Deny overrides the NetworkPolicy's allow, an Admin Pass of higher priority defers to it,
// and a Baseline Deny applies only to the pod no NetworkPolicy selects; skiff observe and
// skiff policy trace name the policies that decide.
func TestLabClusterNetworkPolicy(t *testing.T) {
	const name = "e2ecnp"
	l, apply := twoWorkers(t, name, 6*time.Minute)
	// Served at start, in both versions.
	if out := l.kubectl("api-resources", "--api-group", "policy.networking.k8s.io"); !strings.Contains(out, "clusternetworkpolicies") || !strings.Contains(out, "cnp") {
		t.Fatalf("kubectl api-resources:\n%s", out)
	}
	apply(`apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  nodeName: ` + name + `-node2
  containers: [{name: c, image: localhost/skiff/netutil:1}]
---
apiVersion: v1
kind: Pod
metadata: {name: other, labels: {app: other}}
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
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-client}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{from: [{podSelector: {matchLabels: {app: client}}}], ports: [{port: 8080}]}]
`)
	l.kubectl("wait", "--for=condition=Ready", "pod/web", "pod/other", "pod/client", "--timeout=120s")
	web, other := l.podNamed("web"), l.podNamed("other")
	webURL, otherURL := "http://"+web.Status.PodIP+":8080/hostname", "http://"+other.Status.PodIP+":8080/hostname"
	answered := func(url, want string) func() (bool, string) {
		return func() (bool, string) {
			out := l.fetchErr("client", url)
			return strings.Contains(out, want) == (want != ""), out
		}
	}
	refused := func(url string) func() (bool, string) {
		return func() (bool, string) {
			out := l.fetchErr("client", url)
			return !strings.Contains(out, "web") && !strings.Contains(out, "other"), out
		}
	}
	framework.Eventually(t, 30*time.Second, "the NetworkPolicy admits client → web", answered(webURL, "web"))

	// An Admin Deny overrides the NetworkPolicy's allow.
	apply(`apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: deny-to-web}
spec:
  tier: Admin
  priority: 20
  subject: {pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: web}}}}
  ingress:
  - {name: deny-all, action: Deny, from: [{namespaces: {}}]}
`)
	framework.Eventually(t, 30*time.Second, "the Admin Deny refuses client → web despite the NetworkPolicy", refused(webURL))
	if out, err := observeLab(l, "--verdict", "dropped", "--pod", "default/web", "--last", "1"); err != nil ||
		!strings.Contains(out, "policy-verdict:deny-to-web INGRESS DROPPED") || !strings.Contains(out, "(rule deny-all)") {
		t.Errorf("skiff observe after the Admin Deny: %v\n%s", err, out)
	}
	trace, err := l.in("node2", l.bin, "policy", "trace", l.podNamed("client").Status.PodIP, web.Status.PodIP, "--port", "8080", "--node", name+"-node2")
	if err != nil || !strings.Contains(trace, "clusternetworkpolicy deny-to-web/deny-all denies it (Admin tier)") {
		t.Errorf("skiff policy trace: %v\n%s", err, trace)
	}

	// An Admin Pass of higher priority (lower number) defers to the NetworkPolicy: admitted
	// on 8080 again; the Deny still decides what the Pass does not cover. Written as
	// v1alpha2, the other version served.
	apply(`apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: pass-client-web}
spec:
  tier: Admin
  priority: 5
  subject: {pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: web}}}}
  ingress:
  - action: Pass
    from: [{pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: client}}}}]
    protocols: [{tcp: {destinationPort: {number: 8080}}}]
`)
	framework.Eventually(t, 30*time.Second, "the Admin Pass defers to the NetworkPolicy, which admits client → web", answered(webURL, "web"))
	if out := l.kubectl("get", "clusternetworkpolicies"); !strings.Contains(out, "pass-client-web") || !strings.Contains(out, "Admin") {
		t.Errorf("kubectl get clusternetworkpolicies:\n%s", out)
	}

	// A Baseline Deny: the pod no NetworkPolicy selects (other) is refused; web, selected by
	// one, is still decided by it.
	framework.Eventually(t, 30*time.Second, "client → other, no policy", answered(otherURL, "other"))
	apply(`apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: baseline-deny}
spec:
  tier: Baseline
  priority: 1
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: default}}}
  ingress:
  - {name: deny-all, action: Deny, from: [{namespaces: {}}]}
`)
	framework.Eventually(t, 30*time.Second, "the Baseline Deny refuses client → other", refused(otherURL))
	framework.Eventually(t, 10*time.Second, "web, selected by a NetworkPolicy, still answers", answered(webURL, "web"))
	if out, err := observeLab(l, "--verdict", "dropped", "--pod", "default/other", "--last", "1"); err != nil ||
		!strings.Contains(out, "policy-verdict:baseline-deny INGRESS DROPPED") {
		t.Errorf("skiff observe after the Baseline Deny: %v\n%s", err, out)
	}

	// Deleting them restores the NetworkPolicy alone.
	l.kubectl("delete", "clusternetworkpolicies", "--all")
	framework.Eventually(t, 30*time.Second, "client → other again", answered(otherURL, "other"))
}

// observeLab runs skiff observe against the lab.
func observeLab(l *lab, args ...string) (string, error) {
	out, err := exec.CommandContext(l.ctx, l.bin, append([]string{"observe", "--kubeconfig", skifflab.Kubeconfig(l.name)}, args...)...).CombinedOutput()
	return string(out), err
}
