package pressure

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/skiff-sh/skiff/agent/eviction"
)

func TestMostUrgent(t *testing.T) {
	ths, err := eviction.ParseHard("pid.available<10,nodefs.inodesFree<5%,imagefs.available<15%,nodefs.available<10%,memory.available<100Mi")
	if err != nil {
		t.Fatal(err)
	}
	want := []eviction.Signal{eviction.MemoryAvailable, eviction.NodeFsAvailable, eviction.ImageFsAvailable, eviction.NodeFsInodesFree, eviction.PIDAvailable}
	for _, w := range want {
		if got := mostUrgent(ths).Signal; got != w {
			t.Fatalf("mostUrgent(%v) = %s, want %s", ths, got, w)
		}
		// Drop the one picked; the next in the kubelet's order comes up.
		for i, th := range ths {
			if th.Signal == w {
				ths = append(ths[:i], ths[i+1:]...)
				break
			}
		}
	}
}

func TestDu(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// 1 MiB of data in a file and a sparse file of 1 GiB that takes no blocks.
	if err := os.WriteFile(filepath.Join(dir, "sub", "data"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	bytes, entries := du(dir)
	if entries != 4 {
		t.Errorf("entries = %d, want 4 (the directory, sub, data, sparse)", entries)
	}
	if bytes < 1<<20 || bytes > 1<<20+1<<18 {
		t.Errorf("bytes = %d, want about 1 MiB (allocated blocks, not the sparse file's size)", bytes)
	}
	if b, e := du(filepath.Join(dir, "absent")); b != 0 || e != 0 {
		t.Errorf("du of a missing directory = %d, %d", b, e)
	}
	if !isDisk(eviction.NodeFsInodesFree) || isDisk(eviction.MemoryAvailable) || isDisk(eviction.PIDAvailable) {
		t.Error("isDisk")
	}
}

func TestParseLoadavgTasks(t *testing.T) {
	if n, err := parseLoadavgTasks("0.52 0.58 0.59 3/1211 12345\n"); err != nil || n != 1211 {
		t.Errorf("parseLoadavgTasks = %d, %v", n, err)
	}
	for _, bad := range []string{"", "0.52 0.58 0.59", "0.52 0.58 0.59 1211 12345", "0.52 0.58 0.59 3/many 1"} {
		if _, err := parseLoadavgTasks(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	// The real file, and the process count's type no longer wraps: it reads tasks, not Sysinfo's uint16.
	m := New(Options{}, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	obs, err := m.pids()
	if err != nil || obs.Capacity <= 0 || obs.Available <= 0 || obs.Available >= obs.Capacity {
		t.Errorf("pids() = %+v, %v", obs, err)
	}
}
