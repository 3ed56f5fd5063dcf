package registry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	translator "k8s.io/apiserver/pkg/util/proxy"
)

// PortForwardREST serves pods/portforward by proxying to the node agent; kubectl 1.31+'s
// WebSocket tunnel is unwrapped to SPDY here, as upstream does.
type PortForwardREST struct{ nodeStream }

var _ rest.Connecter = &PortForwardREST{}

// New implements rest.Storage.
func (r *PortForwardREST) New() runtime.Object { return &corev1.PodPortForwardOptions{} }

// NewConnectOptions implements rest.Connecter.
func (r *PortForwardREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodPortForwardOptions{}, false, ""
}

// Connect implements rest.Connecter.
func (r *PortForwardREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*corev1.PodPortForwardOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	_, loc, tr, err := podOnNode(ctx, r.pods, r.nodes, name)
	if err != nil {
		return nil, err
	}
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	loc.Path = fmt.Sprintf("/portForward/%s/%s", ns, name)
	q := url.Values{}
	for _, p := range o.Ports {
		q.Add("port", strconv.Itoa(int(p)))
	}
	loc.RawQuery = q.Encode()
	upgrade := proxy.NewUpgradeAwareHandler(loc, tr, false, true, errorResponder{responder})
	return translator.NewTranslatingHandler(upgrade, translator.NewTunnelingHandler(upgrade), wsstream.IsWebSocketRequestWithTunnelingProtocol), nil
}
