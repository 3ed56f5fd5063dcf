package agent

import (
	"bufio"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestContainerLogRotation runs a container that prints a numbered line every 2 ms on an agent
// that rotates logs at 16 KiB and keeps 3 files: the log directory never holds more, older
// files are gzipped, and `kubectl logs -f` started before the first rotation follows the
// container across every rotation without losing or repeating a line.
func TestContainerLogRotation(t *testing.T) {
	_, nsPath := framework.Netns(t)
	dir := t.TempDir()
	n := newTestNode(t, dir, nsPath, "--container-log-max-size", "16Ki",
		"--container-log-max-files", "3", "--container-log-monitor-interval", "500ms")
	c, ctx, s := n.c, n.ctx, n.s
	kc := framework.Kubectl(t, 33)
	n.untaint()
	n.kubectl("", "run", "chatter", "--image=localhost/skiff/netutil:1", "--", "tick", "2ms")
	n.waitPhase("chatter", corev1.PodRunning)
	p, err := c.CoreV1().Pods("default").Get(ctx, "chatter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := string(p.UID)

	// Follow from the start; every line goes to the channel.
	follow := exec.CommandContext(ctx, kc, "logs", "-f", "chatter")
	follow.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig)
	out, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = follow.Process.Kill(); _ = follow.Wait() }()
	lines := make(chan string, 1<<16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	// Watch the container's log directory through at least four rotations.
	logDir := filepath.Join(dir, "logs", "default_chatter_"+uid, "chatter")
	rotations := map[string]bool{}
	var last []string
	deadline := time.Now().Add(90 * time.Second)
	for len(rotations) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rotations in 90 s; the directory holds %v", len(rotations), last)
		}
		entries, err := os.ReadDir(logDir)
		if err != nil {
			t.Fatal(err)
		}
		last = last[:0]
		for _, e := range entries {
			last = append(last, e.Name())
			if name := strings.TrimSuffix(e.Name(), ".gz"); name != "0.log" && !strings.HasSuffix(name, ".tmp") {
				rotations[name] = true
			}
		}
		if files := countLogFiles(last); files > 3 {
			t.Fatalf("%d log files kept, want at most 3: %v", files, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	sort.Strings(last)
	gz := 0
	for _, name := range last {
		path := filepath.Join(logDir, name)
		switch {
		case strings.HasSuffix(name, ".gz"):
			gz++
			f, err := os.Open(path)
			if err != nil {
				continue // removed by a rotation since the listing
			}
			zr, err := gzip.NewReader(f)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			b, err := io.ReadAll(zr)
			f.Close()
			if err != nil || !strings.Contains(string(b), " stdout F tick ") || len(b) < 16<<10 {
				t.Fatalf("%s does not hold a rotated CRI log of at least 16 KiB (%d bytes): %v", name, len(b), err)
			}
		case name != "0.log":
			if fi, err := os.Stat(path); err == nil && fi.Size() < 16<<10 {
				t.Errorf("%s was rotated at %d bytes, below the 16 KiB asked for", name, fi.Size())
			}
		}
	}
	if gz == 0 {
		t.Errorf("no older rotated file is gzipped: %v", last)
	}

	// kubectl logs -f saw every line once, in order, across the rotations: up to the first
	// line of the live file, which every rotated line came before.
	b, err := os.ReadFile(filepath.Join(logDir, "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	_, live, _ := strings.Cut(strings.SplitN(string(b), "\n", 2)[0], " stdout F tick ")
	target, err := strconv.Atoi(live)
	if err != nil {
		t.Fatalf("the live log begins with %q", strings.SplitN(string(b), "\n", 2)[0])
	}
	first, prev := -1, -1
	timeout := time.After(30 * time.Second)
	for collected := 0; prev < target; {
		var l string
		var ok bool
		select {
		case l, ok = <-lines:
		case <-timeout:
			t.Fatalf("kubectl logs -f stopped at tick %d (first %d) after %d lines", prev, first, collected)
		}
		if !ok {
			t.Fatalf("kubectl logs -f ended at tick %d (first %d) after %d lines", prev, first, collected)
		}
		n, err := strconv.Atoi(strings.TrimPrefix(l, "tick "))
		if err != nil {
			t.Fatalf("kubectl logs -f printed %q", l)
		}
		if prev >= 0 && n != prev+1 {
			t.Fatalf("kubectl logs -f jumped from tick %d to %d", prev, n)
		}
		if first < 0 {
			first = n
		}
		prev = n
		collected++
	}

	// A plain `kubectl logs` reads the live file: it begins after the rotated lines.
	plain := strings.SplitN(n.kubectl("", "logs", "chatter"), "\n", 2)[0]
	if n, err := strconv.Atoi(strings.TrimPrefix(plain, "tick ")); err != nil || n < target {
		t.Errorf("kubectl logs begins with %q, want the live file's first line or later (tick %d)", plain, target)
	}
	if first > target/2 {
		t.Errorf("kubectl logs -f began at tick %d, after most rotations (the live file began at %d)", first, target)
	}
}

// countLogFiles counts a log directory's kept files: a compression's temporary file is not one.
func countLogFiles(names []string) int {
	n := 0
	for _, name := range names {
		if !strings.HasSuffix(name, ".tmp") {
			n++
		}
	}
	return n
}
