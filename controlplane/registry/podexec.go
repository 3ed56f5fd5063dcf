package registry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

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
	pod, loc, tr, err := podOnNode(ctx, r.pods, r.nodes, name)
	if err != nil {
		return nil, err
	}
	container, err := defaultContainer(pod, o.Container)
	if err != nil {
		return nil, err
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot exec into a container in a completed pod; current phase is %s", pod.Status.Phase))
	}
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	loc.Path = fmt.Sprintf("/exec/%s/%s/%s", ns, name, container)
	q := url.Values{"command": o.Command}
	for k, v := range map[string]bool{"stdin": o.Stdin, "stdout": o.Stdout, "stderr": o.Stderr, "tty": o.TTY} {
		if v {
			q.Set(k, "1")
		}
	}
	loc.RawQuery = q.Encode()
	upgrade := proxy.NewUpgradeAwareHandler(loc, tr, false, true, errorResponder{responder})
	stream := translator.NewStreamTranslatorHandler(loc, tr, 0, translator.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY})
	return translator.NewTranslatingHandler(upgrade, stream, wsstream.IsWebSocketRequestWithStreamCloseProtocol), nil
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

type errorResponder struct{ rest.Responder }

func (e errorResponder) Error(w http.ResponseWriter, req *http.Request, err error) {
	e.Responder.Error(err)
}
