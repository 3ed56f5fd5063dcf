package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/agent/clusterdns"
	"github.com/skiff-sh/skiff/agent/pods"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
	"github.com/skiff-sh/skiff/internal/supervisor"
)

// startDNS runs the node's cluster DNS under the supervisor: it listens on the node's address
// (in the pods' network namespace when the agent has one), forwards what is not the
// cluster's to the node's resolvers, and once listening publishes its address on the Node,
// where the cluster DNS controller makes it kube-dns's endpoint for this node.
func startDNS(ctx context.Context, sup *supervisor.Supervisor, client kubernetes.Interface, shared *sharedinformers.Shared, o Options, log *slog.Logger) (*clusterdns.Server, error) {
	listen := o.DNSAddress
	if listen == "" {
		listen = net.JoinHostPort(o.primaryIP(), "53")
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return nil, fmt.Errorf("--dns-address %q: %w", listen, err)
	}
	upstreams, err := dnsUpstreams(o, listen)
	if err != nil {
		return nil, err
	}
	domain := o.ClusterDomain
	if domain == "" {
		domain = pods.DefaultClusterDomain
	}
	var fwd *clusterdns.Forwarder
	if len(upstreams) > 0 {
		fwd = clusterdns.NewForwarder(upstreams, 10000)
	}
	log = log.With("component", "cluster-dns")
	s := clusterdns.New(clusterdns.Options{Domain: domain, Listen: listen, Forwarder: fwd,
		Informers: clusterdns.Informers{Services: shared.Core().V1().Services(), EndpointSlices: shared.Discovery().V1().EndpointSlices(),
			Pods: shared.Core().V1().Pods(), Start: shared.Start},
		Listening: func(addr string) {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{clusterdns.AddressAnnotation: addr}}})
			if _, err := client.CoreV1().Nodes().Patch(ctx, o.NodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
				log.Warn("publishing the cluster DNS address on the Node", "err", err)
			}
		}}, log)
	sup.Go(supervisor.Part{Name: "cluster-dns", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		if o.Netns == "" {
			return s.Run(ctx, client)
		}
		// The pods' namespace is where their queries arrive: the sockets are made there.
		return ns.WithNetNSPath(o.Netns, func(ns.NetNS) error { return s.Run(ctx, client) })
	}})
	return s, nil
}

// dnsUpstreams is --dns-upstream as host:port, or the nameservers of the node's resolv.conf
// other than the cluster DNS itself.
func dnsUpstreams(o Options, self string) ([]string, error) {
	if len(o.DNSUpstreams) == 1 && o.DNSUpstreams[0] == "none" {
		return nil, nil
	}
	if len(o.DNSUpstreams) > 0 {
		var out []string
		for _, u := range o.DNSUpstreams {
			if _, _, err := net.SplitHostPort(u); err != nil {
				if net.ParseIP(strings.Trim(u, "[]")) == nil {
					return nil, fmt.Errorf("--dns-upstream %q: want HOST[:PORT] or none", u)
				}
				u = net.JoinHostPort(strings.Trim(u, "[]"), "53")
			}
			out = append(out, u)
		}
		return out, nil
	}
	path := o.ResolvConf
	if path == "" {
		path = pods.DefaultResolvConf
	}
	ups, err := clusterdns.Upstreams(path, self)
	if err != nil {
		// A node without a resolv.conf still answers for the cluster.
		return nil, nil
	}
	return ups, nil
}
