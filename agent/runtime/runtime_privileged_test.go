package runtime

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/images/oci"
)

func TestConfig(t *testing.T) {
	c := Config(Options{Dir: "/d", CNIBinDir: "/cni/bin", CNIConfDir: "/cni/conf", SandboxImage: "localhost/skiff/pause:1"})
	for _, want := range []string{`root = "/d/root"`, `state = "/d/state"`, `address = "/d/containerd.sock"`,
		`sandbox_image = "localhost/skiff/pause:1"`, "restrict_oom_score_adj = true", "SystemdCgroup = false",
		`bin_dir = "/cni/bin"`, `conf_dir = "/cni/conf"`} {
		if !strings.Contains(c, want) {
			t.Errorf("config lacks %q:\n%s", want, c)
		}
	}
	if c := Config(Options{LowerOOMScores: true}); !strings.Contains(c, "restrict_oom_score_adj = false") {
		t.Errorf("a containerd that may lower OOM scores restricts them:\n%s", c)
	}
	if strings.Contains(c, "config_path") {
		t.Errorf("config_path set without a registry config dir:\n%s", c)
	}
	// The registry hosts directory goes to CRI's registry section, where containerd 1.6 reads
	// per-host hosts.toml files at pull time.
	c = Config(Options{Dir: "/d", RegistryConfigDir: "/d/certs.d"})
	if want := "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/d/certs.d\"\n"; !strings.Contains(c, want) {
		t.Errorf("config lacks %q:\n%s", want, c)
	}
}

// TestPrivilegedContainerd runs Debian's containerd under the supervisor: CRI answers, an
// image built by skiff imports under its full name, and a killed containerd comes back.
func TestPrivilegedContainerd(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root, BPF and network namespaces: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := Start(ctx, Options{Dir: filepath.Join(dir, "containerd"), CNIBinDir: filepath.Join(dir, "cni", "bin"),
		CNIConfDir: filepath.Join(dir, "cni", "net.d"), SandboxImage: "localhost/skiff/pause:1"}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := c.Version(ctx)
	if err != nil || v.RuntimeName != "containerd" {
		t.Fatalf("CRI version: %v %+v", err, v)
	}
	img := filepath.Join(dir, "img.tar")
	if err := oci.WriteFile(img, oci.Image{Name: "localhost/skiff/test:1", Entrypoint: []string{"/hello"},
		Files: []oci.File{{Path: "/hello", Mode: 0o755, Data: []byte("#!/bin/sh\necho hi\n")}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ImportImage(ctx, img); err != nil {
		t.Fatal(err)
	}
	conn, err := c.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := runtimeapi.NewImageServiceClient(conn).ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "localhost/skiff/test:1"}})
	if err != nil || st.Image == nil {
		t.Fatalf("CRI does not see the imported image: %v %+v", err, st)
	}

	old := c.PID()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if pid := c.PID(); pid != old {
			if err := c.waitReady(ctx, 30*time.Second); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("containerd was not restarted")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The same containerd used as an external runtime (--container-runtime-endpoint): it
	// answers, imports, and closing the connection leaves it running.
	pid := c.PID()
	ext, err := Connect(ctx, strings.TrimPrefix(c.Endpoint(), "unix://"))
	if err != nil {
		t.Fatal(err)
	}
	if ext.Endpoint() != c.Endpoint() || ext.PID() != 0 {
		t.Errorf("external runtime endpoint %q pid %d", ext.Endpoint(), ext.PID())
	}
	if err := ext.ImportImage(ctx, img); err != nil {
		t.Fatal(err)
	}
	ext.Close()
	if v, err := c.Version(ctx); err != nil || v.RuntimeName != "containerd" || c.PID() != pid {
		t.Errorf("after closing the external connection: %v %+v pid %d (was %d)", err, v, c.PID(), pid)
	}
	if _, err := Connect(ctx, "run/containerd.sock"); err == nil {
		t.Error("a relative endpoint was accepted")
	}
}
