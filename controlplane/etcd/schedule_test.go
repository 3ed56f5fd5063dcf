package etcd

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{
		"etcd-snapshot-a-100", "etcd-snapshot-a-300", "etcd-snapshot-a-200", "etcd-snapshot-a-50",
		"etcd-snapshot-a-b-10", // node "a-b", not "a"
		"etcd-snapshot-c-1", "on-demand-a-1",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := Prune(dir, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range removed {
		removed[i] = filepath.Base(removed[i])
	}
	if want := []string{"etcd-snapshot-a-100", "etcd-snapshot-a-50"}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want the two oldest of a's scheduled ones %v", removed, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 5 {
		t.Errorf("%d files left, want 5", len(entries))
	}
}

func TestParseSchedule(t *testing.T) {
	for _, spec := range []string{"0 */12 * * *", "*/5 * * * * *", "@every 6h", "@daily"} {
		if _, err := ParseSchedule(spec); err != nil {
			t.Errorf("%q: %v", spec, err)
		}
	}
	for _, spec := range []string{"", "every day", "61 * * * *", "* * *"} {
		if _, err := ParseSchedule(spec); err == nil || !strings.Contains(err.Error(), "snapshot schedule") {
			t.Errorf("%q accepted (%v)", spec, err)
		}
	}
	s, _ := ParseSchedule("0 */12 * * *")
	at := time.Date(2026, 12, 7, 8, 30, 0, 0, time.UTC)
	if next := s.Next(at); !next.Equal(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("next after %v: %v", at, next)
	}
}

// soon is a schedule that comes every few milliseconds.
type soon struct{}

func (soon) Next(t time.Time) time.Time { return t.Add(5 * time.Millisecond) }

func TestSnapshotterSavesAndPrunes(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	saves := 0
	clock := time.Unix(1000, 0)
	ctx, cancel := context.WithCancel(context.Background())
	s := Snapshotter{Schedule: soon{}, Dir: dir, Node: "n", Retention: 3, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(time.Second) // every snapshot a distinct name
			return clock
		},
		Save: func(_ context.Context, path string) error {
			mu.Lock()
			saves++
			n := saves
			mu.Unlock()
			if n == 10 {
				cancel()
			}
			return os.WriteFile(path, nil, 0o600)
		}}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ten snapshots not taken")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) > 4 { // the tenth may land after the cancel, unpruned
		t.Errorf("%d snapshots kept, want the retention of 3 (+1 in flight)", len(entries))
	}
}
