package registry

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
)

// ProxyREST serves pods/proxy: HTTP to a port of the pod, from the API server (which has a
// route to every pod), as upstream's. The name is "pod", "pod:port" or "scheme:pod:port";
// the port may be a container port's name.
type ProxyREST struct {
	pods *genericregistry.Store
}

var _ rest.Connecter = &ProxyREST{}

// proxyMethods are the methods upstream proxies.
var proxyMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// New implements rest.Storage.
func (r *ProxyREST) New() runtime.Object { return &corev1.PodProxyOptions{} }

// Destroy implements rest.Storage.
func (r *ProxyREST) Destroy() {}

// ConnectMethods implements rest.Connecter.
func (r *ProxyREST) ConnectMethods() []string { return proxyMethods }

// NewConnectOptions implements rest.Connecter: the rest of the URL is the path.
func (r *ProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodProxyOptions{}, true, "path"
}

// Connect implements rest.Connecter.
func (r *ProxyREST) Connect(ctx context.Context, id string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*corev1.PodProxyOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	scheme, name, port, err := splitProxyName(id)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	obj, err := r.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod := obj.(*corev1.Pod)
	if pod.Status.PodIP == "" {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s has no address yet", name))
	}
	n, err := podProxyPort(pod, port)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	loc := &url.URL{Scheme: scheme, Host: net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(n)), Path: proxyPath(o.Path)}
	return proxyTo(loc, responder), nil
}

// proxyPath is the backend path of a proxy request: empty when the request named none (the
// proxy then redirects a GET to ".../proxy/", as upstream), else rooted.
func proxyPath(p string) string {
	if p == "" {
		return ""
	}
	return "/" + strings.TrimPrefix(p, "/")
}

// proxyTo proxies a request, upgrades (WebSocket) included, to loc; HTTPS backends are not
// verified, as upstream's pod and service proxy does not.
func proxyTo(loc *url.URL, responder rest.Responder) http.Handler {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // upstream's proxy does not verify backends
		TLSHandshakeTimeout: 10 * time.Second,
	}
	// wrapTransport: links in HTML the backend returns are rewritten to go through the proxy
	// again (href="/x" becomes href=".../proxy/x"), as upstream's pod and service proxy does.
	h := proxy.NewUpgradeAwareHandler(loc, tr, true, false, errorResponder{responder})
	return h
}

// splitProxyName parses "name", "name:port" and "scheme:name:port" (scheme http or https).
func splitProxyName(id string) (scheme, name, port string, err error) {
	parts := strings.Split(id, ":")
	switch len(parts) {
	case 1:
		return "http", parts[0], "", nil
	case 2:
		return "http", parts[0], parts[1], nil
	case 3:
		if parts[0] != "http" && parts[0] != "https" && parts[0] != "" {
			return "", "", "", fmt.Errorf("invalid scheme %q in %q: use http or https", parts[0], id)
		}
		if parts[0] == "" {
			parts[0] = "http"
		}
		return parts[0], parts[1], parts[2], nil
	}
	return "", "", "", fmt.Errorf("invalid proxy name %q: want name, name:port or scheme:name:port", id)
}

// podProxyPort resolves the port of a pods/proxy request: a number, a container port's name,
// or, when none is given, the first container port (80 if there is none), as upstream.
func podProxyPort(pod *corev1.Pod, port string) (int, error) {
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				return int(c.Ports[0].ContainerPort), nil
			}
		}
		return 80, nil
	}
	if n, err := strconv.Atoi(port); err == nil {
		if n < 1 || n > 65535 {
			return 0, fmt.Errorf("port %d out of range", n)
		}
		return n, nil
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port {
				return int(p.ContainerPort), nil
			}
		}
	}
	return 0, fmt.Errorf("pod %s has no port named %q", pod.Name, port)
}

// ServiceProxyREST serves services/proxy: HTTP to one of the Service's ready endpoints, as
// upstream's. The name is "svc", "svc:port" or "scheme:svc:port"; port is a Service port's
// name or number.
type ServiceProxyREST struct {
	services, endpoints *genericregistry.Store
}

var _ rest.Connecter = &ServiceProxyREST{}

// New implements rest.Storage.
func (r *ServiceProxyREST) New() runtime.Object { return &corev1.ServiceProxyOptions{} }

// Destroy implements rest.Storage.
func (r *ServiceProxyREST) Destroy() {}

// ConnectMethods implements rest.Connecter.
func (r *ServiceProxyREST) ConnectMethods() []string { return proxyMethods }

// NewConnectOptions implements rest.Connecter.
func (r *ServiceProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.ServiceProxyOptions{}, true, "path"
}

// Connect implements rest.Connecter.
func (r *ServiceProxyREST) Connect(ctx context.Context, id string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*corev1.ServiceProxyOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	scheme, name, port, err := splitProxyName(id)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	obj, err := r.services.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	epObj, err := r.endpoints.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	addr, err := serviceBackend(obj.(*corev1.Service), epObj.(*corev1.Endpoints), port)
	if err != nil {
		return nil, err
	}
	loc := &url.URL{Scheme: scheme, Host: addr, Path: proxyPath(o.Path)}
	return proxyTo(loc, responder), nil
}

// serviceBackend picks a ready endpoint address of the Service's port (by name or number; the
// only port when none is named), spreading requests over the endpoints.
func serviceBackend(svc *corev1.Service, eps *corev1.Endpoints, port string) (string, error) {
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if port == "" && len(svc.Spec.Ports) == 1 || p.Name == port || (port != "" && strconv.Itoa(int(p.Port)) == port) {
			sp = p
			break
		}
	}
	if sp == nil {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %q found for service %q", port, svc.Name))
	}
	var candidates []string
	for _, ss := range eps.Subsets {
		for _, ep := range ss.Ports {
			if ep.Name != sp.Name {
				continue
			}
			for _, a := range ss.Addresses {
				candidates = append(candidates, net.JoinHostPort(a.IP, strconv.Itoa(int(ep.Port))))
			}
		}
	}
	if len(candidates) == 0 {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", svc.Name))
	}
	return candidates[int(time.Now().UnixNano()%int64(len(candidates)))], nil
}
