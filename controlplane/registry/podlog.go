package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
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
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	"k8s.io/apiserver/pkg/registry/rest"
)

// NodeConnection reaches node agents' APIs (port 10250) as the API server's kubelet client.
type NodeConnection struct {
	// TLS carries the apiserver-kubelet-client certificate and the cluster CA.
	TLS *tls.Config
	// Nodes reads Node objects (addresses and the agent's port).
	Nodes *genericregistry.Store
}

func (c *NodeConnection) location(ctx context.Context, nodeName string) (*url.URL, http.RoundTripper, error) {
	obj, err := c.Nodes.Get(ctx, nodeName, &metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	return c.LocationOf(obj.(*corev1.Node))
}

// LocationOf is a node agent's base URL and a transport that reaches it as the API server,
// for a Node already read (the metrics scraper lists them all).
func (c *NodeConnection) LocationOf(node *corev1.Node) (*url.URL, http.RoundTripper, error) {
	nodeName := node.Name
	host := ""
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range node.Status.Addresses {
			if a.Type == t && host == "" {
				host = a.Address
			}
		}
	}
	if host == "" {
		return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %s has no address", nodeName))
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 {
		port = 10250
	}
	tr := &http.Transport{TLSClientConfig: c.TLS.Clone(), DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second}
	tr.TLSClientConfig.ServerName = host
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(int(port)))}, tr, nil
}

// podOnNode reads a pod and where its node's agent listens.
func podOnNode(ctx context.Context, pods *genericregistry.Store, nodes *NodeConnection, name string) (*corev1.Pod, *url.URL, http.RoundTripper, error) {
	obj, err := pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName == "" || nodes == nil {
		return nil, nil, nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", name))
	}
	loc, tr, err := nodes.location(ctx, pod.Spec.NodeName)
	return pod, loc, tr, err
}

// defaultContainer resolves the container a request names, or the pod's only one.
func defaultContainer(pod *corev1.Pod, container string) (string, error) {
	if container == "" {
		if len(pod.Spec.Containers) != 1 {
			var names []string
			for _, c := range pod.Spec.Containers {
				names = append(names, c.Name)
			}
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: [%s]", pod.Name, strings.Join(names, " ")))
		}
		return pod.Spec.Containers[0].Name, nil
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.Name == container {
				return container, nil
			}
		}
	}
	for _, ec := range pod.Spec.EphemeralContainers {
		if ec.Name == container {
			return container, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, pod.Name))
}

// LogREST serves pods/log by streaming the node agent's containerLogs.
type LogREST struct {
	pods  *genericregistry.Store
	nodes *NodeConnection
}

var (
	_ rest.GetterWithOptions = &LogREST{}
	_ rest.StorageMetadata   = &LogREST{}
)

// New implements rest.Storage.
func (r *LogREST) New() runtime.Object { return &corev1.Pod{} }

// Destroy implements rest.Storage.
func (r *LogREST) Destroy() {}

// ProducesMIMETypes implements rest.StorageMetadata.
func (r *LogREST) ProducesMIMETypes(verb string) []string { return []string{"text/plain"} }

// ProducesObject implements rest.StorageMetadata.
func (r *LogREST) ProducesObject(verb string) any { return "" }

// NewGetOptions implements rest.GetterWithOptions.
func (r *LogREST) NewGetOptions() (runtime.Object, bool, string) {
	return &corev1.PodLogOptions{}, false, ""
}

// Get implements rest.GetterWithOptions.
func (r *LogREST) Get(ctx context.Context, name string, opts runtime.Object) (runtime.Object, error) {
	o, ok := opts.(*corev1.PodLogOptions)
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
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	loc.Path = fmt.Sprintf("/containerLogs/%s/%s/%s", ns, name, container)
	q := url.Values{}
	if o.Follow {
		q.Set("follow", "true")
	}
	if o.Previous {
		q.Set("previous", "true")
	}
	if o.Timestamps {
		q.Set("timestamps", "true")
	}
	if o.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*o.TailLines, 10))
	}
	if o.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*o.SinceSeconds, 10))
	}
	if o.SinceTime != nil {
		q.Set("sinceTime", o.SinceTime.Format(time.RFC3339))
	}
	if o.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*o.LimitBytes, 10))
	}
	loc.RawQuery = q.Encode()
	return &logStreamer{genericrest.LocationStreamer{Location: loc, Transport: tr, ContentType: "text/plain", Flush: o.Follow,
		ResponseChecker: genericrest.NewGenericHttpResponseChecker(corev1.Resource("pods/log"), name)}}, nil
}

// logStreamer is the agent's log response as the API server streams it. Over a WebSocket the
// apiserver library copies the stream with a loop that stops at the first io.EOF and drops
// the bytes read with it — and a short log, sent with a Content-Length, arrives exactly so:
// its last bytes and io.EOF from one Read. The body is therefore read through eofApart.
type logStreamer struct{ genericrest.LocationStreamer }

func (s *logStreamer) InputStream(ctx context.Context, apiVersion, acceptHeader string) (io.ReadCloser, bool, string, error) {
	rc, flush, contentType, err := s.LocationStreamer.InputStream(ctx, apiVersion, acceptHeader)
	if err != nil || rc == nil {
		return rc, flush, contentType, err
	}
	return &eofApart{ReadCloser: rc}, flush, contentType, nil
}

// eofApart returns data and io.EOF from separate Reads.
type eofApart struct {
	io.ReadCloser
	eof bool
}

func (r *eofApart) Read(p []byte) (int, error) {
	if r.eof {
		return 0, io.EOF
	}
	n, err := r.ReadCloser.Read(p)
	if n > 0 && errors.Is(err, io.EOF) {
		r.eof = true
		return n, nil
	}
	return n, err
}
