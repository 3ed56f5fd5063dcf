package agent

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestTwoAgents joins two `skiff agent`s with the server's token, each with its own
// containerd in its own network namespace: each obtains its client and serving certificates
// through CSRs the control plane approves and signs, both nodes become Ready with their own
// pod CIDRs, a pod on each gets an address from its node's block, and the API server reaches
// each agent's API (kubectl logs) over TLS verified against the cluster CA.
func TestTwoAgents(t *testing.T) {
	s := framework.StartServer(t)
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cni, images := framework.AgentArtifacts(t)
	tokenBytes, err := os.ReadFile(filepath.Join(s.Dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	server := fmt.Sprintf("https://127.0.0.1:%d", s.Port)

	// A token whose CA pin is wrong is refused before any credential is sent.
	wrongPin := "K10" + strings.Repeat("0", 64) + token[strings.Index(token, "::"):]
	out, err := exec.CommandContext(ctx, framework.Binary(t), "agent", "--server", server, "--token", wrongPin, "--data-dir", t.TempDir(),
		"--node-name", "impostor").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "does not match the join token's pin") {
		t.Fatalf("agent with a wrong CA pin: %v\n%s", err, out)
	}

	// The bootstrap token itself may only ask for certificates.
	secret := token[strings.Index(token, "::")+2:]
	boot, err := kubernetes.NewForConfig(&rest.Config{Host: server, BearerToken: secret,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(s.Dir, "pki", "ca.crt")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := boot.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("bootstrap token listing secrets: %v, want Forbidden", err)
	}
	if _, err := boot.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("bootstrap token listing CSRs: %v", err)
	}

	for _, node := range []string{"agent-a", "agent-b"} {
		_, nsPath := framework.Netns(t)
		dir := t.TempDir()
		t.Cleanup(func() { framework.KillUnder(dir) })
		t.Cleanup(func() { _ = os.RemoveAll(filepath.Join("/sys/fs/bpf/skiff", node)) }) // its policy pins
		root := fmt.Sprintf("/skiff/e2e-%s-%d", node, os.Getpid())
		t.Cleanup(func() { _ = cgroups.KillAll(cgroups.Mounts(), root) })
		agent := exec.Command(framework.Binary(t), "agent", "--server", server, "--token", token, "--data-dir", dir, "--netns", nsPath, "--bgp=false", "--service-proxy=false", "--dns=false", "--eviction-hard="+lab.EvictionHard, "--image-gc-high-threshold=100",
			"--cgroup-root", root,
			"--node-name", node, "--node-ip", "127.0.0.1", "--port", strconv.Itoa(framework.FreePort(t)),
			"--healthz-address", "127.0.0.1:"+strconv.Itoa(framework.FreePort(t)),
			"--cni-plugin", cni, "--images-dir", images, "--pod-log-dir", filepath.Join(dir, "logs"))
		agent.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := agent.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = agent.Process.Signal(syscall.SIGTERM); _ = agent.Wait() })
	}
	cidrs := map[string]netip.Prefix{}
	eventually(t, 90*time.Second, "both agents' nodes Ready", func() (bool, string) {
		for _, node := range []string{"agent-a", "agent-b"} {
			n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil || n.Spec.PodCIDR == "" {
				return false, fmt.Sprint(node, err)
			}
			readyNow := false
			for _, cond := range n.Status.Conditions {
				readyNow = readyNow || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
			}
			if !readyNow {
				return false, node + " not ready"
			}
			cidrs[node] = netip.MustParsePrefix(n.Spec.PodCIDR)
		}
		return cidrs["agent-a"] != cidrs["agent-b"], fmt.Sprint(cidrs)
	})
	for _, node := range []string{"agent-a", "agent-b"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-" + node}, Spec: corev1.PodSpec{NodeName: node,
			Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullIfNotPresent}}}}
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, node := range []string{"agent-a", "agent-b"} {
		eventually(t, 60*time.Second, "pod on "+node+" Running in its node's block", func() (bool, string) {
			p, err := c.CoreV1().Pods("default").Get(ctx, "on-"+node, metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprint(err)
			}
			ip, err := netip.ParseAddr(p.Status.PodIP)
			return err == nil && cidrs[node].Contains(ip), p.Status.PodIP
		})
	}
	// Each node asked for a client certificate as the bootstrap token and for a serving
	// certificate as itself; all were approved and issued.
	csrs, err := c.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	requests := map[string]bool{}
	for _, r := range csrs.Items {
		approved := false
		for _, cond := range r.Status.Conditions {
			approved = approved || (cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue)
		}
		if !approved || len(r.Status.Certificate) == 0 {
			t.Errorf("CSR %s by %s for %s: approved=%v issued=%v", r.Name, r.Spec.Username, r.Spec.SignerName, approved, len(r.Status.Certificate) > 0)
		}
		requests[r.Spec.SignerName+" by "+r.Spec.Username] = true
	}
	bootUser := "system:bootstrap:" + secret[:6]
	for _, want := range []string{
		certificatesv1.KubeAPIServerClientKubeletSignerName + " by " + bootUser,
		certificatesv1.KubeletServingSignerName + " by system:node:agent-a",
		certificatesv1.KubeletServingSignerName + " by system:node:agent-b",
	} {
		if !requests[want] {
			t.Errorf("no CSR %q among %v", want, requests)
		}
	}
	table, err := s.Run(ctx, framework.Kubectl(t, 33), "get", "csr")
	if err != nil || strings.Count(table, "Approved,Issued") != 4 {
		t.Errorf("kubectl get csr: %v\n%s", err, table)
	}
	// The API server verifies each joined agent's serving certificate against the cluster CA.
	for _, node := range []string{"agent-a", "agent-b"} {
		eventually(t, 30*time.Second, "kubectl logs of the pod on "+node, func() (bool, string) {
			out, err := s.Run(ctx, framework.Kubectl(t, 33), "logs", "on-"+node)
			return err == nil, fmt.Sprint(err, " ", out)
		})
	}

	for _, node := range []string{"agent-a", "agent-b"} {
		_ = c.CoreV1().Pods("default").Delete(ctx, "on-"+node, metav1.DeleteOptions{})
	}
	eventually(t, 60*time.Second, "pods removed by their agents", func() (bool, string) {
		l, _ := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return len(l.Items) == 0, fmt.Sprint(len(l.Items))
	})
}
