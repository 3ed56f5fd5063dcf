package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// podShell runs this test binary's load and wait helpers (TestMain) inside a lab pod's
// network namespace and under its node's pod cgroup, where skiff's socket hooks see them.
type podShell struct {
	b   *testing.B
	ctx context.Context
	cg  string
	pid int
}

// newPodShell finds pod's container on its node (role: "node1" …) of lab name.
func newPodShell(b *testing.B, ctx context.Context, name, role string, pod *corev1.Pod) *podShell {
	labDir := filepath.Join("/var/lib/skiff/lab", name)
	pid := framework.ContainerPID(b, ctx, filepath.Join(labDir, role, "containerd", "containerd.sock"), pod.Status.ContainerStatuses[0].ContainerID, "")
	cg := filepath.Join(cgroups.Unified(), lab.CgroupRoot(name), role, "bench-"+pod.Name)
	if err := os.MkdirAll(cg, 0o755); err != nil {
		b.Fatal(err)
	}
	return &podShell{b: b, ctx: ctx, cg: cg, pid: pid}
}

func (s *podShell) cmd(env ...string) *exec.Cmd {
	self, _ := os.Executable()
	cmd := exec.CommandContext(s.ctx, "sh", "-c", fmt.Sprintf(`echo $$ > %s/cgroup.procs && exec nsenter --net=/proc/%d/ns/net %s`, s.cg, s.pid, self))
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// measure runs the load helper against target for secs seconds.
func (s *podShell) measure(target string, secs int) load {
	out, err := s.cmd("SKIFF_LOAD_TARGET="+target, "SKIFF_LOAD_SECONDS="+strconv.Itoa(secs)).CombinedOutput()
	var n int
	var l load
	if _, perr := fmt.Sscan(strings.TrimSpace(string(out)), &n, &l.p50, &l.p99, &l.failed); err != nil || perr != nil || n == 0 {
		s.b.Fatalf("load helper to %s: %v %v\n%s", target, err, perr, out)
	}
	l.rate = float64(n) / float64(secs)
	return l
}

// waiter is a started wait helper: it dials the address written to it until the connection
// is answered (SKIFF_WAIT=answered) or refused three times running (SKIFF_WAIT=refused).
type waiter struct {
	s     *podShell
	what  string
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	in    *bufio.Writer
	lines *bufio.Scanner
}

func (s *podShell) startWait(what, until string) *waiter {
	w := &waiter{s: s, what: what, cmd: s.cmd("SKIFF_WAIT=" + until)}
	stdin, _ := w.cmd.StdinPipe()
	stdout, _ := w.cmd.StdoutPipe()
	w.cmd.Stderr = os.Stderr
	if err := w.cmd.Start(); err != nil {
		s.b.Fatal(err)
	}
	w.stdin, w.in, w.lines = stdin, bufio.NewWriter(stdin), bufio.NewScanner(stdout)
	if !w.lines.Scan() || w.lines.Text() != "ready" {
		s.b.Fatalf("%s: wait helper: %q", what, w.lines.Text())
	}
	return w
}

// dial hands the helper its target.
func (w *waiter) dial(target string) {
	fmt.Fprintln(w.in, target)
	_ = w.in.Flush()
}

// at is when the helper saw what it waited for.
func (w *waiter) at() time.Time {
	// Closing stdin first lets the helper end even when no target was written.
	defer func() { _ = w.stdin.Close(); _ = w.cmd.Wait() }()
	if !w.lines.Scan() {
		w.s.b.Fatalf("%s: the wait helper printed nothing", w.what)
	}
	ns, err := strconv.ParseInt(w.lines.Text(), 10, 64)
	if err != nil {
		w.s.b.Fatalf("%s: wait helper: %q", w.what, w.lines.Text())
	}
	return time.Unix(0, ns)
}

// answered starts a wait helper, then create (which returns the address to dial), and
// returns the time from create's start until the helper's connection is answered.
func (s *podShell) answered(what string, create func() string) time.Duration {
	w := s.startWait(what, "answered")
	start := time.Now()
	w.dial(create())
	return w.at().Sub(start)
}

// waitClient prints "ready", reads a HOST:PORT line, then dials it every millisecond (each
// attempt waits 20 ms at most, so a change mid-attempt is seen within that) for at most a
// minute until, with SKIFF_WAIT=answered, a connection is answered, or with
// SKIFF_WAIT=refused, three attempts running fail; it prints the Unix time in nanoseconds of
// the answer or of the first of the three failures.
func waitClient(until string) {
	fmt.Println("ready")
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	target := strings.TrimSpace(line)
	deadline := time.Now().Add(time.Minute)
	var firstFailure time.Time
	failures := 0
	for time.Now().Before(deadline) {
		start := time.Now()
		c, err := net.DialTimeout("tcp", target, 20*time.Millisecond)
		switch {
		case err == nil && until != "refused":
			at := time.Now().UnixNano()
			c.Close()
			fmt.Println(at)
			return
		case err == nil:
			c.Close()
			failures = 0
		case until == "refused":
			if failures == 0 {
				firstFailure = start
			}
			if failures++; failures == 3 {
				fmt.Println(firstFailure.UnixNano())
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Println("timeout")
}
