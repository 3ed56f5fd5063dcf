package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/skiff-sh/skiff/agent/netnsdial"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// exec serves /exec/{namespace}/{pod}/{container}: it asks CRI for an exec session and proxies
// the client's upgraded (SPDY) connection to containerd's streaming server, as the kubelet does.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	ns, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	q := r.URL.Query()
	flag := func(name string) bool { b, _ := strconv.ParseBool(q.Get(name)); return b }
	cmd := q["command"]
	if len(cmd) == 0 {
		http.Error(w, "command: at least one argument is required", http.StatusBadRequest)
		return
	}
	id, ok := s.runningContainer(w, r, ns, pod, container)
	if !ok {
		return
	}
	resp, err := s.Runtime.Exec(r.Context(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd,
		Tty: flag("tty"), Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr")})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.proxyStream(w, r, resp.Url)
}

// runningContainer finds the running container of a pod by name, answering 404 if none.
func (s *Server) runningContainer(w http.ResponseWriter, r *http.Request, ns, pod, container string) (string, bool) {
	list, err := s.Runtime.ListContainers(r.Context(), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": pod, "io.kubernetes.container.name": container}}})
	if err != nil || len(list.Containers) == 0 {
		http.Error(w, fmt.Sprintf("container %q in pod %q is not running", container, pod), http.StatusNotFound)
		return "", false
	}
	return list.Containers[0].Id, true
}

// proxyStream proxies the client's upgraded connection to a CRI streaming URL.
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, streamURL string) {
	loc, err := url.Parse(streamURL)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	tr := &http.Transport{DialContext: s.dialer()}
	proxy.NewUpgradeAwareHandler(loc, tr, false, true, httpResponder{}).ServeHTTP(w, r)
}

type httpResponder struct{}

func (httpResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, err.Error(), http.StatusBadGateway)
}

// dialer reaches containerd's streaming server, which listens on 127.0.0.1 inside the
// runtime's network namespace.
func (s *Server) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return netnsdial.Dialer(s.Netns, 10*time.Second)
}

// portForward serves /portForward/{namespace}/{pod}: a CRI port-forward session to the pod's
// sandbox, proxied like exec.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	ns, pod := r.PathValue("namespace"), r.PathValue("pod")
	sbs, err := s.Runtime.ListPodSandbox(r.Context(), &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": pod}}})
	if err != nil || len(sbs.Items) == 0 {
		http.Error(w, fmt.Sprintf("pod %q has no running sandbox", pod), http.StatusNotFound)
		return
	}
	var ports []int32
	for _, v := range r.URL.Query()["port"] {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 || n > 65535 {
			http.Error(w, fmt.Sprintf("port %q is not a port number", v), http.StatusBadRequest)
			return
		}
		ports = append(ports, int32(n))
	}
	resp, err := s.Runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sbs.Items[0].Id, Port: ports})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.proxyStream(w, r, resp.Url)
}

// attach serves /attach/{namespace}/{pod}/{container}: a CRI attach session to the running
// container's own stdio, proxied like exec.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	ns, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	q := r.URL.Query()
	flag := func(name string) bool { b, _ := strconv.ParseBool(q.Get(name)); return b }
	id, ok := s.runningContainer(w, r, ns, pod, container)
	if !ok {
		return
	}
	resp, err := s.Runtime.Attach(r.Context(), &runtimeapi.AttachRequest{ContainerId: id,
		Tty: flag("tty"), Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr")})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.proxyStream(w, r, resp.Url)
}
