package agent

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// buildAt builds skiff as a release of Kubernetes version v1.<minor>.0 (the Makefile's version
// flags with another minor), as the build of another release would report itself.
func buildAt(t *testing.T, minor string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	bin := filepath.Join(t.TempDir(), "skiff")
	pkg := "k8s.io/component-base/version."
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X "+pkg+"gitVersion=v1."+minor+".0+skiff -X "+pkg+"gitMajor=1 -X "+pkg+"gitMinor="+minor,
		"-o", bin, "./cmd/skiff")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestAgentVersionSkew holds agents to upstream's version-skew policy against a build one
// minor version ahead of the one under test: an agent older than its server registers and
// works (what an upgrade does, servers first), an agent newer than its server refuses to run
// and says why.
func TestAgentVersionSkew(t *testing.T) {
	current := strings.TrimSpace(run(t, framework.Binary(t), "version"))
	if !strings.Contains(current, "Kubernetes API v1.") {
		t.Fatalf("the build under test has no release version (make build sets it): %s", current)
	}
	minor := strings.SplitN(strings.SplitN(current, "Kubernetes API v1.", 2)[1], ".", 2)[0]
	next := buildAt(t, incr(t, minor))

	t.Run("older agent", func(t *testing.T) {
		s := framework.NewServer(t, t.TempDir())
		s.Bin = next
		s.Start()
		startJoinedAgent(t, s, framework.Binary(t), "older", t.TempDir())
		n := waitNodeReady(t, s, "older")
		if !strings.HasPrefix(n.Status.NodeInfo.KubeletVersion, "v1."+minor+".") {
			t.Errorf("the older agent reports kubelet version %s, want v1.%s.x", n.Status.NodeInfo.KubeletVersion, minor)
		}
	})
	t.Run("newer agent", func(t *testing.T) {
		s := framework.StartServer(t)
		a := startJoinedAgent(t, s, next, "newer", t.TempDir())
		select {
		case <-a.done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("an agent newer than its server still runs after 2m:\n%s", a.log())
		}
		if a.err == nil || !strings.Contains(a.log(), "newer than its server") || !strings.Contains(a.log(), "upgrade the servers first") {
			t.Errorf("the newer agent exited with %v; want it to refuse, saying why:\n%s", a.err, a.log())
		}
	})
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func incr(t *testing.T, minor string) string {
	t.Helper()
	n, err := strconv.Atoi(minor)
	if err != nil {
		t.Fatalf("minor version %q: %v", minor, err)
	}
	return strconv.Itoa(n + 1)
}
