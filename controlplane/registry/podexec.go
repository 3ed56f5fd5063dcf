package registry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	translator "k8s.io/apiserver/pkg/util/proxy"
)

// ExecREST serves pods/exec by proxying the upgraded connection to the node agent. kubectl
// 1.30+ speaks WebSocket (v5.channel.k8s.io); the agent, like the kubelet, speaks SPDY, so
// such requests are translated here, as upstream does.
type ExecREST struct{ nodeStream }

var _ rest.Connecter = &ExecREST{}

// New implements rest.Storage.
func (r *ExecREST) New() runtime.Object { return &corev1.PodExecOptions{} }

// NewConnectOptions implements rest.Connecter.
func (r *ExecREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodExecOptions{}, false, ""
}

// Connect implements rest.Connecter.
func (r *ExecREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*corev1.PodExecOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	return r.stdio(ctx, name, o.Container, "exec into", "exec", url.Values{"command": o.Command},
		translator.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}, responder)
}

// nodeStream is what exec and portforward share: they upgrade the client's connection and
// proxy it to the pod's node agent.
type nodeStream struct {
	pods  *genericregistry.Store
	nodes *NodeConnection
}

// Destroy implements rest.Storage.
func (nodeStream) Destroy() {}

// ConnectMethods implements rest.Connecter.
func (nodeStream) ConnectMethods() []string { return []string{"GET", "POST"} }

// stdio proxies a stream to a container's standard streams on the agent (/exec or
// /attach): the pod's node, its container (the only one if unnamed), not a finished pod;
// a WebSocket client is translated to the agent's SPDY, as upstream does.
func (s nodeStream) stdio(ctx context.Context, name, container, verb, endpoint string, q url.Values, streams translator.Options,
	responder rest.Responder) (http.Handler, error) {
	pod, loc, tr, err := podOnNode(ctx, s.pods, s.nodes, name)
	if err != nil {
		return nil, err
	}
	if container, err = defaultContainer(pod, container); err != nil {
		return nil, err
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot %s a container in a completed pod; current phase is %s", verb, pod.Status.Phase))
	}
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	loc.Path = fmt.Sprintf("/%s/%s/%s/%s", endpoint, ns, name, container)
	for k, v := range map[string]bool{"stdin": streams.Stdin, "stdout": streams.Stdout, "stderr": streams.Stderr, "tty": streams.Tty} {
		if v {
			q.Set(k, "1")
		}
	}
	loc.RawQuery = q.Encode()
	upgrade := proxy.NewUpgradeAwareHandler(loc, tr, false, true, errorResponder{responder})
	stream := translator.NewStreamTranslatorHandler(loc, tr, 0, streams)
	return translator.NewTranslatingHandler(upgrade, stream, wsstream.IsWebSocketRequestWithStreamCloseProtocol), nil
}

type errorResponder struct{ rest.Responder }

func (e errorResponder) Error(w http.ResponseWriter, req *http.Request, err error) {
	e.Responder.Error(err)
}

// AttachREST serves pods/attach (`kubectl attach`, `kubectl run -i`): the client's upgraded
// connection joins a running container's own stdio through the agent, translated from
// WebSocket as exec is.
type AttachREST struct{ nodeStream }

var _ rest.Connecter = &AttachREST{}

// New implements rest.Storage.
func (r *AttachREST) New() runtime.Object { return &corev1.PodAttachOptions{} }

// NewConnectOptions implements rest.Connecter.
func (r *AttachREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodAttachOptions{}, false, ""
}

// Connect implements rest.Connecter.
func (r *AttachREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*corev1.PodAttachOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	return r.stdio(ctx, name, o.Container, "attach to", "attach", url.Values{},
		translator.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}, responder)
}

// NodeProxyREST serves nodes/proxy: HTTPS to the node agent's API (its healthz, logs and
// streams), with the API server's kubelet-client certificate, as upstream's.
type NodeProxyREST struct{ nodes *NodeConnection }

var _ rest.Connecter = &NodeProxyREST{}

// New implements rest.Storage.
func (r *NodeProxyREST) New() runtime.Object { return &corev1.NodeProxyOptions{} }

// Destroy implements rest.Storage.
func (r *NodeProxyREST) Destroy() {}

// ConnectMethods implements rest.Connecter.
func (r *NodeProxyREST) ConnectMethods() []string { return proxyMethods }

// NewConnectOptions implements rest.Connecter: the rest of the URL is the path.
func (r *NodeProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.NodeProxyOptions{}, true, "path"
}

// Connect implements rest.Connecter.
func (r *NodeProxyREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*corev1.NodeProxyOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	if r.nodes == nil {
		return nil, apierrors.NewServiceUnavailable("the API server has no client credentials for node agents")
	}
	node, _, _ := strings.Cut(name, ":") // "node:port" names the agent's port, which skiff takes from the Node
	loc, tr, err := r.nodes.location(ctx, node)
	if err != nil {
		return nil, err
	}
	loc.Path = proxyPath(o.Path)
	h := proxy.NewUpgradeAwareHandler(loc, tr, true, false, errorResponder{responder})
	h.UseLocationHost = true
	return h, nil
}
