package pods

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// probeKind distinguishes the three probes of a container.
type probeKind string

const (
	liveness  probeKind = "Liveness"
	readiness probeKind = "Readiness"
	startup   probeKind = "Startup"
)

// probeState is the running tally of one probe of one container instance.
type probeState struct {
	containerID string
	// started is when the container started (its initial delay counts from it, as the
	// kubelet's: the status's startedAt, not its creation, which can be seconds earlier on
	// a busy node).
	started   time.Time
	last      time.Time
	successes int32
	failures  int32
	ok        bool // last verdict after thresholds
}

// prober remembers probe results across syncs.
type prober struct {
	mu     sync.Mutex
	states map[string]*probeState // pod uid/container/kind
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	rt     runtimeapi.RuntimeServiceClient
}

func newProber(rt runtimeapi.RuntimeServiceClient, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *prober {
	return &prober{states: map[string]*probeState{}, dial: dial, rt: rt}
}

// Tally applies one probe result to a state with upstream's thresholds; it returns the
// verdict (for readiness: ready; for liveness and startup: healthy).
func Tally(st *probeState, p *corev1.Probe, success bool) bool {
	if success {
		st.successes++
		st.failures = 0
		if st.successes >= max(p.SuccessThreshold, 1) {
			st.ok = true
		}
	} else {
		st.failures++
		st.successes = 0
		if st.failures >= max(p.FailureThreshold, 1) {
			st.ok = false
		}
	}
	return st.ok
}

// check runs a probe if it is due and returns the current verdict and whether it just failed
// its threshold. Until the first verdict, readiness is false and liveness is healthy.
func (pr *prober) check(ctx context.Context, pod *corev1.Pod, c corev1.Container, containerID string, startedAt func() time.Time, kind probeKind, p *corev1.Probe) (ok bool, failedNow bool, detail string) {
	key := string(pod.UID) + "/" + c.Name + "/" + string(kind)
	pr.mu.Lock()
	st := pr.states[key]
	if st == nil || st.containerID != containerID {
		pr.mu.Unlock()
		started := startedAt() // a runtime call, once per container instance: not under mu
		pr.mu.Lock()
		if st = pr.states[key]; st == nil || st.containerID != containerID {
			st = &probeState{containerID: containerID, started: started, ok: kind != readiness}
			pr.states[key] = st
		}
	}
	due := time.Since(st.started) >= time.Duration(p.InitialDelaySeconds)*time.Second &&
		time.Since(st.last) >= time.Duration(max(p.PeriodSeconds, 1))*time.Second
	if !due {
		ok := st.ok
		pr.mu.Unlock()
		return ok, false, ""
	}
	st.last = time.Now()
	pr.mu.Unlock()
	success, detail := pr.run(ctx, pod, c, containerID, p)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	was := st.ok
	now := Tally(st, p, success)
	return now, was && !now, detail
}

func (pr *prober) forget(uid string) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for k := range pr.states {
		if len(k) > len(uid) && k[:len(uid)] == uid {
			delete(pr.states, k)
		}
	}
}

// run executes a probe once.
func (pr *prober) run(ctx context.Context, pod *corev1.Pod, c corev1.Container, containerID string, p *corev1.Probe) (bool, string) {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	port := func(ps intstr.IntOrString) (int, error) { return containerPort(c, ps) }
	host := pod.Status.PodIP
	switch {
	case p.Exec != nil:
		if err := pr.exec(ctx, containerID, p.Exec.Command, timeout); err != nil {
			return false, err.Error()
		}
		return true, ""
	case p.TCPSocket != nil:
		n, err := port(p.TCPSocket.Port)
		if err != nil {
			return false, err.Error()
		}
		if p.TCPSocket.Host != "" {
			host = p.TCPSocket.Host
		}
		conn, err := pr.dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(n)))
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	case p.HTTPGet != nil:
		n, err := port(p.HTTPGet.Port)
		if err != nil {
			return false, err.Error()
		}
		if err := pr.httpGet(ctx, p.HTTPGet, host, n); err != nil {
			return false, err.Error()
		}
		return true, ""
	case p.GRPC != nil:
		if err := pr.grpcHealth(ctx, host, int(p.GRPC.Port), ptr.Deref(p.GRPC.Service, "")); err != nil {
			return false, err.Error()
		}
		return true, ""
	}
	return true, ""
}

// exec runs a command in the container; a non-zero exit is an error carrying its output.
func (pr *prober) exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) error {
	resp, err := pr.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: int64(timeout.Seconds())})
	if err != nil {
		return err
	}
	if resp.ExitCode != 0 {
		return fmt.Errorf("command %q exited with %d: %s%s", cmd, resp.ExitCode, resp.Stdout, resp.Stderr)
	}
	return nil
}

// httpGet sends the GET of a probe or hook to host:port (the action's own host if set): a
// status from 200 to 399 succeeds.
func (pr *prober) httpGet(ctx context.Context, g *corev1.HTTPGetAction, host string, port int) error {
	if g.Host != "" {
		host = g.Host
	}
	scheme := "http"
	transport := &http.Transport{DialContext: pr.dial, DisableKeepAlives: true}
	if g.Scheme == corev1.URISchemeHTTPS {
		// As the kubelet: probes and hooks do not verify the pod's certificate.
		scheme = "https"
		transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // upstream behaviour
	}
	path := g.Path
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

// grpcHealth asks the gRPC health service (grpc.health.v1) at host:port; SERVING succeeds.
func (pr *prober) grpcHealth(ctx context.Context, host string, port int, service string) error {
	conn, err := grpc.NewClient(net.JoinHostPort(host, strconv.Itoa(port)),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return pr.dial(ctx, "tcp", addr) }))
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return fmt.Errorf("gRPC health check of %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("service unhealthy (responded with %q)", resp.Status)
	}
	return nil
}

// started reports whether a container's startup probe has succeeded (true without one).
func (pr *prober) started(pod *corev1.Pod, c corev1.Container, containerID string) bool {
	if c.StartupProbe == nil {
		return true
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	st := pr.states[string(pod.UID)+"/"+c.Name+"/"+string(startup)]
	return st != nil && st.containerID == containerID && st.ok && st.successes > 0
}

// ready reports the readiness verdict of a container (true when it has no readiness probe).
func (pr *prober) ready(pod *corev1.Pod, c corev1.Container, containerID string) bool {
	if c.ReadinessProbe == nil {
		return true
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	st := pr.states[string(pod.UID)+"/"+c.Name+"/"+string(readiness)]
	return st != nil && st.containerID == containerID && st.ok
}

// probe runs a running container's probes; it returns true if liveness (or startup) failed
// and the container must be restarted.
func (m *Manager) probe(ctx context.Context, pod *corev1.Pod, c corev1.Container, rc *runtimeapi.Container) bool {
	if rc == nil || rc.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return false
	}
	started := func() time.Time {
		s, err := m.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: rc.Id})
		if err == nil && s.GetStatus().GetStartedAt() > 0 {
			return time.Unix(0, s.GetStatus().GetStartedAt())
		}
		return time.Unix(0, rc.CreatedAt)
	}
	if c.StartupProbe != nil {
		ok, failed, detail := m.prober.check(ctx, pod, c, rc.Id, started, startup, c.StartupProbe)
		if failed {
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "Unhealthy", "Startup probe failed: %s", detail)
			return true
		}
		if !ok {
			return false // liveness and readiness wait for startup
		}
	}
	if c.LivenessProbe != nil {
		if _, failed, detail := m.prober.check(ctx, pod, c, rc.Id, started, liveness, c.LivenessProbe); failed {
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "Unhealthy", "Liveness probe failed: %s", detail)
			m.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Container %s failed liveness probe, will be restarted", c.Name)
			return true
		}
	}
	if c.ReadinessProbe != nil {
		if _, failed, detail := m.prober.check(ctx, pod, c, rc.Id, started, readiness, c.ReadinessProbe); failed {
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "Unhealthy", "Readiness probe failed: %s", detail)
		}
	}
	return false
}
