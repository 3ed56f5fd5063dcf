package flows

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// Filter picks flows, as `hubble observe`'s flags do: values of one kind are alternatives,
// kinds must all match; a pod, namespace, label or port matches either end of the flow.
type Filter struct {
	// Pods are "namespace/name" or a name in any namespace.
	Pods       []string
	Namespaces []string
	// Labels are selectors (app=web, tier in (a,b)); a flow matches one when either end's
	// pod has labels it selects.
	Labels []labels.Selector
	// Verdicts are FORWARDED, DROPPED, AUDIT.
	Verdicts []string
	Ports    []uint16
	// Protocols are TCP, UDP, SCTP, ICMPv4, ICMPv6.
	Protocols []string
	// Services are "namespace/name" of a translation's or a drop's Service.
	Services []string
	// Types are policy-verdict, translation, drop.
	Types []string
}

// Query keys, as `skiff observe`'s flags.
var queryKeys = []string{"pod", "namespace", "label", "verdict", "port", "protocol", "service", "type"}

// ParseFilter reads a filter from query parameters (pod=…&verdict=dropped&…), rejecting
// values that could never match with the reason.
func ParseFilter(q url.Values) (Filter, error) {
	var f Filter
	for key := range q {
		if !slices.Contains(queryKeys, key) && key != "last" && key != "follow" {
			return f, fmt.Errorf("unknown flow filter %q (known: %s)", key, strings.Join(queryKeys, ", "))
		}
	}
	f.Pods = nonEmpty(q["pod"])
	f.Namespaces = nonEmpty(q["namespace"])
	f.Services = nonEmpty(q["service"])
	// A selector has its own commas (app=web,tier in (a,b)): one per value, unsplit.
	for _, s := range q["label"] {
		if strings.TrimSpace(s) == "" {
			continue
		}
		sel, err := labels.Parse(s)
		if err != nil {
			return f, fmt.Errorf("label %q: %w", s, err)
		}
		f.Labels = append(f.Labels, sel)
	}
	for _, s := range nonEmpty(q["verdict"]) {
		v := strings.ToUpper(s)
		if v != "FORWARDED" && v != "DROPPED" && v != "AUDIT" {
			return f, fmt.Errorf("verdict %q: want forwarded, dropped or audit", s)
		}
		f.Verdicts = append(f.Verdicts, v)
	}
	for _, s := range nonEmpty(q["port"]) {
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil || n == 0 {
			return f, fmt.Errorf("port %q: want a number from 1 to 65535", s)
		}
		f.Ports = append(f.Ports, uint16(n))
	}
	for _, s := range nonEmpty(q["protocol"]) {
		p, ok := protocolOf(s)
		if !ok {
			return f, fmt.Errorf("protocol %q: want tcp, udp, sctp, icmpv4 or icmpv6", s)
		}
		f.Protocols = append(f.Protocols, p)
	}
	for _, s := range nonEmpty(q["type"]) {
		t := strings.ToLower(s)
		if t != "policy-verdict" && t != "translation" && t != "drop" {
			return f, fmt.Errorf("type %q: want policy-verdict, translation or drop", s)
		}
		f.Types = append(f.Types, t)
	}
	return f, nil
}

// Query is the filter as query parameters (what ParseFilter reads).
func (f Filter) Query() url.Values {
	q := url.Values{}
	q["pod"] = f.Pods
	q["namespace"] = f.Namespaces
	for _, s := range f.Labels {
		q.Add("label", s.String())
	}
	q["verdict"] = f.Verdicts
	for _, p := range f.Ports {
		q.Add("port", strconv.Itoa(int(p)))
	}
	q["protocol"] = f.Protocols
	q["service"] = f.Services
	q["type"] = f.Types
	for k, v := range q {
		if len(v) == 0 {
			delete(q, k)
		}
	}
	return q
}

func nonEmpty(in []string) []string {
	var out []string
	for _, s := range in {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func protocolOf(s string) (string, bool) {
	for _, p := range []string{"TCP", "UDP", "SCTP", "ICMPv4", "ICMPv6"} {
		if strings.EqualFold(s, p) {
			return p, true
		}
	}
	return "", false
}

// Match says whether f picks flow.
func (f Filter) Match(fl *Flow) bool {
	ends := []*Peer{fl.Source, fl.Destination}
	either := func(match func(*Peer) bool) bool {
		for _, p := range ends {
			if p != nil && match(p) {
				return true
			}
		}
		return false
	}
	anyOf := func(n int, match func(i int) bool) bool {
		if n == 0 {
			return true
		}
		for i := range n {
			if match(i) {
				return true
			}
		}
		return false
	}
	return anyOf(len(f.Pods), func(i int) bool {
		ns, name, qualified := strings.Cut(f.Pods[i], "/")
		return either(func(p *Peer) bool {
			if qualified {
				return p.Namespace == ns && p.PodName == name
			}
			return p.PodName == f.Pods[i]
		})
	}) && anyOf(len(f.Namespaces), func(i int) bool {
		return either(func(p *Peer) bool { return p.Namespace == f.Namespaces[i] })
	}) && anyOf(len(f.Labels), func(i int) bool {
		return either(func(p *Peer) bool { return p.PodName != "" && f.Labels[i].Matches(peerLabels(p)) })
	}) && anyOf(len(f.Verdicts), func(i int) bool {
		return fl.Verdict == f.Verdicts[i]
	}) && anyOf(len(f.Ports), func(i int) bool {
		return fl.L4.SourcePort == f.Ports[i] || fl.L4.DestinationPort == f.Ports[i] ||
			(fl.Service != nil && strings.HasSuffix(fl.Service.Frontend, ":"+strconv.Itoa(int(f.Ports[i]))))
	}) && anyOf(len(f.Protocols), func(i int) bool {
		return fl.L4.Protocol == f.Protocols[i]
	}) && anyOf(len(f.Services), func(i int) bool {
		return fl.Service != nil && fl.Service.Name == f.Services[i]
	}) && anyOf(len(f.Types), func(i int) bool {
		return fl.Type == f.Types[i]
	})
}

func peerLabels(p *Peer) labels.Set {
	set := labels.Set{}
	for _, l := range p.Labels {
		k, v, _ := strings.Cut(l, "=")
		set[k] = v
	}
	return set
}
