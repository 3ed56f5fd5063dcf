package api

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// LogOptions select what containerLogs returns, as kubectl logs asks.
type LogOptions struct {
	Follow, Timestamps, Previous bool
	TailLines                    *int64
	LimitBytes                   *int64
	Since                        time.Time
}

// logLine is one parsed line of a CRI log file: "<RFC3339Nano> <stream> <P|F> <content>".
type logLine struct {
	ts      time.Time
	partial bool
	content []byte
}

// ParseCRILine parses one line of a CRI log file.
func ParseCRILine(b []byte) (logLine, error) {
	parts := bytes.SplitN(bytes.TrimSuffix(b, []byte("\n")), []byte(" "), 4)
	if len(parts) < 3 {
		return logLine{}, fmt.Errorf("malformed CRI log line %q", b)
	}
	ts, err := time.Parse(time.RFC3339Nano, string(parts[0]))
	if err != nil {
		return logLine{}, fmt.Errorf("malformed CRI log timestamp %q", parts[0])
	}
	l := logLine{ts: ts, partial: string(parts[2]) == "P"}
	if len(parts) == 4 {
		l.content = parts[3]
	}
	return l, nil
}

// WriteLogs renders a CRI log file's lines for the options; it returns the bytes written
// and whether limitBytes cut it short.
func WriteLogs(r io.Reader, w io.Writer, o LogOptions, lastN bool) (int64, bool, error) {
	var lines [][]byte
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var pending []byte
	var pendingTS time.Time
	for sc.Scan() {
		l, err := ParseCRILine(sc.Bytes())
		if err != nil {
			continue // a torn line at the end of a file being written
		}
		if len(pending) == 0 {
			pendingTS = l.ts
		}
		pending = append(pending, l.content...)
		if l.partial {
			continue
		}
		if !o.Since.IsZero() && pendingTS.Before(o.Since) {
			pending = pending[:0]
			continue
		}
		out := append([]byte(nil), pending...)
		out = append(out, '\n')
		if o.Timestamps {
			out = append([]byte(pendingTS.Format(time.RFC3339Nano)+" "), out...)
		}
		lines = append(lines, out)
		pending = pending[:0]
	}
	// A last line the container ended without a newline stays partial in the file
	// (containerd tags it P): it is output as it is, without one, as the kubelet does.
	if len(pending) > 0 && (o.Since.IsZero() || !pendingTS.Before(o.Since)) {
		out := append([]byte(nil), pending...)
		if o.Timestamps {
			out = append([]byte(pendingTS.Format(time.RFC3339Nano)+" "), out...)
		}
		lines = append(lines, out)
	}
	if lastN && o.TailLines != nil && int64(len(lines)) > *o.TailLines {
		lines = lines[int64(len(lines))-*o.TailLines:]
	}
	var n int64
	for _, l := range lines {
		if o.LimitBytes != nil && n+int64(len(l)) > *o.LimitBytes {
			k, err := w.Write(l[:*o.LimitBytes-n])
			return n + int64(k), true, err
		}
		k, err := w.Write(l)
		n += int64(k)
		if err != nil {
			return n, false, err
		}
	}
	return n, false, sc.Err()
}

// containerLogs serves /containerLogs/{namespace}/{pod}/{container}.
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	q := r.URL.Query()
	var o LogOptions
	o.Follow, _ = strconv.ParseBool(q.Get("follow"))
	o.Timestamps, _ = strconv.ParseBool(q.Get("timestamps"))
	o.Previous, _ = strconv.ParseBool(q.Get("previous"))
	for name, dst := range map[string]**int64{"tailLines": &o.TailLines, "limitBytes": &o.LimitBytes} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				http.Error(w, fmt.Sprintf("%s: %q is not a non-negative integer", name, v), http.StatusBadRequest)
				return
			}
			*dst = &n
		}
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("sinceSeconds: %q is not a non-negative integer", v), http.StatusBadRequest)
			return
		}
		o.Since = time.Now().Add(-time.Duration(n) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			http.Error(w, fmt.Sprintf("sinceTime: %q is not an RFC 3339 time", v), http.StatusBadRequest)
			return
		}
		o.Since = t
	}
	path, id, err := s.logPath(r.Context(), ns, pod, container, o.Previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer func() { f.Close() }()
	w.Header().Set("Content-Type", "text/plain")
	n, cut, err := WriteLogs(f, w, o, true)
	if err != nil || cut || !o.Follow {
		return
	}
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	// Follow: keep reading what the runtime appends until the container stops or the client goes.
	tail := o
	tail.TailLines = nil
	for {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		if o.LimitBytes != nil {
			left := *o.LimitBytes - n
			if left <= 0 {
				return
			}
			tail.LimitBytes = &left
		}
		k, cut, err := WriteLogs(f, w, tail, false)
		n += k
		if flusher != nil && k > 0 {
			flusher.Flush()
		}
		if err != nil || cut {
			return
		}
		if k > 0 {
			continue
		}
		// The log was rotated (see agent/logrotate): the runtime writes into a new file at
		// the path, and wrote into the old one until it reopened — read that to its end
		// first.
		if next := reopened(f, path); next != nil {
			if o.LimitBytes != nil {
				left := *o.LimitBytes - n
				tail.LimitBytes = &left
			}
			k, cut, err := WriteLogs(f, w, tail, false)
			n += k
			f.Close()
			f = next
			if err != nil || cut {
				next.Close()
				return
			}
			continue
		}
		if !s.running(r.Context(), id) {
			return
		}
	}
}

// reopened opens the file now at path if it is not the one f reads, else returns nil.
func reopened(f *os.File, path string) *os.File {
	cur, err := f.Stat()
	if err != nil {
		return nil
	}
	now, err := os.Stat(path)
	if err != nil || os.SameFile(cur, now) {
		return nil
	}
	next, err := os.Open(path)
	if err != nil {
		return nil
	}
	return next
}

func (s *Server) running(ctx context.Context, id string) bool {
	st, err := s.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	return err == nil && st.Status.State == runtimeapi.ContainerState_CONTAINER_RUNNING
}

// logPath finds the log file of a pod's container (its latest attempt, or the one before).
func (s *Server) logPath(ctx context.Context, ns, pod, container string, previous bool) (string, string, error) {
	list, err := s.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": pod, "io.kubernetes.container.name": container}}})
	if err != nil {
		return "", "", err
	}
	var best, prev *runtimeapi.Container
	for _, c := range list.Containers {
		if best == nil || c.Metadata.Attempt > best.Metadata.Attempt {
			prev, best = best, c
		} else if prev == nil || c.Metadata.Attempt > prev.Metadata.Attempt {
			prev = c
		}
	}
	pick := best
	if previous {
		pick = prev
	}
	if pick == nil {
		what := "container"
		if previous {
			what = "previous terminated container"
		}
		return "", "", fmt.Errorf("%s %q in pod %q not found", what, container, pod)
	}
	st, err := s.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: pick.Id})
	if err != nil {
		return "", "", err
	}
	if st.Status.LogPath == "" {
		return "", "", fmt.Errorf("container %q has no log", container)
	}
	return st.Status.LogPath, pick.Id, nil
}
