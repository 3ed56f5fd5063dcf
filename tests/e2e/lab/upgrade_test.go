package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	skifflab "github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// upgradeFrom is the commit before issue 44's first change (operations: install, HA,
// certificates, upgrades): the upgrade e2e starts its lab from the build of that commit.
const upgradeFrom = "c956285"

// buildAt builds skiff at commit rev of this repository (a git worktree of its own) and puts
// this build's image archives beside it, and returns the binary.
func buildAt(t *testing.T, rev string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..", "..", "..")
	dir := filepath.Join(t.TempDir(), "src")
	if out, err := exec.Command("git", "-C", repo, "worktree", "add", "--detach", dir, rev).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add %s: %v\n%s", rev, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("git", "-C", repo, "worktree", "remove", "--force", dir).Run() })
	bin := filepath.Join(t.TempDir(), "skiff")
	build := exec.Command("go", "build", "-o", bin, "./cmd/skiff")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", rev, err, out)
	}
	_, images := framework.AgentArtifacts(t)
	archives, _ := filepath.Glob(filepath.Join(images, "*.tar"))
	if err := os.MkdirAll(filepath.Join(filepath.Dir(bin), "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range archives {
		b, err := os.ReadFile(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(bin), "images", filepath.Base(a)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// TestLabUpgrade upgrades a lab from the build of upgradeFrom to this one with `skiff lab
// upgrade` — the master's server, then each node's agent — while a pod pings a pod on another
// node (20 a second), a pod holds one TCP flow through a ClusterIP (a line and its echo every
// 100 ms), and ConfigMaps are written through the API: not one echo is lost, the flow is never
// broken, no acknowledged write is lost, and objects written by the old build are read by the
// new one.
func TestLabUpgrade(t *testing.T) {
	const name = "e2eupg"
	old := buildAt(t, upgradeFrom)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	l := &lab{t: t, name: name, bin: old, ctx: ctx}
	downAtCleanup(t, name, framework.Binary(t), "master", "node1", "node2")
	l.skiff("up", "--nodes", "2", "--tor", "frr", "--timeout", "4m")
	cfg, err := clientcmd.BuildConfigFromFlags("", skifflab.Kubeconfig(name))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	l.client = kubernetes.NewForConfigOrDie(cfg)

	// Written by the old build.
	if _, err := l.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "from-old"},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An echo server on node2 behind a ClusterIP; a pod on node1 holding one flow to it.
	echo := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "echo", Labels: map[string]string{"app": "echo"}}, Spec: corev1.PodSpec{NodeName: name + "-node2",
		Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", Command: []string{"netutil", "echo", "--port", "7"}}}}}
	if _, err := l.client.CoreV1().Pods("default").Create(ctx, echo, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := l.client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Port: 7, TargetPort: intstr.FromInt32(7)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	echoPod := l.podNamed("echo")
	framework.Eventually(t, 90*time.Second, "echo Running", func() (bool, string) {
		echoPod = l.podNamed("echo")
		return echoPod.Status.Phase == corev1.PodRunning, string(echoPod.Status.Phase)
	})
	holder := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "holder"}, Spec: corev1.PodSpec{NodeName: name + "-node1", RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", Command: []string{"netutil", "hold", svc.Spec.ClusterIP + ":7", "100ms"}}}}}
	if _, err := l.client.CoreV1().Pods("default").Create(ctx, holder, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	heldRE := regexp.MustCompile(`held (\d+) round trips`)
	held := func() (int, string) {
		b, _ := l.client.CoreV1().Pods("default").GetLogs("holder", &corev1.PodLogOptions{}).DoRaw(ctx)
		m := heldRE.FindAllStringSubmatch(string(b), -1)
		if len(m) == 0 {
			return 0, string(b)
		}
		n, _ := strconv.Atoi(m[len(m)-1][1])
		return n, string(b)
	}
	framework.Eventually(t, 90*time.Second, "the holder's flow through the ClusterIP carrying round trips", func() (bool, string) {
		n, out := held()
		return n > 10, out
	})
	pinger := l.pod("pinger", "node1")
	// And a flow from outside the cluster (the ToR) through node1's NodePort to the echo pod
	// on node2: node1's NodePort program translates it, SNATed, by its connection-tracking
	// entries — which this build keeps in a new layout (counters added: map layout 2), so the
	// upgrade converts them; had it rebuilt them, the next reply would be reset.
	netutil := filepath.Join(filepath.Dir(framework.Binary(t)), "netutil")
	nodePort := fmt.Sprintf("198.18.0.2:%d", svc.Spec.Ports[0].NodePort)
	var torOut syncBuffer
	torHold := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+name+"-tor", "--", netutil, "hold", nodePort, "100ms")
	torHold.Stdout, torHold.Stderr = &torOut, &torOut
	if err := torHold.Start(); err != nil {
		t.Fatal(err)
	}
	torDone := make(chan struct{}) // closed when the process has exited, with torErr its Wait's
	var torErr error
	go func() { torErr = torHold.Wait(); close(torDone) }()
	t.Cleanup(func() { _ = torHold.Process.Kill(); <-torDone })
	torHeld := func() int {
		m := heldRE.FindAllStringSubmatch(torOut.String(), -1)
		if len(m) == 0 {
			return 0
		}
		n, _ := strconv.Atoi(m[len(m)-1][1])
		return n
	}
	framework.Eventually(t, 30*time.Second, "the ToR's flow through node1's NodePort carrying round trips", func() (bool, string) {
		return torHeld() > 10, torOut.String()
	})

	// The load: pings to the echo pod, ConfigMap writes; then the upgrade.
	const count = 3000 // 150 s at 50 ms: longer than the upgrade
	pid := containerPID(t, l, pinger)
	ping := exec.CommandContext(ctx, "nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", pid), "--", "ping", "-n", "-O", "-i", "0.05", "-c", strconv.Itoa(count), "-w", "240", echoPod.Status.PodIP)
	var pingOut strings.Builder
	ping.Stdout, ping.Stderr = &pingOut, &pingOut
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	load := startWriteLoad(ctx, l.client, "during", 50*time.Millisecond)
	time.Sleep(2 * time.Second)
	heldBefore, _ := held()
	torBefore := torHeld()
	upgrade := exec.CommandContext(ctx, framework.Binary(t), "lab", "--name", name, "upgrade", "--to", framework.Binary(t))
	out, err := upgrade.CombinedOutput()
	if err != nil {
		t.Fatalf("skiff lab upgrade: %v\n%s", err, out)
	}
	t.Logf("skiff lab upgrade:\n%s", out)
	_ = ping.Wait()

	m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`).FindStringSubmatch(pingOut.String())
	if m == nil || m[1] != m[2] || m[1] != strconv.Itoa(count) {
		var unanswered []string
		for _, line := range strings.Split(pingOut.String(), "\n") {
			if strings.Contains(line, "no answer") || strings.Contains(line, "Unreachable") {
				unanswered = append(unanswered, line)
			}
		}
		t.Errorf("ping across the upgrade: %v; unanswered:\n%s", m, strings.Join(unanswered, "\n"))
	}
	heldAfter, holderLog := held()
	h, err := l.client.CoreV1().Pods("default").Get(ctx, "holder", metav1.GetOptions{})
	if err != nil || h.Status.Phase != corev1.PodRunning || heldAfter <= heldBefore+100 || strings.Contains(holderLog, "broken") {
		t.Errorf("the flow through the ClusterIP across the upgrade: phase %v, %d round trips before, %d after (%v):\n%s",
			h.Status.Phase, heldBefore, heldAfter, err, holderLog)
	}
	time.Sleep(2 * time.Second) // a last "held" line after the upgrade's end
	select {
	case <-torDone:
		t.Errorf("the ToR's flow through node1's NodePort ended during the upgrade (%v):\n%s", torErr, torOut.String())
	default:
		if after := torHeld(); after <= torBefore+100 {
			t.Errorf("the ToR's flow through node1's NodePort: %d round trips before the upgrade, %d after:\n%s", torBefore, after, torOut.String())
		}
	}
	lost, have, err := load.finish(ctx, l.client)
	if err != nil {
		t.Fatal(err)
	}
	if !have["from-old"] {
		t.Error("the ConfigMap the old build wrote is not read by the new one")
	}
	for _, n := range lost {
		t.Errorf("acknowledged write %s lost", n)
	}
	t.Logf("ping %s/%s answered, %d→%d round trips on the held flow, %d→%d on the NodePort flow, %d writes acknowledged, %d lost",
		m[2], m[1], heldBefore, heldAfter, torBefore, torHeld(), load.acknowledged(), len(lost))
	// Every node runs the new binary now.
	for _, role := range []string{"master", "node1", "node2"} {
		pid, err := skifflab.PID(name, role)
		if err != nil {
			t.Fatal(err)
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if exe != framework.Binary(t) {
			t.Errorf("%s runs %s after the upgrade, want %s", role, exe, framework.Binary(t))
		}
	}
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
