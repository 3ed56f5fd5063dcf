package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestServerCertificateRenewalWhileRunning runs a server whose own certificates last three
// minutes (--certificate-lifetime), with its agent beside it, past the expiry of every
// certificate it started with: the running server renews its PKI and kubeconfigs (no
// restart), and afterwards the API server serves its new certificate, etcd takes the new
// client certificates, the scheduler and the controller manager still act (a Deployment made
// after the first certificates expired gets a ReplicaSet and a scheduled, running pod), the
// agent beside the server still renews its Lease, and the API server still reaches the
// agent's API. kubectl, reading admin.kubeconfig afresh each time, never fails meanwhile.
func TestServerCertificateRenewalWhileRunning(t *testing.T) {
	dir := t.TempDir()
	_, nsPath := framework.Netns(t)
	s := framework.NewServerWithAgent(t, dir, nsPath, "--certificate-lifetime", "3m")
	s.Start()
	l := pki.Layout{Dir: filepath.Join(dir, "pki")}
	start := time.Now()
	first, err := pki.Inventory(l, []string{filepath.Join(dir, "admin.kubeconfig"), filepath.Join(dir, "scheduler.kubeconfig"),
		filepath.Join(dir, "controller-manager.kubeconfig"), filepath.Join(dir, "node.kubeconfig")}, start)
	if err != nil {
		t.Fatal(err)
	}
	var lastExpiry time.Time
	for _, c := range first {
		if c.IsCA {
			continue
		}
		if life := c.NotAfter.Sub(start); life > 4*time.Minute {
			t.Fatalf("%s lasts %v: --certificate-lifetime not applied", c.Name, life)
		}
		lastExpiry = later(lastExpiry, c.NotAfter)
	}
	node := nodeName(t, s)

	// Until every first certificate has expired (and a little more), kubectl keeps working.
	failures := 0
	for time.Now().Before(lastExpiry.Add(15 * time.Second)) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := s.Run(ctx, framework.Kubectl(t, 33), "get", "--raw", "/readyz")
		cancel()
		if err != nil || strings.TrimSpace(out) != "ok" {
			failures++
			t.Logf("%s: kubectl get --raw /readyz: %v %s", time.Now().Format(time.TimeOnly), err, out)
		}
		time.Sleep(5 * time.Second)
	}
	if failures > 0 {
		t.Errorf("kubectl failed %d times while the server renewed its certificates", failures)
	}
	after := time.Now()

	now, err := pki.Inventory(l, []string{filepath.Join(dir, "admin.kubeconfig"), filepath.Join(dir, "scheduler.kubeconfig"),
		filepath.Join(dir, "controller-manager.kubeconfig"), filepath.Join(dir, "node.kubeconfig")}, after)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range now {
		if !c.IsCA && !c.NotAfter.After(after) {
			t.Errorf("%s expired at %v and was not renewed", c.Name, c.NotAfter)
		}
	}
	if log := s.Log(); !strings.Contains(log, `why="expires `) {
		t.Errorf("the server did not log its renewals")
	}

	// The API server serves the renewed certificate.
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	served := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	if !served.NotAfter.After(after) {
		t.Errorf("the API server serves a certificate that expired at %v", served.NotAfter)
	}
	// etcd takes the renewed client certificate on a new connection.
	if out := s.Etcdctl(t, "endpoint", "health"); !strings.Contains(out, "is healthy") {
		t.Errorf("etcdctl endpoint health: %s", out)
	}

	// The test's own clients read admin.kubeconfig as it is at each step: its certificate
	// lasts three minutes too.
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	eventually(t, 30*time.Second, "the node's Lease renewed after its first client certificate expired", func() (bool, string) {
		l, err := c.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(after), fmt.Sprint(l.Spec.RenewTime)
	})
	one := int32(1)
	labels := map[string]string{"app": "renewed"}
	if _, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "renewed"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// The server's node carries the control-plane taint.
					Tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}},
					Containers:  []corev1.Container{{Name: "c", Image: "localhost/skiff/pause:1"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the Deployment's pod scheduled and running", func() (bool, string) {
		pods, err := s.Client(t).CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=renewed"})
		if err != nil || len(pods.Items) == 0 {
			return false, fmt.Sprint("no pod yet: ", err)
		}
		p := pods.Items[0]
		return p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning, fmt.Sprintf("node %q phase %s", p.Spec.NodeName, p.Status.Phase)
	})
	body, err := s.Client(t).CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy/healthz").DoRaw(ctx)
	if err != nil || string(body) != "ok" {
		t.Errorf("the API server reaching the agent's API past the first certificates' expiry: %q %v", body, err)
	}
	if t.Failed() {
		t.Logf("server log:\n%s", s.Log())
	}
}

// nodeName is the name of the server's own node, once it registered.
func nodeName(t *testing.T, s *framework.Server) string {
	t.Helper()
	var name string
	eventually(t, 90*time.Second, "the server's node registered", func() (bool, string) {
		out, err := exec.Command(framework.Kubectl(t, 33), "--kubeconfig", s.Kubeconfig, "get", "nodes", "-o", "name").CombinedOutput()
		name = strings.TrimPrefix(strings.TrimSpace(string(out)), "node/")
		return err == nil && name != "" && !strings.Contains(name, "\n"), string(out)
	})
	return name
}
