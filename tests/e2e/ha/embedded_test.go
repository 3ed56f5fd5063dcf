package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/skiff-sh/skiff/agent/apiservers"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// embeddedServer starts server n (1-based) of an embedded-etcd cluster on 127.0.0.n, named
// srv<n>: the first with --cluster-init, the others joining it with its token.
func embeddedServer(t *testing.T, n int, join, token string) *framework.Server {
	t.Helper()
	ip := fmt.Sprintf("127.0.0.%d", n)
	args := []string{"--bind-address", ip, "--advertise-address", ip, "--node-name", fmt.Sprintf("srv%d", n)}
	dir := t.TempDir()
	switch {
	case join == "":
		args = append(args, "--cluster-init")
	case n == 2:
		// As an install would: the join settings in the configuration file, not on the
		// command line (a list given as one, a value the file sets beside them).
		config := filepath.Join(dir, "config.yaml")
		content := fmt.Sprintf("server: %s\ntoken: %q\ntls-san: [srv2.example]\n", join, token)
		if err := os.WriteFile(config, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", config)
	default:
		args = append(args, "--server", join, "--token", token)
	}
	s := framework.NewServer(t, dir, args...)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, l := range strings.Split(s.Log(), "\n") {
			if strings.Contains(l, "etcd") && !strings.Contains(l, "grpc") && !strings.Contains(l, "watch chan") {
				t.Logf("srv%d: %s", n, l)
			}
		}
	})
	s.Start()
	return s
}

// three is what members says of a cluster of three voting members.
const three = "srv1:started:learner=false srv2:started:learner=false srv3:started:learner=false"

// embeddedCluster starts three servers of an embedded-etcd cluster (embeddedServer), the two
// last joining the first with its token, and waits for three voting members.
func embeddedCluster(t *testing.T) []*framework.Server {
	t.Helper()
	first := embeddedServer(t, 1, "", "")
	tokenBytes, err := os.ReadFile(filepath.Join(first.Dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	joinURL := fmt.Sprintf("https://127.0.0.1:%d", first.Port)
	servers := []*framework.Server{first, embeddedServer(t, 2, joinURL, token), embeddedServer(t, 3, joinURL, token)}
	framework.Eventually(t, 30*time.Second, "three voting etcd members", func() (bool, string) {
		got := members(t, first)
		return got == three, got
	})
	return servers
}

// members lists the embedded etcd's members as etcdctl prints them, through server s, as
// "name:started|unstarted:learner?" sorted by name.
func members(t *testing.T, s *framework.Server) string {
	t.Helper()
	out := s.Etcdctl(t, "member", "list", "-w", "simple")
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, ", ")
		if len(f) < 6 {
			continue
		}
		got = append(got, f[2]+":"+f[1]+":learner="+f[len(f)-1])
	}
	slices.Sort(got)
	return strings.Join(got, " ")
}

// TestEmbeddedEtcdHA is HA with embedded etcd, as an operator runs it with k3s: three servers,
// the first started with --cluster-init and two joining it with --server and its token (no
// file copied by hand). Under a write load through the agents' failover client it kills one
// server (no acknowledged write lost, the API stays available), brings it back, removes a
// server by deleting its Node and adds it again, and after losing two servers brings the
// cluster back from the third with --cluster-reset.
func TestEmbeddedEtcdHA(t *testing.T) {
	servers := embeddedCluster(t)
	first := servers[0]
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// srv2's configuration file gave its API server certificate a name.
	if crt := readFile(t, filepath.Join(servers[1].Dir, "pki", "apiserver.crt")); !strings.Contains(crt, "BEGIN CERTIFICATE") {
		t.Fatal("srv2 has no API server certificate")
	} else if names := certNames(t, crt); !slices.Contains(names, "srv2.example") {
		t.Errorf("srv2's API server certificate names %v: the config file's tls-san was not applied", names)
	}
	// The joined servers share the first one's CAs and issued their own serving certificates.
	for _, s := range servers[1:] {
		for _, f := range []string{"pki/ca.crt", "pki/ca.key", "pki/sa.key", "pki/etcd/ca.key", "pki/front-proxy-ca.key"} {
			a, _ := os.ReadFile(filepath.Join(first.Dir, f))
			b, err := os.ReadFile(filepath.Join(s.Dir, f))
			if err != nil || string(a) != string(b) {
				t.Errorf("%s of %s differs from the first server's (%v)", f, s.Dir, err)
			}
		}
	}

	var urls []string
	for i, s := range servers {
		urls = append(urls, fmt.Sprintf("https://127.0.0.%d:%d", i+1, s.Port))
	}
	client := failoverClient(t, first, urls)
	load := startWriteLoad(ctx, client, "embedded")
	framework.Eventually(t, 20*time.Second, "writes flowing", func() (bool, string) { return load.Count() > 20, fmt.Sprint(load.Count()) })

	// The server whose member leads etcd dies: two of three members keep quorum, elect a
	// leader, and the API stays available.
	leader := etcdLeader(t, servers)
	t.Logf("killing srv%d, whose etcd member leads", leader+1)
	servers[leader].Kill()
	before := load.Count()
	framework.Eventually(t, 30*time.Second, "writes continue with a server killed", func() (bool, string) {
		return load.Count() > before+50, fmt.Sprint(load.Count() - before)
	})
	// It comes back with its data and catches up.
	servers[leader].Start()
	framework.Eventually(t, 30*time.Second, "the restarted server serves again", func() (bool, string) {
		_, err := servers[leader].Client(t).CoreV1().ConfigMaps("default").Get(ctx, "embedded-0", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	load.Stop()
	load.CheckNoneLost(ctx, t, servers[leader].Client(t))

	// kubectl delete node srv3: its member leaves the cluster, and its server stops.
	admin := first.Client(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "srv3", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the member controllers' watches see the Node first
	if out, err := first.Run(ctx, framework.Kubectl(t, 33), "delete", "node", "srv3"); err != nil {
		t.Fatalf("kubectl delete node: %v\n%s", err, out)
	}
	const two = "srv1:started:learner=false srv2:started:learner=false"
	framework.Eventually(t, 30*time.Second, "srv3's member removed", func() (bool, string) {
		got := members(t, first)
		return got == two, got
	})
	framework.Eventually(t, 30*time.Second, "the removed server stops", func() (bool, string) {
		return !servers[2].Running(), "running"
	})
	// Added again: its etcd directory emptied, it joins as a new member.
	if err := os.RemoveAll(filepath.Join(servers[2].Dir, "etcd")); err != nil {
		t.Fatal(err)
	}
	servers[2].Start()
	framework.Eventually(t, 30*time.Second, "srv3 a voting member again", func() (bool, string) {
		got := members(t, first)
		return got == three, got
	})

	// Two servers lost: the third has no quorum; --cluster-reset brings it back alone, with
	// every write.
	load = startWriteLoad(ctx, first.Client(t), "reset")
	framework.Eventually(t, 20*time.Second, "writes flowing", func() (bool, string) { return load.Count() > 20, fmt.Sprint(load.Count()) })
	load.Stop()
	servers[1].Kill()
	servers[2].Kill()
	first.Kill()
	reset := exec.CommandContext(ctx, framework.Binary(t), append(first.Args(), "--cluster-reset")...)
	if out, err := reset.CombinedOutput(); err != nil {
		t.Fatalf("skiff server --cluster-reset: %v\n%s", err, out)
	} else if !strings.Contains(string(out), "membership reset") {
		t.Errorf("--cluster-reset did not say what it did:\n%s", out)
	}
	first.Start()
	if got := members(t, first); !strings.HasPrefix(got, "srv1:started:learner=false") || strings.Contains(got, "srv2") {
		t.Errorf("after --cluster-reset the members are %q, want srv1 alone", got)
	}
	load.CheckNoneLost(ctx, t, first.Client(t))
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func certNames(t *testing.T, certPEM string) []string {
	t.Helper()
	certs, err := certutil.ParseCertsPEM([]byte(certPEM))
	if err != nil {
		t.Fatal(err)
	}
	return certs[0].DNSNames
}

// etcdLeader is the index of the server whose member leads the embedded etcd cluster.
func etcdLeader(t *testing.T, servers []*framework.Server) int {
	t.Helper()
	var status []struct {
		Status struct {
			Header struct {
				MemberID uint64 `json:"member_id"`
			} `json:"header"`
			Leader uint64 `json:"leader"`
		}
	}
	for i, s := range servers {
		if err := json.Unmarshal([]byte(s.Etcdctl(t, "endpoint", "status", "-w", "json")), &status); err != nil || len(status) != 1 {
			t.Fatalf("etcdctl endpoint status: %v", err)
		}
		if status[0].Status.Header.MemberID == status[0].Status.Leader {
			return i
		}
	}
	t.Fatal("no server's member leads etcd")
	return -1
}

// failoverClient is a client as an agent has it: the first server's admin credentials, failing
// over between every server's URL.
func failoverClient(t *testing.T, s *framework.Server, urls []string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Timeout = 5 * time.Second
	cfg, _, err = apiservers.Config(cfg, urls, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}
