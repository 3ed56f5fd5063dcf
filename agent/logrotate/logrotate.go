// Package logrotate keeps running containers' log files within a size, as the kubelet's
// container log manager does (its containerLogMaxSize and containerLogMaxFiles): a chatty
// container would otherwise fill the node's disk through a single ever-growing file.
//
// Every Period the running containers' logs are looked at; one larger than MaxSize is renamed
// to "<log>.<YYYYMMDD-hhmmss>" and the runtime asked to reopen its log (CRI
// ReopenContainerLog), so the container goes on writing into a new file at the old path. Of the
// rotated files the newest stays as it is, older ones are gzipped ("….gz"), and the oldest
// removed so a container keeps at most MaxFiles files, the live one included. `kubectl logs`
// reads the live file, as upstream's does; the rotated ones stay on the node for its operator.
package logrotate

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Upstream's defaults and the shape of a rotated file's name.
const (
	DefaultMaxSize  = 10 << 20
	DefaultMaxFiles = 5
	DefaultPeriod   = 10 * time.Second

	stampFormat = "20060102-150405"
	gzSuffix    = ".gz"
	tmpSuffix   = ".tmp"
)

// Policy is how large a log may grow, how many files a container keeps and how often
// logs are looked at.
type Policy struct {
	// MaxSize is the size in bytes at which a log is rotated; MaxFiles how many files a
	// container keeps, the live one included (at least 2); Interval the time between
	// passes (DefaultPeriod when zero; the kubelet's containerLogMonitorInterval).
	MaxSize  int64
	MaxFiles int
	Interval time.Duration
}

// Validate says what is wrong with p, as the kubelet's configuration validation does.
func (p Policy) Validate() error {
	if p.MaxSize <= 0 {
		return fmt.Errorf("container log max size %d: must be positive", p.MaxSize)
	}
	if p.MaxFiles < 2 {
		return fmt.Errorf("container log max files %d: must be at least 2 (the live file and one rotated)", p.MaxFiles)
	}
	if p.Interval < 0 {
		return fmt.Errorf("container log monitor interval %s: must not be negative", p.Interval)
	}
	return nil
}

// Manager rotates the logs of the runtime's running containers.
type Manager struct {
	Runtime runtimeapi.RuntimeServiceClient
	Policy  Policy
	// Now tells the time (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger
}

// Run rotates logs every Policy.Interval until ctx ends. A pass that fails is logged and retried at
// the next tick: one container's log must not stop the others'.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.Policy.Validate(); err != nil {
		return err
	}
	period := m.Policy.Interval
	if period == 0 {
		period = DefaultPeriod
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if err := m.RotateAll(ctx); err != nil && ctx.Err() == nil {
			m.Log.Warn("container log rotation", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RotateAll makes one pass over the running containers and returns every failure joined.
func (m *Manager) RotateAll(ctx context.Context) error {
	list, err := m.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range list.Containers {
		st, err := m.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
		if err != nil {
			// Gone between the list and now; the next pass will not see it.
			continue
		}
		path := st.GetStatus().GetLogPath()
		if path == "" || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		if fi.Size() < m.Policy.MaxSize {
			continue
		}
		if err := m.rotate(ctx, c.Id, path); err != nil {
			errs = append(errs, fmt.Errorf("container %s: %w", c.Id, err))
		}
	}
	return errors.Join(errs...)
}

// rotate tidies the log's rotated files to leave room for one more, then rotates the live one.
func (m *Manager) rotate(ctx context.Context, id, path string) error {
	rotated, err := Tidy(path, m.Policy.MaxFiles)
	if err != nil {
		return err
	}
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	to := path + "." + now().Format(stampFormat)
	for _, r := range rotated {
		if r == to || r == to+gzSuffix {
			// Rotated already within this second: the next pass will.
			return nil
		}
	}
	if err := os.Rename(path, to); err != nil {
		return err
	}
	if _, err := m.Runtime.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		// The runtime still writes into the renamed file: give it its name back so
		// `kubectl logs` keeps finding it.
		if rerr := os.Rename(to, path); rerr != nil {
			return errors.Join(fmt.Errorf("reopen log: %w", err), fmt.Errorf("restore %s: %w", path, rerr))
		}
		return fmt.Errorf("reopen log: %w", err)
	}
	return nil
}

// Tidy readies a live log's rotated files for one more rotation and returns what is left,
// oldest first: leftovers of an interrupted compression are removed, the oldest rotated
// files beyond maxFiles-2 deleted (the live file and the one about to be rotated make
// maxFiles), and the rest gzipped.
func Tidy(path string, maxFiles int) ([]string, error) {
	names, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return nil, err
	}
	var rotated []string
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, tmpSuffix):
			// A compression cut short; its source is still there.
			if err := os.Remove(n); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		case strings.HasSuffix(n, gzSuffix):
			rotated = append(rotated, n)
		default:
			// An uncompressed file whose compressed copy exists was being removed.
			if _, err := os.Stat(n + gzSuffix); err == nil {
				if err := os.Remove(n); err != nil {
					return nil, err
				}
				continue
			}
			rotated = append(rotated, n)
		}
	}
	// The stamp sorts in time order; ".gz" does not change the order of distinct stamps.
	sort.Slice(rotated, func(i, j int) bool {
		return strings.TrimSuffix(rotated[i], gzSuffix) < strings.TrimSuffix(rotated[j], gzSuffix)
	})
	keep := maxFiles - 2
	if keep < 0 {
		keep = 0
	}
	for len(rotated) > keep {
		if err := os.Remove(rotated[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		rotated = rotated[1:]
	}
	for i, r := range rotated {
		if strings.HasSuffix(r, gzSuffix) {
			continue
		}
		if err := compress(r); err != nil {
			return nil, fmt.Errorf("compress %s: %w", r, err)
		}
		rotated[i] = r + gzSuffix
	}
	return rotated, nil
}

// compress gzips src into src.gz through a temporary file, then removes src.
func compress(src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := src + gzSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(out)
	_, err = io.Copy(zw, in)
	err = errors.Join(err, zw.Close(), out.Close())
	if err == nil {
		err = os.Rename(tmp, src+gzSuffix)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Remove(src)
}

// globEscape quotes the glob metacharacters a pod or container name cannot hold but a log
// directory given by an operator might.
func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}
