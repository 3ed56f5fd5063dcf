package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ScheduledPrefix names the snapshots the schedule takes, as k3s's: etcd-snapshot-<node>-<unix time>.
const ScheduledPrefix = "etcd-snapshot"

// SnapshotName is a snapshot's file name: <prefix>-<node>-<unix time>.
func SnapshotName(prefix, node string, t time.Time) string {
	return fmt.Sprintf("%s-%s-%d", prefix, node, t.Unix())
}

// ParseSchedule reads a cron schedule: five fields (minute hour day month weekday, as k3s's
// --etcd-snapshot-schedule-cron "0 */12 * * *"), or six with seconds first, or a descriptor
// such as "@every 6h".
func ParseSchedule(spec string) (cron.Schedule, error) {
	p := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	s, err := p.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("snapshot schedule %q: %w", spec, err)
	}
	return s, nil
}

// Prune removes the oldest of node's scheduled snapshots in dir beyond the newest keep, and
// returns what it removed. Snapshots taken by hand, and other servers' (a shared directory),
// are never removed.
func Prune(dir, node string, keep int) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	prefix := ScheduledPrefix + "-" + node + "-"
	type snap struct {
		name string
		at   int64
	}
	var snaps []snap
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || e.IsDir() {
			continue
		}
		at, err := strconv.ParseInt(rest, 10, 64)
		if err != nil { // another node whose name extends this one's ("a" and "a-b")
			continue
		}
		snaps = append(snaps, snap{e.Name(), at})
	}
	slices.SortFunc(snaps, func(a, b snap) int { return int(b.at - a.at) }) // newest first
	var removed []string
	for _, s := range snaps[min(keep, len(snaps)):] {
		path := filepath.Join(dir, s.name)
		if err := os.Remove(path); err != nil {
			return removed, err
		}
		removed = append(removed, path)
	}
	return removed, nil
}

// Snapshotter takes the scheduled snapshots of a server's embedded member.
type Snapshotter struct {
	Schedule  cron.Schedule
	Dir, Node string
	Retention int
	// Save writes a snapshot to path (Save with the server's client URL and PKI).
	Save func(ctx context.Context, path string) error
	Log  *slog.Logger
	Now  func() time.Time
}

// Run takes a snapshot at each time the schedule gives and prunes the old ones, until ctx
// ends. A failed snapshot is logged and the next one is tried at its time: the member may be
// without quorum for a while.
func (s Snapshotter) Run(ctx context.Context) error {
	now := s.Now
	if now == nil {
		now = time.Now
	}
	for {
		next := s.Schedule.Next(now())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(next)):
		}
		path := filepath.Join(s.Dir, SnapshotName(ScheduledPrefix, s.Node, now()))
		if err := s.Save(ctx, path); err != nil {
			s.Log.Warn("scheduled etcd snapshot failed", "path", path, "err", err)
			continue
		}
		s.Log.Info("etcd snapshot saved", "path", path)
		removed, err := Prune(s.Dir, s.Node, s.Retention)
		if err != nil {
			s.Log.Warn("pruning etcd snapshots", "err", err)
		}
		for _, r := range removed {
			s.Log.Info("etcd snapshot pruned (beyond the retention)", "path", r, "retention", s.Retention)
		}
	}
}
