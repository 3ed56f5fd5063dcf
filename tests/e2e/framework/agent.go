package framework

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"testing"

	"github.com/skiff-sh/skiff/agent/cgroups"
	agentruntime "github.com/skiff-sh/skiff/agent/runtime"
	"github.com/skiff-sh/skiff/lab"
)

// AgentArtifacts returns the skiff-cni binary and the directory of skiff's image archives that
// belong with the skiff binary under test: the ones `make build` put beside $SKIFF_BIN, or ones
// built here once.
func AgentArtifacts(tb testing.TB) (cniPlugin, imagesDir string) {
	tb.Helper()
	dir := filepath.Dir(Binary(tb))
	cniPlugin, imagesDir = filepath.Join(dir, "skiff-cni"), filepath.Join(dir, "images")
	if _, err := os.Stat(filepath.Join(imagesDir, "netutil.tar")); err == nil {
		if _, err := os.Stat(cniPlugin); err == nil {
			return cniPlugin, imagesDir
		}
	}
	artifactsOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		for _, b := range []struct{ out, pkg string }{{"skiff-cni", "./cmd/skiff-cni"}, {"pause", "./cmd/pause"}, {"netutil", "./cmd/netutil"}} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
			cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				artifactsErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
		out, err := exec.Command(Binary(tb), "images", "build", "--pause", filepath.Join(dir, "pause"),
			"--netutil", filepath.Join(dir, "netutil"), "--out", imagesDir).CombinedOutput()
		if err != nil {
			artifactsErr = fmt.Errorf("skiff images build: %v\n%s", err, out)
		}
	})
	if artifactsErr != nil {
		tb.Fatal(artifactsErr)
	}
	return cniPlugin, imagesDir
}

var (
	artifactsOnce = onceFunc{}
	artifactsErr  error
)

type onceFunc struct{ done bool }

func (o *onceFunc) Do(f func()) {
	if !o.done {
		o.done = true
		f()
	}
}

// Netns makes a network namespace owned by the test (lo up, plus a lab-range address on lo so
// the namespace can originate traffic) and removes it when the test ends.
func Netns(tb testing.TB) (name, path string) {
	tb.Helper()
	name = fmt.Sprintf("skiff-e2e-%d-%d", os.Getpid(), rand.IntN(1<<30))
	for _, args := range [][]string{{"netns", "add", name}, {"-n", name, "link", "set", "lo", "up"},
		{"-n", name, "addr", "add", "198.18.0.1/32", "dev", "lo"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			tb.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	return name, "/run/netns/" + name
}

// NewServerWithAgent prepares `skiff server` with its node agent, whose containerd and pods
// live in the network namespace at netnsPath; everything stays under dir. Leftover
// containerd, shims and containers of the test are killed, and their mounts undone, at cleanup.
func NewServerWithAgent(tb testing.TB, dir, netnsPath string, extra ...string) *Server {
	tb.Helper()
	cni, images := AgentArtifacts(tb)
	s := NewServer(tb, dir, append([]string{"--agent-data-dir", filepath.Join(dir, "agent"), "--agent-netns", netnsPath,
		"--pod-log-dir", filepath.Join(dir, "logs"), "--cni-plugin", cni, "--agent-images-dir", images,
		// The API server reaches the agent on loopback only.
		"--node-ip", "127.0.0.1", "--agent-port", strconv.Itoa(FreePort(tb)),
		"--agent-healthz-address", "127.0.0.1:" + strconv.Itoa(FreePort(tb)),
		// The agent process runs in the host's namespace here (only containerd and pods are in
		// the test's): a BGP speaker would listen and route there. The lab tests BGP.
		"--bgp=false",
		// Service load balancing attaches to a cgroup and pins under /sys/fs/bpf shared by
		// every agent on the machine; the lab tests it, one agent per node namespace.
		"--service-proxy=false",
		// Cluster DNS answers at the node's address, which pods reach in the lab and on a
		// real host; here the node's address is loopback, which no pod reaches.
		"--dns=false",
		// The test's node shares the machine's disk (see lab.EvictionHard).
		"--eviction-hard=" + lab.EvictionHard, "--image-gc-high-threshold=100"}, extra...)...)
	// Its own cgroup root, so whatever its pods leave behind is removed with it.
	s.CgroupRoot = fmt.Sprintf("/skiff/e2e-%d-%d", os.Getpid(), rand.IntN(1<<30))
	s.args = append(s.args, "--cgroup-root", s.CgroupRoot)
	for i, a := range s.args {
		if a == "--disable-agent" {
			s.args = append(s.args[:i], s.args[i+1:]...)
			break
		}
	}
	tb.Cleanup(func() {
		KillUnder(filepath.Join(dir, "agent"))
		_ = cgroups.KillAll(cgroups.Mounts(), s.CgroupRoot)
	})
	return s
}

// KillUnder tears down what an agent under dir left running (agent/runtime.Teardown).
func KillUnder(dir string) { agentruntime.Teardown(dir) }

// RecordedPodNetns lists the pod network namespaces recorded in the metadata of the
// containerds whose data directories (<dir>/containerd) the globs match, so a test can check
// that teardown removed them.
func RecordedPodNetns(dirGlobs ...string) []string {
	re := regexp.MustCompile(`/var/run/netns/cni-[0-9a-f-]{36}`)
	seen := map[string]bool{}
	for _, g := range dirGlobs {
		dbs, _ := filepath.Glob(filepath.Join(g, "containerd", "root", "io.containerd.metadata.v1.bolt", "meta.db"))
		for _, db := range dbs {
			b, _ := os.ReadFile(db)
			for _, m := range re.FindAll(b, -1) {
				seen[string(m)] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}
