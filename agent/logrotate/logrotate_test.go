package logrotate

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime is one running container writing to path; ReopenContainerLog makes it write to
// a new file at path, as containerd does.
type fakeRuntime struct {
	runtimeapi.RuntimeServiceClient
	path      string
	live      *os.File
	reopenErr error
	reopens   int
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING}}}, nil
}

func (f *fakeRuntime) ContainerStatus(context.Context, *runtimeapi.ContainerStatusRequest, ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, LogPath: f.path}}, nil
}

func (f *fakeRuntime) ReopenContainerLog(context.Context, *runtimeapi.ReopenContainerLogRequest, ...grpc.CallOption) (*runtimeapi.ReopenContainerLogResponse, error) {
	if f.reopenErr != nil {
		return nil, f.reopenErr
	}
	f.reopens++
	f.live.Close()
	var err error
	f.live, err = os.OpenFile(f.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	return &runtimeapi.ReopenContainerLogResponse{}, err
}

func (f *fakeRuntime) write(t *testing.T, s string) {
	t.Helper()
	if _, err := f.live.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func newFake(t *testing.T) *fakeRuntime {
	dir := t.TempDir()
	f := &fakeRuntime{path: filepath.Join(dir, "0.log")}
	var err error
	if f.live, err = os.OpenFile(f.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.live.Close() })
	return f
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRotation(t *testing.T) {
	f := newFake(t)
	clock := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	m := &Manager{Runtime: f, Policy: Policy{MaxSize: 10, MaxFiles: 3}, Now: func() time.Time { return clock }}
	ctx := context.Background()
	dir := filepath.Dir(f.path)

	// Below the size: nothing happens.
	f.write(t, "123456789")
	if err := m.RotateAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !reflect.DeepEqual(got, []string{"0.log"}) || f.reopens != 0 {
		t.Fatalf("below max size: files %v, reopens %d", got, f.reopens)
	}

	// At the size: renamed, reopened, the container's next line in a new file.
	f.write(t, "A\n")
	if err := m.RotateAll(ctx); err != nil {
		t.Fatal(err)
	}
	f.write(t, "after first\n")
	if got, want := names(t, dir), []string{"0.log", "0.log.20261204-100000"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after one rotation: %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(f.path + ".20261204-100000"); string(b) != "123456789A\n" {
		t.Fatalf("rotated file holds %q", b)
	}

	// Twice in one second: the second waits for the next pass instead of overwriting.
	f.write(t, strings.Repeat("x", 20))
	if err := m.RotateAll(ctx); err != nil {
		t.Fatal(err)
	}
	if f.reopens != 1 {
		t.Fatalf("rotated twice within a second (%d reopens)", f.reopens)
	}

	// The next rotations: the older file is gzipped, and with MaxFiles 3 the oldest goes.
	clock = clock.Add(time.Minute)
	if err := m.RotateAll(ctx); err != nil {
		t.Fatal(err)
	}
	f.write(t, strings.Repeat("y", 20))
	clock = clock.Add(time.Minute)
	if err := m.RotateAll(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"0.log", "0.log.20261204-100100.gz", "0.log.20261204-100200"}
	if got := names(t, dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("after three rotations: %v, want %v", got, want)
	}
	if got := gunzip(t, f.path+".20261204-100100.gz"); got != "after first\n"+strings.Repeat("x", 20) {
		t.Fatalf("compressed file holds %q", got)
	}
	if b, _ := os.ReadFile(f.path + ".20261204-100200"); string(b) != strings.Repeat("y", 20) {
		t.Fatalf("newest rotated file holds %q", b)
	}
}

func TestReopenFailureRestoresTheLog(t *testing.T) {
	f := newFake(t)
	f.reopenErr = errors.New("containerd says no")
	m := &Manager{Runtime: f, Policy: Policy{MaxSize: 1, MaxFiles: 2}}
	f.write(t, "line\n")
	err := m.RotateAll(context.Background())
	if err == nil || !strings.Contains(err.Error(), "containerd says no") {
		t.Fatalf("RotateAll = %v, want the reopen error", err)
	}
	if got := names(t, filepath.Dir(f.path)); !reflect.DeepEqual(got, []string{"0.log"}) {
		t.Fatalf("files after a failed reopen: %v, want the live log back in place", got)
	}
	f.write(t, "more\n")
	if b, _ := os.ReadFile(f.path); string(b) != "line\nmore\n" {
		t.Fatalf("live log holds %q", b)
	}
}

func TestTidyLeftovers(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "2.log")
	for name, body := range map[string]string{
		"2.log":                        "live",
		"2.log.20261204-090000.gz":     "old",
		"2.log.20261204-091000":        "half-removed", // its .gz exists: compression finished
		"2.log.20261204-091000.gz":     "done",
		"2.log.20261204-092000":        "newest",
		"2.log.20261204-092000.gz.tmp": "cut short",
		"1.log.20261204-080000":        "another attempt's", // not this log's
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Tidy(live, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{live + ".20261204-091000.gz", live + ".20261204-092000.gz"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Tidy = %v, want %v", got, want)
	}
	wantFiles := []string{"1.log.20261204-080000", "2.log", "2.log.20261204-091000.gz", "2.log.20261204-092000.gz"}
	if files := names(t, dir); !reflect.DeepEqual(files, wantFiles) {
		t.Fatalf("files %v, want %v", files, wantFiles)
	}
	if s := gunzip(t, live+".20261204-092000.gz"); s != "newest" {
		t.Fatalf("compressed newest holds %q", s)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, c := range []struct {
		p   Policy
		err string
	}{
		{Policy{MaxSize: DefaultMaxSize, MaxFiles: DefaultMaxFiles}, ""},
		{Policy{MaxSize: 1, MaxFiles: 2}, ""},
		{Policy{MaxSize: 0, MaxFiles: 5}, "must be positive"},
		{Policy{MaxSize: 10, MaxFiles: 1}, "at least 2"},
	} {
		err := c.p.Validate()
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: Validate = %v, want %q", c.p, err, c.err)
		}
	}
}
