package config

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fixtures.

func cm(yaml string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ConfigMapNamespace, Name: ConfigMapName},
		Data:       map[string]string{ConfigKey: yaml},
	}
}

type nodeOpt func(*corev1.Node)

func labels(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func ann(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func addr(typ corev1.NodeAddressType, a string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: typ, Address: a})
	}
}

func internal(a string) nodeOpt { return addr(corev1.NodeInternalIP, a) }

func deleting() nodeOpt {
	return func(n *corev1.Node) {
		t := metav1.NewTime(time.Unix(1700000000, 0))
		n.DeletionTimestamp = &t
	}
}

func mkNode(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range opts {
		o(n)
	}
	return n
}

// self is the node under test: 10.0.0.1 in rack r1.
func self(opts ...nodeOpt) *corev1.Node {
	return mkNode("n1", append([]nodeOpt{internal("10.0.0.1"), labels("rack", "r1")}, opts...)...)
}

// secretStore is a fake secret lookup that records its calls.
type secretStore struct {
	data  map[string]string // "name/key" -> value
	err   error
	calls []string
}

func (s *secretStore) get(name, key string) (string, error) {
	s.calls = append(s.calls, name+"/"+key)
	if s.err != nil {
		return "", s.err
	}
	v, ok := s.data[name+"/"+key]
	if !ok {
		return "", fmt.Errorf("secret %s has no key %q", name, key)
	}
	return v, nil
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func u32(v uint32) *uint32 { return &v }

func boolp(v bool) *bool { return &v }

// defaults is what a node at 10.0.0.1 gets with no configuration at all.
func defaults() Config {
	return Config{
		ASN:             64512,
		ClusterASN:      64512,
		RouterID:        ip("10.0.0.1"),
		IPv4:            ip("10.0.0.1"),
		ListenPort:      179,
		NodeMesh:        true,
		GracefulRestart: GracefulRestart{Enabled: true, RestartTime: 120 * time.Second},
		BFD:             BFD{TransmitInterval: 100 * time.Millisecond, Multiplier: 3},
	}
}

// tor is an explicit peer with default timers.
func tor(a string, asn uint32) Peer {
	return Peer{Address: ip(a), ASN: asn, HoldTime: 90 * time.Second, KeepaliveTime: 30 * time.Second, Name: "tor-" + ip(a).String()}
}

func mustResolve(t *testing.T, c *corev1.ConfigMap, n *corev1.Node, secret func(string, string) (string, error), f Overrides) Config {
	t.Helper()
	cfg, err := Resolve(c, n, secret, f)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return cfg
}

func assertConfig(t *testing.T, got, want Config) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config mismatch\n got: %+v\nwant: %+v", got, want)
	}
}

// Tests.

func TestResolveDefaults(t *testing.T) {
	for name, c := range map[string]*corev1.ConfigMap{
		"nil configmap":  nil,
		"empty document": cm(""),
		"empty mapping":  cm("{}"),
		"null document":  cm("null"),
		"comment only":   cm("# nothing here\n"),
		"all null":       cm("asn: ~\nnodeMesh: null\nlistenPort:\npeers:\ngracefulRestart:\n"),
		"empty gr":       cm("gracefulRestart: {}\npeers: []\n"),
		"other keys":     {ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "skiff-bgp"}, Data: map[string]string{ConfigKey: "", "README": "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			store := &secretStore{}
			assertConfig(t, mustResolve(t, c, self(), store.get, Overrides{}), defaults())
			if len(store.calls) != 0 {
				t.Errorf("secret lookups %v, want none", store.calls)
			}
		})
	}
	// No secret function is needed when no peer has a password.
	assertConfig(t, mustResolve(t, nil, self(), nil, Overrides{}), defaults())
}

func TestResolveEveryField(t *testing.T) {
	c := cm(`
asn: 65000
nodeMesh: false
listenPort: 1790
peers:
  - address: 198.18.0.254
    asn: 64512
    passwordSecret: {name: bgp-secrets, key: tor}
    holdTime: 9s
    keepaliveTime: 2s
    ebgpMultihop: 2
    nodeSelector: {rack: r1}
  - address: "2001:db8::fe"
    asn: 4200000000
    holdTime: 0
    ebgpMultihop: 255
  - address: 198.18.0.253
    asn: 65001
    holdTime: 240
    keepaliveTime: 1m
    ebgpMultihop: 1
gracefulRestart: {enabled: false, restartTime: 300s}
`)
	store := &secretStore{data: map[string]string{"bgp-secrets/tor": "s3cret"}}
	got := mustResolve(t, c, self(), store.get, Overrides{})
	want := Config{
		ASN:        65000,
		ClusterASN: 65000,
		RouterID:   ip("10.0.0.1"),
		IPv4:       ip("10.0.0.1"),
		ListenPort: 1790,
		NodeMesh:   false,
		Peers: []Peer{
			{Address: ip("198.18.0.254"), ASN: 64512, Password: "s3cret", HoldTime: 9 * time.Second, KeepaliveTime: 2 * time.Second, EBGPMultihop: 2, Name: "tor-198.18.0.254"},
			{Address: ip("2001:db8::fe"), ASN: 4200000000, EBGPMultihop: 255, Name: "tor-2001:db8::fe"},
			{Address: ip("198.18.0.253"), ASN: 65001, HoldTime: 240 * time.Second, KeepaliveTime: time.Minute, EBGPMultihop: 1, Name: "tor-198.18.0.253"},
		},
		GracefulRestart: GracefulRestart{Enabled: false, RestartTime: 300 * time.Second},
		BFD:             DefaultBFD,
	}
	assertConfig(t, got, want)
	if !reflect.DeepEqual(store.calls, []string{"bgp-secrets/tor"}) {
		t.Errorf("secret lookups %v, want [bgp-secrets/tor]", store.calls)
	}
	// The same document in JSON.
	j := cm(`{"asn": 65000, "nodeMesh": false, "listenPort": 1790, "gracefulRestart": {"enabled": false, "restartTime": "300s"},
	  "peers": [{"address": "198.18.0.254", "asn": 64512, "passwordSecret": {"name": "bgp-secrets", "key": "tor"},
	             "holdTime": "9s", "keepaliveTime": "2s", "ebgpMultihop": 2, "nodeSelector": {"rack": "r1"}},
	            {"address": "2001:db8::fe", "asn": 4200000000, "holdTime": "0s", "ebgpMultihop": 255},
	            {"address": "198.18.0.253", "asn": 65001, "holdTime": "4m", "keepaliveTime": 60, "ebgpMultihop": 1}]}`)
	assertConfig(t, mustResolve(t, j, self(), store.get, Overrides{}), want)
}

func TestResolveScalars(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want func(*Config)
	}{
		{"asn 1", "asn: 1", func(c *Config) { c.ASN, c.ClusterASN = 1, 1 }},
		{"asn max", "asn: 4294967295", func(c *Config) { c.ASN, c.ClusterASN = 4294967295, 4294967295 }},
		{"asn 23455", "asn: 23455", func(c *Config) { c.ASN, c.ClusterASN = 23455, 23455 }},
		{"asn 23457", "asn: 23457", func(c *Config) { c.ASN, c.ClusterASN = 23457, 23457 }},
		{"asn float that is an integer", "asn: 64513.0", func(c *Config) { c.ASN, c.ClusterASN = 64513, 64513 }},
		{"nodeMesh true", "nodeMesh: true", func(c *Config) {}},
		{"nodeMesh false", "nodeMesh: false", func(c *Config) { c.NodeMesh = false }},
		{"nodeMesh yaml 1.1 no", "nodeMesh: no", func(c *Config) { c.NodeMesh = false }},
		{"listenPort 1", "listenPort: 1", func(c *Config) { c.ListenPort = 1 }},
		{"listenPort 65535", "listenPort: 65535", func(c *Config) { c.ListenPort = 65535 }},
		{"gr enabled only", "gracefulRestart: {enabled: false}", func(c *Config) { c.GracefulRestart.Enabled = false }},
		{"gr restartTime 1s", "gracefulRestart: {restartTime: 1s}", func(c *Config) { c.GracefulRestart.RestartTime = time.Second }},
		{"gr restartTime 4095s", "gracefulRestart: {restartTime: 4095s}", func(c *Config) { c.GracefulRestart.RestartTime = 4095 * time.Second }},
		{"gr restartTime 68m15s", "gracefulRestart: {restartTime: 68m15s}", func(c *Config) { c.GracefulRestart.RestartTime = 4095 * time.Second }},
		{"gr restartTime seconds", "gracefulRestart: {restartTime: 60}", func(c *Config) { c.GracefulRestart.RestartTime = time.Minute }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := defaults()
			tc.want(&want)
			assertConfig(t, mustResolve(t, cm(tc.yaml), self(), nil, Overrides{}), want)
		})
	}
}

func TestResolvePeerTimers(t *testing.T) {
	for _, tc := range []struct {
		name            string
		timers          string
		hold, keepalive time.Duration
	}{
		{"defaults", "", 90 * time.Second, 30 * time.Second},
		{"hold 9s", "holdTime: 9s", 9 * time.Second, 3 * time.Second},
		{"hold 3s minimum", "holdTime: 3s", 3 * time.Second, time.Second},
		{"hold 4s keepalive rounds down", "holdTime: 4s", 4 * time.Second, time.Second},
		{"hold 10s keepalive rounds down", "holdTime: 10s", 10 * time.Second, 3 * time.Second},
		{"hold 65535s maximum", "holdTime: 65535s", 65535 * time.Second, 21845 * time.Second},
		{"hold 0 disables keepalives", "holdTime: 0", 0, 0},
		{"hold 0s string", "holdTime: 0s", 0, 0},
		{"hold 0 with keepalive 0", "{holdTime: 0, keepaliveTime: 0s}", 0, 0},
		{"hold in seconds", "holdTime: 30", 30 * time.Second, 10 * time.Second},
		{"hold in minutes", "holdTime: 3m", 3 * time.Minute, time.Minute},
		{"keepalive only", "keepaliveTime: 10s", 90 * time.Second, 10 * time.Second},
		{"keepalive hold-1s", "{holdTime: 9s, keepaliveTime: 8s}", 9 * time.Second, 8 * time.Second},
		{"keepalive 1s", "{holdTime: 3s, keepaliveTime: 1s}", 3 * time.Second, time.Second},
		{"keepalive in seconds", "{holdTime: 9s, keepaliveTime: 3}", 9 * time.Second, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := "peers:\n- {address: 198.18.0.254, asn: 64512}\n"
			if tc.timers != "" {
				y = "peers:\n- address: 198.18.0.254\n  asn: 64512\n  " + strings.Trim(tc.timers, "{}") + "\n"
				y = strings.ReplaceAll(y, ", ", "\n  ")
			}
			cfg := mustResolve(t, cm(y), self(), nil, Overrides{})
			want := defaults()
			p := tor("198.18.0.254", 64512)
			p.HoldTime, p.KeepaliveTime = tc.hold, tc.keepalive
			want.Peers = []Peer{p}
			assertConfig(t, cfg, want)
		})
	}
}

func TestResolvePrecedence(t *testing.T) {
	const cmAll = "asn: 65000\nnodeMesh: false\npeers: [{address: 198.18.0.1, asn: 65100}]"
	annAll := ann(AnnotationASN, "65001", AnnotationNodeMesh, "true", AnnotationPeers, `[{"address": "198.18.0.2", "asn": 65200}]`)
	flagsAll := Overrides{ASN: u32(65002), NodeMesh: boolp(false), Peers: []Peer{{Address: ip("198.18.0.3"), ASN: 65300}}}
	for _, tc := range []struct {
		name       string
		cm         *corev1.ConfigMap
		node       *corev1.Node
		flags      Overrides
		asn, clASN uint32
		mesh       bool
		peers      []Peer
	}{
		{"defaults", nil, self(), Overrides{}, 64512, 64512, true, nil},
		{"configmap over defaults", cm(cmAll), self(), Overrides{}, 65000, 65000, false, []Peer{tor("198.18.0.1", 65100)}},
		{"annotations over configmap", cm(cmAll), self(annAll), Overrides{}, 65001, 65000, true, []Peer{tor("198.18.0.2", 65200)}},
		{"annotations over defaults", nil, self(annAll), Overrides{}, 65001, 64512, true, []Peer{tor("198.18.0.2", 65200)}},
		{"flags over annotations", cm(cmAll), self(annAll), flagsAll, 65002, 65002, false, []Peer{tor("198.18.0.3", 65300)}},
		{"flags over configmap", cm(cmAll), self(), flagsAll, 65002, 65002, false, []Peer{tor("198.18.0.3", 65300)}},
		{"flags over defaults", nil, self(), flagsAll, 65002, 65002, false, []Peer{tor("198.18.0.3", 65300)}},
		{"flag asn only", cm(cmAll), self(annAll), Overrides{ASN: u32(65002)}, 65002, 65002, true, []Peer{tor("198.18.0.2", 65200)}},
		{"flag mesh only", cm(cmAll), self(annAll), Overrides{NodeMesh: boolp(false)}, 65001, 65000, false, []Peer{tor("198.18.0.2", 65200)}},
		{"flag mesh true over annotation false", nil, self(ann(AnnotationNodeMesh, "false")), Overrides{NodeMesh: boolp(true)}, 64512, 64512, true, nil},
		{"flag peers only", cm(cmAll), self(annAll), Overrides{Peers: flagsAll.Peers}, 65001, 65000, true, []Peer{tor("198.18.0.3", 65300)}},
		{"empty flag peers replace", cm(cmAll), self(annAll), Overrides{Peers: []Peer{}}, 65001, 65000, true, nil},
		{"nil flag peers do not replace", cm(cmAll), self(), Overrides{Peers: nil}, 65000, 65000, false, []Peer{tor("198.18.0.1", 65100)}},
		{"annotation asn only", cm(cmAll), self(ann(AnnotationASN, "4200000001")), Overrides{}, 4200000001, 65000, false, []Peer{tor("198.18.0.1", 65100)}},
		{"annotation mesh only", cm(cmAll), self(ann(AnnotationNodeMesh, "true")), Overrides{}, 65000, 65000, true, []Peer{tor("198.18.0.1", 65100)}},
		{"annotation mesh false over default", nil, self(ann(AnnotationNodeMesh, "false")), Overrides{}, 64512, 64512, false, nil},
		{"annotation empty peer list replaces", cm(cmAll), self(ann(AnnotationPeers, "[]")), Overrides{}, 65000, 65000, false, nil},
		{"annotation peers in yaml", cm(cmAll), self(ann(AnnotationPeers, "- address: 198.18.0.9\n  asn: 65900\n")), Overrides{}, 65000, 65000, false, []Peer{tor("198.18.0.9", 65900)}},
		{"annotation asn with leading zeros", nil, self(ann(AnnotationASN, "064513")), Overrides{}, 64513, 64512, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustResolve(t, tc.cm, tc.node, nil, tc.flags)
			want := defaults()
			want.ASN, want.ClusterASN, want.NodeMesh, want.Peers = tc.asn, tc.clASN, tc.mesh, tc.peers
			assertConfig(t, cfg, want)
		})
	}
}

func TestResolveFlagPeers(t *testing.T) {
	flags := Overrides{Peers: []Peer{
		{Address: ip("198.18.0.1"), ASN: 65100},
		{Address: ip("::ffff:198.18.0.2"), ASN: 65200, Password: "pw", HoldTime: 9 * time.Second, EBGPMultihop: 3, Name: "spine-a"},
		{Address: ip("198.18.0.3"), ASN: 65300, HoldTime: 30 * time.Second, KeepaliveTime: 5 * time.Second},
		{Address: ip("10.0.0.1"), ASN: 65400}, // self: dropped
	}}
	store := &secretStore{}
	cfg := mustResolve(t, nil, self(), store.get, flags)
	want := defaults()
	p3 := tor("198.18.0.3", 65300)
	p3.HoldTime, p3.KeepaliveTime = 30*time.Second, 5*time.Second
	want.Peers = []Peer{
		tor("198.18.0.1", 65100),
		{Address: ip("198.18.0.2"), ASN: 65200, Password: "pw", HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second, EBGPMultihop: 3, Name: "spine-a"},
		p3,
	}
	assertConfig(t, cfg, want)
	if len(store.calls) != 0 {
		t.Errorf("secret lookups %v for flag peers, want none", store.calls)
	}
}

// TestResolveLinkLocalPeer: a router on a link the node shares, by its link-local address and
// the interface (an unnumbered fabric); two such routers may share an address on different
// links, and the same address on one link is a duplicate.
func TestResolveLinkLocalPeer(t *testing.T) {
	node := mkNode("n", internal("2001:2::2"), ann(AnnotationPeers, `[{address: "fe80::1%eth1", asn: 65001}, {address: "fe80::1%eth2", asn: 65002}]`))
	cfg := mustResolve(t, nil, node, nil, Overrides{})
	want := []Peer{tor("fe80::1%eth1", 65001), tor("fe80::1%eth2", 65002)}
	if !reflect.DeepEqual(cfg.Peers, want) {
		t.Errorf("peers %v, want %v", cfg.Peers, want)
	}
	if cfg.Peers[0].Name != "tor-fe80::1%eth1" || cfg.Peers[0].Address.Zone() != "eth1" {
		t.Errorf("peer %v: want its interface kept as the zone", cfg.Peers[0])
	}
	dup := mkNode("n", internal("2001:2::2"), ann(AnnotationPeers, `[{address: "fe80::1%eth1", asn: 65001}, {address: "fe80::1%eth1", asn: 65002}]`))
	if _, err := Resolve(nil, dup, nil, Overrides{}); err == nil || !strings.Contains(err.Error(), "duplicate peer address fe80::1%eth1") {
		t.Errorf("the same link-local address twice on one link: %v", err)
	}
}

func TestResolveNodeSelector(t *testing.T) {
	const y = `
peers:
  - {address: 198.18.1.1, asn: 65001, nodeSelector: {rack: r1}}
  - {address: 198.18.2.1, asn: 65002, nodeSelector: {rack: r2}}
  - {address: 198.18.3.1, asn: 65003, nodeSelector: {rack: r1, zone: a}}
  - {address: 198.18.4.1, asn: 65004}
  - {address: 198.18.5.1, asn: 65005, nodeSelector: {}}
  - {address: 198.18.6.1, asn: 65006, nodeSelector: {gpu: ""}}
  - {address: 198.18.7.1, asn: 65007, nodeSelector: {tier: "1"}}
`
	for _, tc := range []struct {
		name  string
		node  *corev1.Node
		peers []string
	}{
		{"rack r1", mkNode("n", internal("10.0.0.1"), labels("rack", "r1")), []string{"198.18.1.1", "198.18.4.1", "198.18.5.1"}},
		{"rack r2", mkNode("n", internal("10.0.0.1"), labels("rack", "r2")), []string{"198.18.2.1", "198.18.4.1", "198.18.5.1"}},
		{"rack r1 zone a", mkNode("n", internal("10.0.0.1"), labels("rack", "r1", "zone", "a")), []string{"198.18.1.1", "198.18.3.1", "198.18.4.1", "198.18.5.1"}},
		{"rack r1 zone b", mkNode("n", internal("10.0.0.1"), labels("rack", "r1", "zone", "b")), []string{"198.18.1.1", "198.18.4.1", "198.18.5.1"}},
		{"no labels", mkNode("n", internal("10.0.0.1")), []string{"198.18.4.1", "198.18.5.1"}},
		{"empty value needs the label", mkNode("n", internal("10.0.0.1"), labels("gpu", "")), []string{"198.18.4.1", "198.18.5.1", "198.18.6.1"}},
		{"quoted number selector", mkNode("n", internal("10.0.0.1"), labels("tier", "1")), []string{"198.18.4.1", "198.18.5.1", "198.18.7.1"}},
		{"case-sensitive values", mkNode("n", internal("10.0.0.1"), labels("rack", "R1")), []string{"198.18.4.1", "198.18.5.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustResolve(t, cm(y), tc.node, nil, Overrides{})
			var got []string
			for _, p := range cfg.Peers {
				got = append(got, p.Address.String())
			}
			if !reflect.DeepEqual(got, tc.peers) {
				t.Errorf("peers %v, want %v", got, tc.peers)
			}
		})
	}
}

func TestResolveSelfPeerDropped(t *testing.T) {
	const y = `
peers:
  - {address: 10.0.0.1, asn: 64512, passwordSecret: {name: s, key: self}}
  - {address: "::ffff:192.0.2.1", asn: 64512}
  - {address: "fd00::1", asn: 64512}
  - {address: 198.18.0.254, asn: 64512, passwordSecret: {name: s, key: tor}}
`
	n := self(addr(corev1.NodeExternalIP, "192.0.2.1"), internal("fd00::1"), addr(corev1.NodeHostName, "n1"))
	store := &secretStore{data: map[string]string{"s/tor": "pw"}}
	cfg := mustResolve(t, cm(y), n, store.get, Overrides{})
	p := tor("198.18.0.254", 64512)
	p.Password = "pw"
	want := defaults()
	want.Peers = []Peer{p}
	want.IPv6 = ip("fd00::1") // the node's IPv6 InternalIP: its IPv6 routes' next hop
	assertConfig(t, cfg, want)
	if !reflect.DeepEqual(store.calls, []string{"s/tor"}) {
		t.Errorf("secret lookups %v, want only [s/tor] (the self peer's secret must not be read)", store.calls)
	}
	// Annotation and flag peers too.
	cfg = mustResolve(t, nil, self(ann(AnnotationPeers, `[{address: 10.0.0.1, asn: 1}]`)), nil, Overrides{})
	assertConfig(t, cfg, defaults())
	cfg = mustResolve(t, nil, self(), nil, Overrides{Peers: []Peer{{Address: ip("10.0.0.1"), ASN: 1}}})
	assertConfig(t, cfg, defaults())
}

func TestResolveDuplicateAcrossSelectorsAllowed(t *testing.T) {
	// One gateway address per rack, each rack's ToR in its own AS: only one applies per node.
	const y = `
peers:
  - {address: 198.18.0.1, asn: 65001, nodeSelector: {rack: r1}}
  - {address: 198.18.0.1, asn: 65002, nodeSelector: {rack: r2}}
`
	for rack, asn := range map[string]uint32{"r1": 65001, "r2": 65002} {
		cfg := mustResolve(t, cm(y), mkNode("n", internal("10.0.0.1"), labels("rack", rack)), nil, Overrides{})
		want := defaults()
		want.Peers = []Peer{tor("198.18.0.1", asn)}
		assertConfig(t, cfg, want)
	}
}

func TestResolveSecrets(t *testing.T) {
	const y = `
peers:
  - {address: 198.18.0.1, asn: 65001, passwordSecret: {name: a, key: k1}}
  - {address: 198.18.0.2, asn: 65002, passwordSecret: {name: b, key: k2}, nodeSelector: {rack: r9}}
  - {address: 198.18.0.3, asn: 65003}
  - {address: 198.18.0.4, asn: 65004, passwordSecret: {name: a, key: "5"}}
`
	t.Run("looked up for surviving peers only", func(t *testing.T) {
		store := &secretStore{data: map[string]string{"a/k1": "one", "b/k2": "two", "a/5": strings.Repeat("x", 80)}}
		cfg := mustResolve(t, cm(y), self(), store.get, Overrides{})
		if want := []string{"a/k1", "a/5"}; !reflect.DeepEqual(store.calls, want) {
			t.Errorf("secret lookups %v, want %v", store.calls, want)
		}
		var pws []string
		for _, p := range cfg.Peers {
			pws = append(pws, p.Address.String()+"="+p.Password)
		}
		if want := []string{"198.18.0.1=one", "198.18.0.3=", "198.18.0.4=" + strings.Repeat("x", 80)}; !reflect.DeepEqual(pws, want) {
			t.Errorf("passwords %v, want %v", pws, want)
		}
	})
	t.Run("lookup error is wrapped with the peer", func(t *testing.T) {
		notFound := errors.New(`secrets "a" not found`)
		_, err := Resolve(cm(y), self(), (&secretStore{err: notFound}).get, Overrides{})
		if !errors.Is(err, notFound) {
			t.Fatalf("error %v does not wrap the lookup error", err)
		}
		want := `configmap kube-system/skiff-bgp: config.yaml: peer 198.18.0.1 (peers[0]): password secret kube-system/a key "k1": secrets "a" not found`
		if err.Error() != want {
			t.Errorf("error\n got: %s\nwant: %s", err, want)
		}
	})
	t.Run("annotation peer lookup error", func(t *testing.T) {
		store := &secretStore{data: map[string]string{}}
		_, err := Resolve(nil, self(ann(AnnotationPeers, `[{address: 198.18.0.7, asn: 1, passwordSecret: {name: x, key: "y"}}]`)), store.get, Overrides{})
		want := `node "n1": annotation bgp.skiff.sh/peers: peer 198.18.0.7 ([0]): password secret kube-system/x key "y": secret x has no key "y"`
		if err == nil || err.Error() != want {
			t.Errorf("error\n got: %v\nwant: %s", err, want)
		}
	})
	for _, tc := range []struct {
		name  string
		store func(string, string) (string, error)
		want  string
	}{
		{"no lookup function", nil, `configmap kube-system/skiff-bgp: config.yaml: peer 198.18.0.1 (peers[0]): password secret kube-system/a key "k1": no secret lookup available`},
		{"empty password", (&secretStore{data: map[string]string{"a/k1": ""}}).get, `configmap kube-system/skiff-bgp: config.yaml: peer 198.18.0.1 (peers[0]): password secret kube-system/a key "k1": empty password`},
		{"password too long", (&secretStore{data: map[string]string{"a/k1": strings.Repeat("x", 81)}}).get, `configmap kube-system/skiff-bgp: config.yaml: peer 198.18.0.1 (peers[0]): password secret kube-system/a key "k1": password is 81 bytes, longer than the 80 a TCP MD5 key may have`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(cm(y), self(), tc.store, Overrides{})
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), strings.Repeat("x", 81)) {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}

func TestResolveRouterID(t *testing.T) {
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want string
		err  string
	}{
		{"single", mkNode("n", internal("10.0.0.5")), "10.0.0.5", ""},
		{"first of several", mkNode("n", internal("10.0.0.5"), internal("10.0.0.6")), "10.0.0.5", ""},
		{"IPv4 preferred over earlier IPv6", mkNode("n", internal("fd00::5"), internal("10.0.0.5")), "10.0.0.5", ""},
		{"IPv6 only: derived from the IPv6 address", mkNode("n", internal("fd00::5"), internal("fd00::6")), DerivedRouterID(ip("fd00::5")).String(), ""},
		{"ExternalIP and Hostname ignored", mkNode("n", addr(corev1.NodeExternalIP, "192.0.2.9"), addr(corev1.NodeHostName, "10.9.9.9"), internal("10.0.0.5")), "10.0.0.5", ""},
		{"mapped IPv4 unmapped", mkNode("n", internal("::ffff:10.0.0.5")), "10.0.0.5", ""},
		{"unparseable skipped", mkNode("n", internal("not-an-ip"), internal("10.0.0.5")), "10.0.0.5", ""},
		{"no addresses", mkNode("n"), "", `node "n": no InternalIP address in status.addresses (BGP speaks from the node's InternalIP)`},
		{"only ExternalIP", mkNode("n", addr(corev1.NodeExternalIP, "192.0.2.9")), "", `node "n": no InternalIP address in status.addresses (BGP speaks from the node's InternalIP)`},
		{"only bad InternalIPs", mkNode("n", internal("10.0.0"), internal("0.0.0.0")), "", `node "n": no usable InternalIP address in status.addresses: "10.0.0" is not a valid IP address; "0.0.0.0" is the unspecified address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Resolve(nil, tc.node, nil, Overrides{})
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error\n got: %v\nwant: %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.RouterID != ip(tc.want) {
				t.Errorf("router id %s, want %s", cfg.RouterID, tc.want)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	const src = "configmap kube-system/skiff-bgp: config.yaml: "
	peer := func(fields string) string { return "peers:\n- {address: 198.18.0.1, asn: 65001, " + fields + "}" }
	for _, tc := range []struct {
		name  string
		cm    *corev1.ConfigMap
		node  *corev1.Node
		flags Overrides
		want  string
	}{
		// The ConfigMap itself.
		{name: "missing key", cm: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "skiff-bgp"}, Data: map[string]string{"config.yml": "asn: 1"}},
			want: `configmap kube-system/skiff-bgp: missing data key "config.yaml" (data keys: ["config.yml"])`},
		{name: "no data", cm: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "skiff-bgp"}},
			want: `configmap kube-system/skiff-bgp: missing data key "config.yaml" (data keys: [])`},
		{name: "key in binaryData", cm: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "skiff-bgp"}, BinaryData: map[string][]byte{"config.yaml": nil}},
			want: `configmap kube-system/skiff-bgp: key "config.yaml" must be under data, not binaryData`},
		{name: "malformed yaml", cm: cm("asn: 1\n  nodeMesh: true"), want: src + "invalid YAML: yaml: line 2: mapping values are not allowed in this context"},
		{name: "unclosed flow", cm: cm("peers: [{address: 1.2.3.4"), want: src + "invalid YAML: yaml: line 1: did not find expected ',' or '}'"},
		{name: "tab indentation", cm: cm("peers:\n\t- address: 1.2.3.4"), want: src + "invalid YAML: yaml: line 2: found character that cannot start any token"},
		{name: "document is a list", cm: cm("- asn: 1"), want: src + "must be a mapping, got a list"},
		{name: "document is a string", cm: cm("asn"), want: src + "must be a mapping, got a string"},
		{name: "duplicate key", cm: cm("asn: 1\nasn: 2"), want: src + `yaml: unmarshal errors: line 2: key "asn" already set in map`},

		// Unknown fields.
		{name: "unknown top-level field", cm: cm("asn: 1\nasnn: 2"), want: src + `unknown field "asnn" (known fields: asn, bfd, gracefulRestart, listenPort, loadBalancerPools, nodeMesh, peers)`},
		{name: "wrong case", cm: cm("ASN: 1"), want: src + `unknown field "ASN" (did you mean "asn"? field names are case-sensitive)`},
		{name: "unknown peer field", cm: cm(peer("password: x")), want: src + `peers[0]: unknown field "password" (known fields: address, asn, ebgpMultihop, holdTime, keepaliveTime, nodeSelector, passwordSecret)`},
		{name: "unknown peer field in second peer", cm: cm("peers:\n- {address: 198.18.0.1, asn: 1}\n- {address: 198.18.0.2, asn: 1, holdtime: 9s}"),
			want: src + `peers[1]: unknown field "holdtime" (did you mean "holdTime"? field names are case-sensitive)`},
		{name: "unknown passwordSecret field", cm: cm(peer("passwordSecret: {name: s, nme: k}")), want: src + `peers[0].passwordSecret: unknown field "nme" (known fields: key, name)`},
		{name: "unknown gracefulRestart field", cm: cm("gracefulRestart: {enabled: true, time: 1s}"), want: src + `gracefulRestart: unknown field "time" (known fields: enabled, restartTime)`},

		// Types.
		{name: "asn string", cm: cm(`asn: "64512"`), want: src + `asn: must be an integer AS number, got "64512"`},
		{name: "asn fraction", cm: cm(`asn: 1.5`), want: src + `asn: must be an integer AS number, got 1.5`},
		{name: "asn list", cm: cm(`asn: [1]`), want: src + `asn: must be an integer, got a list`},
		{name: "nodeMesh string", cm: cm(`nodeMesh: "true"`), want: src + `nodeMesh: must be a boolean (true or false), got a string`},
		{name: "nodeMesh number", cm: cm(`nodeMesh: 1`), want: src + `nodeMesh: must be a boolean (true or false), got a number`},
		{name: "listenPort string", cm: cm(`listenPort: "179"`), want: src + `listenPort: must be an integer, got "179"`},
		{name: "peers mapping", cm: cm(`peers: {address: 1.2.3.4}`), want: src + `peers: must be a list of peers, got a mapping`},
		{name: "peers string", cm: cm(`peers: 1.2.3.4`), want: src + `peers: must be a list of peers, got a string`},
		{name: "peer null", cm: cm("peers:\n-\n"), want: src + `peers[0]: must be a mapping, got null`},
		{name: "peer string", cm: cm("peers: [198.18.0.1]"), want: src + `peers[0]: must be a mapping, got a string`},
		{name: "address number", cm: cm("peers: [{address: 1, asn: 1}]"), want: src + `peers[0].address: must be an IP address string, got a number`},
		{name: "passwordSecret string", cm: cm(peer("passwordSecret: tor")), want: src + `peers[0].passwordSecret: must be a mapping, got a string`},
		{name: "nodeSelector list", cm: cm(peer("nodeSelector: [rack]")), want: src + `peers[0].nodeSelector: must be a mapping of label keys to values, got a list`},
		{name: "nodeSelector null value", cm: cm(peer("nodeSelector: {rack: ~}")), want: src + `peers[0].nodeSelector.rack: must be a string, got null`},
		{name: "nodeSelector number", cm: cm(peer("nodeSelector: {tier: 1}")), want: src + `peers[0].nodeSelector.tier: must be a string, got a number (quote it)`},
		{name: "nodeSelector boolean", cm: cm(peer("nodeSelector: {bgp: yes}")), want: src + `peers[0].nodeSelector.bgp: must be a string, got a boolean (quote it: YAML reads y, n, yes, no, on, off, true, false as booleans)`},
		{name: "passwordSecret key y", cm: cm(peer("passwordSecret: {name: s, key: y}")), want: src + `peers[0].passwordSecret.key: must be a string, got a boolean (quote it: YAML reads y, n, yes, no, on, off, true, false as booleans)`},
		{name: "passwordSecret name number", cm: cm(peer("passwordSecret: {name: 5, key: k}")), want: src + `peers[0].passwordSecret.name: must be a string, got a number (quote it)`},
		{name: "passwordSecret name list", cm: cm(peer("passwordSecret: {name: [a], key: k}")), want: src + `peers[0].passwordSecret.name: must be a string, got a list`},
		{name: "nodeSelector nested", cm: cm(peer("nodeSelector: {rack: {a: b}}")), want: src + `peers[0].nodeSelector.rack: must be a string, got a mapping`},
		{name: "gracefulRestart bool", cm: cm("gracefulRestart: true"), want: src + `gracefulRestart: must be a mapping, got a boolean`},
		{name: "gracefulRestart enabled string", cm: cm(`gracefulRestart: {enabled: "yes"}`), want: src + `gracefulRestart.enabled: must be a boolean (true or false), got a string`},
		{name: "holdTime bool", cm: cm(peer("holdTime: true")), want: src + `peers[0].holdTime: must be a duration (e.g. "9s") or a number of seconds, got a boolean`},

		// Values.
		{name: "asn 0", cm: cm("asn: 0"), want: src + `asn: AS 0 is reserved (RFC 7607) and cannot be used`},
		{name: "asn 23456", cm: cm("asn: 23456"), want: src + `asn: AS 23456 is reserved as AS_TRANS (RFC 6793) and cannot be used`},
		{name: "asn too large", cm: cm("asn: 4294967296"), want: src + `asn: 4294967296 is out of range: must be between 1 and 4294967295`},
		{name: "asn huge", cm: cm("asn: 99999999999999999999999"), want: src + `asn: 1e+23 is out of range: must be between 1 and 4294967295`},
		{name: "asn beyond int64", cm: cm("asn: 18446744073709551615"), want: src + `asn: 18446744073709551615 is out of range: must be between 1 and 4294967295`},
		{name: "asn long string", cm: cm("asn: " + strings.Repeat("9", 50) + "x"), want: src + `asn: must be an integer AS number, got "999999999999999999999999999999999999999...`},
		{name: "asn negative", cm: cm("asn: -1"), want: src + `asn: -1 is out of range: must be between 1 and 4294967295`},
		{name: "listenPort 0", cm: cm("listenPort: 0"), want: src + `listenPort: 0 is out of range: must be between 1 and 65535`},
		{name: "listenPort 65536", cm: cm("listenPort: 65536"), want: src + `listenPort: 65536 is out of range: must be between 1 and 65535`},
		{name: "listenPort fraction", cm: cm("listenPort: 17.9"), want: src + `listenPort: must be an integer, got 17.9`},
		{name: "restartTime 0", cm: cm("gracefulRestart: {restartTime: 0s}"), want: src + `gracefulRestart.restartTime: 0s is out of range: must be between 1s and 4095s (RFC 4724)`},
		{name: "restartTime 4096s", cm: cm("gracefulRestart: {restartTime: 4096s}"), want: src + `gracefulRestart.restartTime: 1h8m16s is out of range: must be between 1s and 4095s (RFC 4724)`},
		{name: "restartTime 500ms", cm: cm("gracefulRestart: {restartTime: 500ms}"), want: src + `gracefulRestart.restartTime: 500ms is out of range: must be between 1s and 4095s (RFC 4724)`},
		{name: "restartTime fractional", cm: cm("gracefulRestart: {restartTime: 1.5s}"), want: src + `gracefulRestart.restartTime: 1.5s is not a whole number of seconds`},
		{name: "restartTime bad duration", cm: cm("gracefulRestart: {restartTime: 2 minutes}"), want: src + `gracefulRestart.restartTime: "2 minutes" is not a duration (e.g. "9s", "1m30s")`},
		{name: "restartTime negative", cm: cm("gracefulRestart: {restartTime: -5s}"), want: src + `gracefulRestart.restartTime: -5s is negative`},
		{name: "restartTime checked when disabled", cm: cm("gracefulRestart: {enabled: false, restartTime: 5000s}"), want: src + `gracefulRestart.restartTime: 1h23m20s is out of range: must be between 1s and 4095s (RFC 4724)`},

		// Peers.
		{name: "address missing", cm: cm("peers: [{asn: 1}]"), want: src + `peers[0].address: required`},
		{name: "address null", cm: cm("peers: [{address: ~, asn: 1}]"), want: src + `peers[0].address: required`},
		{name: "address bad", cm: cm("peers: [{address: 198.18.0, asn: 1}]"), want: src + `peers[0].address: "198.18.0" is not a valid IP address`},
		{name: "address cidr", cm: cm("peers: [{address: 198.18.0.1/32, asn: 1}]"), want: src + `peers[0].address: "198.18.0.1/32" is not a valid IP address`},
		{name: "address hostname", cm: cm("peers: [{address: tor1.example.com, asn: 1}]"), want: src + `peers[0].address: "tor1.example.com" is not a valid IP address`},
		{name: "address empty", cm: cm(`peers: [{address: "", asn: 1}]`), want: src + `peers[0].address: "" is not a valid IP address`},
		{name: "address unspecified", cm: cm("peers: [{address: 0.0.0.0, asn: 1}]"), want: src + `peers[0].address: "0.0.0.0" is the unspecified address`},
		{name: "address unspecified v6", cm: cm(`peers: [{address: "::", asn: 1}]`), want: src + `peers[0].address: "::" is the unspecified address`},
		{name: "address multicast", cm: cm("peers: [{address: 224.0.0.5, asn: 1}]"), want: src + `peers[0].address: "224.0.0.5" is a multicast address`},
		{name: "address broadcast", cm: cm("peers: [{address: 255.255.255.255, asn: 1}]"), want: src + `peers[0].address: "255.255.255.255" is the broadcast address`},
		{name: "address zone", cm: cm(`peers: [{address: "2001:db8::1%eth0", asn: 1}]`), want: src + `peers[0].address: "2001:db8::1%eth0": IPv6 zones are not supported`},
		{name: "link-local without interface", cm: cm(`peers: [{address: "fe80::1", asn: 1}]`), want: src + `peers[0].address: "fe80::1" is a link-local address: name the interface its router is on, as in fe80::1%eth1`},
		{name: "link-local numeric zone", cm: cm(`peers: [{address: "fe80::1%2", asn: 1}]`), want: src + `peers[0].address: "fe80::1%2": "2" is not an interface name (1 to 15 bytes, no '/', ':' or whitespace)`},
		{name: "link-local long zone", cm: cm(`peers: [{address: "fe80::1%averyveryverylongname", asn: 1}]`), want: src + `peers[0].address: "fe80::1%averyveryverylongname": "averyveryverylongname" is not an interface name (1 to 15 bytes, no '/', ':' or whitespace)`},
		{name: "peer asn missing", cm: cm("peers: [{address: 198.18.0.1}]"), want: src + `peers[0].asn: required`},
		{name: "peer duplicate key", cm: cm(peer("asn: 0")), want: src + `yaml: unmarshal errors: line 2: key "asn" already set in map`},
		{name: "peer asn 0", cm: cm("peers: [{address: 198.18.0.1, asn: 0}]"), want: src + `peers[0].asn: AS 0 is reserved (RFC 7607) and cannot be used`},
		{name: "peer asn 23456", cm: cm("peers: [{address: 198.18.0.1, asn: 23456}]"), want: src + `peers[0].asn: AS 23456 is reserved as AS_TRANS (RFC 6793) and cannot be used`},
		{name: "peer asn out of range", cm: cm("peers: [{address: 198.18.0.1, asn: 4294967296}]"), want: src + `peers[0].asn: 4294967296 is out of range: must be between 1 and 4294967295`},
		{name: "holdTime 1s", cm: cm(peer("holdTime: 1s")), want: src + `peers[0].holdTime: 1s is invalid: must be 0 (no hold timer) or between 3s and 65535s (RFC 4271)`},
		{name: "holdTime 2s", cm: cm(peer("holdTime: 2s")), want: src + `peers[0].holdTime: 2s is invalid: must be 0 (no hold timer) or between 3s and 65535s (RFC 4271)`},
		{name: "holdTime 2 seconds as number", cm: cm(peer("holdTime: 2")), want: src + `peers[0].holdTime: 2s is invalid: must be 0 (no hold timer) or between 3s and 65535s (RFC 4271)`},
		{name: "holdTime 65536s", cm: cm(peer("holdTime: 65536s")), want: src + `peers[0].holdTime: 18h12m16s is invalid: must be 0 (no hold timer) or between 3s and 65535s (RFC 4271)`},
		{name: "holdTime fractional", cm: cm(peer("holdTime: 9.5s")), want: src + `peers[0].holdTime: 9.5s is not a whole number of seconds`},
		{name: "holdTime fractional number", cm: cm(peer("holdTime: 9.5")), want: src + `peers[0].holdTime: 9.5 is not a whole number of seconds`},
		{name: "holdTime negative", cm: cm(peer("holdTime: -9s")), want: src + `peers[0].holdTime: -9s is negative`},
		{name: "holdTime negative number", cm: cm(peer("holdTime: -9")), want: src + `peers[0].holdTime: -9s is negative`},
		{name: "holdTime no unit", cm: cm(peer(`holdTime: "9"`)), want: src + `peers[0].holdTime: "9" is not a duration (e.g. "9s", "1m30s")`},
		{name: "holdTime huge number", cm: cm(peer("holdTime: 99999999999999")), want: src + `peers[0].holdTime: 99999999999999 seconds is out of range`},
		{name: "keepalive greater than hold", cm: cm(peer("holdTime: 9s, keepaliveTime: 10s")), want: src + `peers[0].keepaliveTime: 10s must be less than holdTime 9s`},
		{name: "keepalive equal to hold", cm: cm(peer("holdTime: 9s, keepaliveTime: 9s")), want: src + `peers[0].keepaliveTime: 9s must be less than holdTime 9s`},
		{name: "keepalive greater than default hold", cm: cm(peer("keepaliveTime: 91s")), want: src + `peers[0].keepaliveTime: 1m31s must be less than holdTime 1m30s`},
		{name: "keepalive bool", cm: cm(peer("keepaliveTime: off")), want: src + `peers[0].keepaliveTime: must be a duration (e.g. "9s") or a number of seconds, got a boolean`},
		{name: "keepalive with hold 0", cm: cm(peer("holdTime: 0, keepaliveTime: 3s")), want: src + `peers[0].keepaliveTime: 3s is invalid: must be 0 when holdTime is 0 (no keepalives are sent)`},
		{name: "keepalive 0 with hold", cm: cm(peer("holdTime: 9s, keepaliveTime: 0s")), want: src + `peers[0].keepaliveTime: 0s is invalid: must be at least 1s`},
		{name: "keepalive sub-second", cm: cm(peer("keepaliveTime: 500ms")), want: src + `peers[0].keepaliveTime: 500ms is invalid: must be at least 1s`},
		{name: "keepalive fractional", cm: cm(peer("keepaliveTime: 1500ms")), want: src + `peers[0].keepaliveTime: 1.5s is not a whole number of seconds`},
		{name: "multihop 0", cm: cm(peer("ebgpMultihop: 0")), want: src + `peers[0].ebgpMultihop: 0 is out of range: must be between 1 and 255`},
		{name: "multihop 256", cm: cm(peer("ebgpMultihop: 256")), want: src + `peers[0].ebgpMultihop: 256 is out of range: must be between 1 and 255`},
		{name: "multihop negative", cm: cm(peer("ebgpMultihop: -1")), want: src + `peers[0].ebgpMultihop: -1 is out of range: must be between 1 and 255`},
		{name: "multihop string", cm: cm(peer("ebgpMultihop: two")), want: src + `peers[0].ebgpMultihop: must be an integer, got "two"`},
		{name: "passwordSecret without key", cm: cm(peer("passwordSecret: {name: s}")), want: src + `peers[0].passwordSecret.key: required`},
		{name: "passwordSecret without name", cm: cm(peer("passwordSecret: {key: k}")), want: src + `peers[0].passwordSecret.name: required`},
		{name: "passwordSecret empty", cm: cm(peer("passwordSecret: {}")), want: src + `peers[0].passwordSecret.name: required`},
		{name: "duplicate address", cm: cm("peers:\n- {address: 198.18.0.1, asn: 1}\n- {address: 198.18.0.2, asn: 1}\n- {address: 198.18.0.1, asn: 2}"),
			want: src + `peers[2]: duplicate peer address 198.18.0.1 (also peers[0])`},
		{name: "duplicate address mapped", cm: cm("peers:\n- {address: 198.18.0.1, asn: 1}\n- {address: \"::ffff:198.18.0.1\", asn: 1}"),
			want: src + `peers[1]: duplicate peer address 198.18.0.1 (also peers[0])`},
		{name: "duplicate address v6 spelling", cm: cm("peers:\n- {address: \"2001:db8::1\", asn: 1}\n- {address: \"2001:DB8:0::0:1\", asn: 1}"),
			want: src + `peers[1]: duplicate peer address 2001:db8::1 (also peers[0])`},
		{name: "duplicate self address", cm: cm("peers:\n- {address: 10.0.0.1, asn: 1}\n- {address: 10.0.0.1, asn: 1}"),
			want: src + `peers[1]: duplicate peer address 10.0.0.1 (also peers[0])`},
		{name: "peer checked even when not selected", cm: cm("peers:\n- {address: 198.18.0.1, asn: 1, nodeSelector: {rack: r9}, holdTime: 1s}"),
			want: src + `peers[0].holdTime: 1s is invalid: must be 0 (no hold timer) or between 3s and 65535s (RFC 4271)`},
		{name: "configmap checked even when overridden", cm: cm("asn: 0"), flags: Overrides{ASN: u32(1), Peers: []Peer{}, NodeMesh: boolp(true)},
			want: src + `asn: AS 0 is reserved (RFC 7607) and cannot be used`},

		// Annotations.
		{name: "annotation asn 0", node: self(ann(AnnotationASN, "0")), want: `node "n1": annotation bgp.skiff.sh/asn: AS 0 is reserved (RFC 7607) and cannot be used`},
		{name: "annotation asn 23456", node: self(ann(AnnotationASN, "23456")), want: `node "n1": annotation bgp.skiff.sh/asn: AS 23456 is reserved as AS_TRANS (RFC 6793) and cannot be used`},
		{name: "annotation asn too large", node: self(ann(AnnotationASN, "4294967296")), want: `node "n1": annotation bgp.skiff.sh/asn: 4294967296 is out of range: must be between 1 and 4294967295`},
		{name: "annotation asn huge", node: self(ann(AnnotationASN, "99999999999999999999")), want: `node "n1": annotation bgp.skiff.sh/asn: "99999999999999999999" is out of range: must be between 1 and 4294967295`},
		{name: "annotation asn negative", node: self(ann(AnnotationASN, "-1")), want: `node "n1": annotation bgp.skiff.sh/asn: "-1" is not a decimal AS number`},
		{name: "annotation asn empty", node: self(ann(AnnotationASN, "")), want: `node "n1": annotation bgp.skiff.sh/asn: "" is not a decimal AS number`},
		{name: "annotation asn spaces", node: self(ann(AnnotationASN, " 64512")), want: `node "n1": annotation bgp.skiff.sh/asn: " 64512" is not a decimal AS number`},
		{name: "annotation asn asdot", node: self(ann(AnnotationASN, "1.10")), want: `node "n1": annotation bgp.skiff.sh/asn: "1.10" is not a decimal AS number`},
		{name: "annotation asn hex", node: self(ann(AnnotationASN, "0xfc00")), want: `node "n1": annotation bgp.skiff.sh/asn: "0xfc00" is not a decimal AS number`},
		{name: "annotation asn checked when flag set", node: self(ann(AnnotationASN, "x")), flags: Overrides{ASN: u32(1)}, want: `node "n1": annotation bgp.skiff.sh/asn: "x" is not a decimal AS number`},
		{name: "annotation mesh yes", node: self(ann(AnnotationNodeMesh, "yes")), want: `node "n1": annotation bgp.skiff.sh/node-mesh: "yes" must be "true" or "false"`},
		{name: "annotation mesh True", node: self(ann(AnnotationNodeMesh, "True")), want: `node "n1": annotation bgp.skiff.sh/node-mesh: "True" must be "true" or "false"`},
		{name: "annotation mesh empty", node: self(ann(AnnotationNodeMesh, "")), want: `node "n1": annotation bgp.skiff.sh/node-mesh: "" must be "true" or "false"`},
		{name: "annotation peers empty", node: self(ann(AnnotationPeers, "")), want: `node "n1": annotation bgp.skiff.sh/peers: empty; use "[]" for no peers`},
		{name: "annotation peers null", node: self(ann(AnnotationPeers, "null")), want: `node "n1": annotation bgp.skiff.sh/peers: must be a list of peers, got null`},
		{name: "annotation peers mapping", node: self(ann(AnnotationPeers, `{"address": "198.18.0.1", "asn": 1}`)), want: `node "n1": annotation bgp.skiff.sh/peers: must be a list of peers, got a mapping`},
		{name: "annotation peers malformed", node: self(ann(AnnotationPeers, `[{"address": "198.18.0.1"`)), want: `node "n1": annotation bgp.skiff.sh/peers: invalid YAML: yaml: line 1: did not find expected ',' or '}'`},
		{name: "annotation peers unknown field", node: self(ann(AnnotationPeers, `[{"address": "198.18.0.1", "asn": 1, "port": 179}]`)),
			want: `node "n1": annotation bgp.skiff.sh/peers: [0]: unknown field "port" (known fields: address, asn, ebgpMultihop, holdTime, keepaliveTime, nodeSelector, passwordSecret)`},
		{name: "annotation peers bad address", node: self(ann(AnnotationPeers, `[{"address": "198.18.0.1", "asn": 1}, {"address": "x", "asn": 1}]`)),
			want: `node "n1": annotation bgp.skiff.sh/peers: [1].address: "x" is not a valid IP address`},
		{name: "annotation peers duplicate", node: self(ann(AnnotationPeers, `[{"address": "198.18.0.1", "asn": 1}, {"address": "198.18.0.1", "asn": 2}]`)),
			want: `node "n1": annotation bgp.skiff.sh/peers: [1]: duplicate peer address 198.18.0.1 (also [0])`},
		{name: "annotation peers checked when flag peers set", node: self(ann(AnnotationPeers, `[{"address": "198.18.0.1"}]`)), flags: Overrides{Peers: []Peer{}},
			want: `node "n1": annotation bgp.skiff.sh/peers: [0].asn: required`},

		// Flags.
		{name: "flag asn 0", flags: Overrides{ASN: u32(0)}, want: `flags: asn: AS 0 is reserved (RFC 7607) and cannot be used`},
		{name: "flag asn 23456", flags: Overrides{ASN: u32(23456)}, want: `flags: asn: AS 23456 is reserved as AS_TRANS (RFC 6793) and cannot be used`},
		{name: "flag peer without address", flags: Overrides{Peers: []Peer{{ASN: 1}}}, want: `flags: peers[0].address: required`},
		{name: "flag peer unspecified", flags: Overrides{Peers: []Peer{{Address: ip("::"), ASN: 1}}}, want: `flags: peers[0].address: "::" is the unspecified address`},
		{name: "flag peer zone", flags: Overrides{Peers: []Peer{{Address: ip("2001:db8::1%eth0"), ASN: 1}}}, want: `flags: peers[0].address: "2001:db8::1%eth0": IPv6 zones are not supported`},
		{name: "flag peer link-local without interface", flags: Overrides{Peers: []Peer{{Address: ip("fe80::1"), ASN: 1}}}, want: `flags: peers[0].address: "fe80::1" is a link-local address: name the interface its router is on, as in fe80::1%eth1`},
		{name: "flag peer asn 0", flags: Overrides{Peers: []Peer{{Address: ip("198.18.0.1")}}}, want: `flags: peers[0]: asn: AS 0 is reserved (RFC 7607) and cannot be used`},
		{name: "flag peer hold 2s", flags: Overrides{Peers: []Peer{{Address: ip("198.18.0.1"), ASN: 1, HoldTime: 2 * time.Second}}},
			want: `flags: peers[0]: holdTime: 2s is invalid: must be 0 (no hold timer) or between 3s and 65535s (RFC 4271)`},
		{name: "flag peer keepalive too long", flags: Overrides{Peers: []Peer{{Address: ip("198.18.0.1"), ASN: 1, HoldTime: 9 * time.Second, KeepaliveTime: 9 * time.Second}}},
			want: `flags: peers[0]: keepaliveTime: 9s must be less than holdTime 9s`},
		{name: "flag peer negative keepalive", flags: Overrides{Peers: []Peer{{Address: ip("198.18.0.1"), ASN: 1, KeepaliveTime: -time.Second}}},
			want: `flags: peers[0]: keepaliveTime: -1s is invalid: must be at least 1s`},
		{name: "flag peer password too long", flags: Overrides{Peers: []Peer{{Address: ip("198.18.0.1"), ASN: 1, Password: strings.Repeat("p", 81)}}},
			want: `flags: peers[0]: password: 81 bytes is too long: TCP MD5 keys are at most 80 bytes`},
		{name: "flag peer duplicate", flags: Overrides{Peers: []Peer{{Address: ip("198.18.0.1"), ASN: 1}, {Address: ip("::ffff:198.18.0.1"), ASN: 2}}},
			want: `flags: peers[1]: duplicate peer address 198.18.0.1 (also peers[0])`},

		// The node.
		{name: "nil node", node: (*corev1.Node)(nil), want: `bgp config: node is nil`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.node
			if n == nil && tc.name != "nil node" {
				n = self()
			}
			cfg, err := Resolve(tc.cm, n, (&secretStore{}).get, tc.flags)
			if err == nil {
				t.Fatalf("no error, config %+v; want %s", cfg, tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tc.want)
			}
			if !reflect.DeepEqual(cfg, Config{}) {
				t.Errorf("config %+v returned with an error, want zero", cfg)
			}
		})
	}
}

func TestMeshPeers(t *testing.T) {
	mesh := func(a string, asn uint32, node string) Peer {
		return Peer{Address: ip(a), ASN: asn, HoldTime: 90 * time.Second, KeepaliveTime: 30 * time.Second, Name: "mesh-" + node}
	}
	me := self()
	cfg := mustResolve(t, nil, me, nil, Overrides{})
	nodes := []*corev1.Node{
		mkNode("n10", internal("10.0.0.10")),
		me,
		mkNode("n2", internal("10.0.0.2")),
		mkNode("n9", internal("10.0.0.9"), addr(corev1.NodeExternalIP, "192.0.2.9")),
		mkNode("gone", internal("10.0.0.3"), deleting()),
		mkNode("unready", addr(corev1.NodeHostName, "unready")),
		mkNode("bad-ip", internal("10.0.0")),
		nil,
		mkNode("v6", internal("fd00::4")),
		mkNode("dual", internal("fd00::5"), internal("10.0.0.5")),
		mkNode("ebgp", internal("10.0.0.6"), ann(AnnotationASN, "65006")),
		mkNode("broken-asn", internal("10.0.0.7"), ann(AnnotationASN, "23456")),
	}
	got := MeshPeers(me, nodes, cfg)
	want := []Peer{
		mesh("10.0.0.2", 64512, "n2"),
		mesh("10.0.0.5", 64512, "dual"),
		mesh("10.0.0.6", 65006, "ebgp"),
		mesh("10.0.0.9", 64512, "n9"),
		mesh("10.0.0.10", 64512, "n10"),
		mesh("fd00::4", 64512, "v6"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mesh peers\n got: %v\nwant: %v", got, want)
	}

	t.Run("mesh off", func(t *testing.T) {
		off := cfg
		off.NodeMesh = false
		if got := MeshPeers(me, nodes, off); got != nil {
			t.Errorf("mesh peers %v with the mesh off, want none", got)
		}
	})
	t.Run("explicit peer wins", func(t *testing.T) {
		c := cfg
		c.Peers = []Peer{tor("10.0.0.2", 65100), tor("fd00::4", 65100)}
		got := MeshPeers(me, nodes, c)
		want := []Peer{mesh("10.0.0.5", 64512, "dual"), mesh("10.0.0.6", 65006, "ebgp"), mesh("10.0.0.9", 64512, "n9"), mesh("10.0.0.10", 64512, "n10")}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("mesh peers\n got: %v\nwant: %v", got, want)
		}
	})
	t.Run("self by address", func(t *testing.T) {
		// Another object at self's address (a stale copy under a new name) is self too.
		me := self(internal("fd00::1"))
		got := MeshPeers(me, []*corev1.Node{mkNode("n1-renamed", internal("10.0.0.1")), mkNode("other", internal("fd00::1"))},
			mustResolve(t, nil, me, nil, Overrides{}))
		if len(got) != 0 {
			t.Errorf("mesh peers %v, want none", got)
		}
		// Without self, cfg.IPv4 still excludes it.
		got = MeshPeers(nil, []*corev1.Node{me, mkNode("n2", internal("10.0.0.2"))}, cfg)
		if want := []Peer{mesh("10.0.0.2", 64512, "n2")}; !reflect.DeepEqual(got, want) {
			t.Errorf("mesh peers\n got: %v\nwant: %v", got, want)
		}
	})
	t.Run("mixed ASN", func(t *testing.T) {
		// This node is in its own AS by annotation; the others are in the cluster AS.
		me := self(ann(AnnotationASN, "65001"))
		c := mustResolve(t, cm("asn: 65000"), me, nil, Overrides{})
		got := MeshPeers(me, []*corev1.Node{
			me,
			mkNode("a", internal("10.0.0.2")),
			mkNode("b", internal("10.0.0.3"), ann(AnnotationASN, "65001")),
			mkNode("c", internal("10.0.0.4"), ann(AnnotationASN, "4200000000")),
		}, c)
		want := []Peer{mesh("10.0.0.2", 65000, "a"), mesh("10.0.0.3", 65001, "b"), mesh("10.0.0.4", 4200000000, "c")}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("mesh peers\n got: %v\nwant: %v", got, want)
		}
		// A flag ASN is assumed on every agent.
		c = mustResolve(t, cm("asn: 65000"), me, nil, Overrides{ASN: u32(65010)})
		got = MeshPeers(me, []*corev1.Node{mkNode("a", internal("10.0.0.2"))}, c)
		if want := []Peer{mesh("10.0.0.2", 65010, "a")}; !reflect.DeepEqual(got, want) {
			t.Errorf("mesh peers\n got: %v\nwant: %v", got, want)
		}
		// A hand-built Config without ClusterASN falls back to ASN.
		got = MeshPeers(me, []*corev1.Node{mkNode("a", internal("10.0.0.2"))}, Config{ASN: 65020, NodeMesh: true, RouterID: ip("10.0.0.1"), IPv4: ip("10.0.0.1")})
		if want := []Peer{mesh("10.0.0.2", 65020, "a")}; !reflect.DeepEqual(got, want) {
			t.Errorf("mesh peers\n got: %v\nwant: %v", got, want)
		}
	})
	t.Run("same address on two nodes", func(t *testing.T) {
		got := MeshPeers(me, []*corev1.Node{mkNode("z", internal("10.0.0.2")), mkNode("a", internal("10.0.0.2"))}, cfg)
		if want := []Peer{mesh("10.0.0.2", 64512, "a")}; !reflect.DeepEqual(got, want) {
			t.Errorf("mesh peers\n got: %v\nwant: %v", got, want)
		}
	})
	t.Run("no nodes", func(t *testing.T) {
		if got := MeshPeers(me, nil, cfg); got != nil {
			t.Errorf("mesh peers %v, want none", got)
		}
		if got := MeshPeers(nil, nil, Config{NodeMesh: true}); got != nil {
			t.Errorf("mesh peers %v, want none", got)
		}
	})
	t.Run("zero config has no default ASN", func(t *testing.T) {
		// Only nodes that name their AS can be peered with.
		got := MeshPeers(nil, []*corev1.Node{mkNode("a", internal("10.0.0.2")), mkNode("b", internal("10.0.0.3"), ann(AnnotationASN, "65003"))}, Config{NodeMesh: true})
		if want := []Peer{mesh("10.0.0.3", 65003, "b")}; !reflect.DeepEqual(got, want) {
			t.Errorf("mesh peers\n got: %v\nwant: %v", got, want)
		}
	})
}

func TestPeerStringRedactsPassword(t *testing.T) {
	p := tor("198.18.0.1", 65001)
	p.Password = "hunter2"
	for _, s := range []string{p.String(), fmt.Sprintf("%v", p), fmt.Sprintf("%+v", p), fmt.Sprintf("%#v", p),
		fmt.Sprintf("%v", Config{Peers: []Peer{p}}), fmt.Sprintf("%+v", []Peer{p})} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("%q shows the password", s)
		}
		if !strings.Contains(s, "198.18.0.1") {
			t.Errorf("%q does not show the address", s)
		}
	}
	want := "{Name:tor-198.18.0.1 Address:198.18.0.1 ASN:65001 Password:<redacted> HoldTime:1m30s KeepaliveTime:30s EBGPMultihop:0}"
	if p.String() != want {
		t.Errorf("String() = %s, want %s", p.String(), want)
	}
}

func TestValidate(t *testing.T) {
	valid := defaults()
	valid.Peers = []Peer{tor("198.18.0.1", 65001)}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"asn 0", func(c *Config) { c.ASN = 0 }, "asn: AS 0 is reserved (RFC 7607) and cannot be used"},
		{"cluster asn AS_TRANS", func(c *Config) { c.ClusterASN = 23456 }, "clusterASN: AS 23456 is reserved as AS_TRANS (RFC 6793) and cannot be used"},
		{"no router id", func(c *Config) { c.RouterID = netip.Addr{} }, "routerID: invalid IP is not a 32-bit identifier (an IPv4 address, not 0.0.0.0)"},
		{"an IPv6 router id", func(c *Config) { c.RouterID = ip("fd00::1") }, "routerID: fd00::1 is not a 32-bit identifier (an IPv4 address, not 0.0.0.0)"},
		{"no address", func(c *Config) { c.IPv4 = netip.Addr{} }, "the node has no usable address (ipv4 invalid IP, ipv6 invalid IP)"},
		{"port 0", func(c *Config) { c.ListenPort = 0 }, "listenPort: 0 is out of range: must be between 1 and 65535"},
		{"restart 0", func(c *Config) { c.GracefulRestart.RestartTime = 0 }, "gracefulRestart.restartTime: 0s is out of range: must be between 1s and 4095s (RFC 4724)"},
		{"peer is the node", func(c *Config) { c.Peers[0].Address = c.IPv4 }, "peers[0]: address 10.0.0.1 is the node's own"},
		{"peer mapped", func(c *Config) { c.Peers[0].Address = ip("::ffff:1.2.3.4") }, "peers[0]: address: ::ffff:1.2.3.4 is not a usable unicast address"},
		{"peer duplicate", func(c *Config) { c.Peers = append(c.Peers, c.Peers[0]) }, "peers[1]: duplicate peer address 198.18.0.1 (also peers[0])"},
		{"peer no name", func(c *Config) { c.Peers[0].Name = "" }, "peers[0]: name: empty"},
		{"peer hold 0 keepalive 30s", func(c *Config) { c.Peers[0].HoldTime = 0 }, "peers[0]: keepaliveTime: 30s is invalid: must be 0 when holdTime is 0 (no keepalives are sent)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults()
			c.Peers = []Peer{tor("198.18.0.1", 65001)}
			tc.modify(&c)
			err := c.Validate()
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

// FuzzResolve feeds arbitrary documents and annotations: Resolve must not panic, and a nil
// error must come with a Config that keeps every invariant (checked here independently of
// Validate).
func FuzzResolve(f *testing.F) {
	f.Add("", "", "", "", uint8(0))
	f.Add("asn: 65000\nnodeMesh: false\nlistenPort: 1790\npeers:\n- {address: 198.18.0.254, asn: 64512, passwordSecret: {name: s, key: k}, holdTime: 9s, keepaliveTime: 3s, ebgpMultihop: 2, nodeSelector: {rack: r1}}\ngracefulRestart: {enabled: true, restartTime: 120s}",
		"65001", `[{"address": "2001:db8::1", "asn": 4200000000, "holdTime": 0}]`, "true", uint8(7))
	f.Add("peers: [{address: 10.0.0.1, asn: 1}, {address: 10.0.0.1, asn: 1}]", "23456", "- address: 1.2.3.4\n  asn: 1", "false", uint8(1))
	f.Add("peers: [{address: '::ffff:1.2.3.4', asn: 1, holdTime: 3, keepaliveTime: 2}]", "4294967295", "[]", "yes", uint8(2))
	f.Add("gracefulRestart: {restartTime: 4095}\nasn: 1e3", "0", "null", "", uint8(3))
	f.Add("{\"asn\": 1, \"peers\": [{\"address\": \"1.2.3.4\", \"asn\": 2, \"holdTime\": \"65535s\", \"keepaliveTime\": 21845}]}", "1", "[{asn: 1, address: fd00::2}]", "", uint8(4))
	f.Add("a: &a [*a]", "", "&x [*x, *x]", "", uint8(5))
	f.Fuzz(func(t *testing.T, doc, asnAnn, peersAnn, meshAnn string, mode uint8) {
		node := mkNode("n1", internal("10.0.0.1"), internal("fd00::1"), labels("rack", "r1"))
		a := map[string]string{}
		if mode&1 != 0 {
			a[AnnotationASN] = asnAnn
		}
		if mode&2 != 0 {
			a[AnnotationPeers] = peersAnn
		}
		if mode&4 != 0 {
			a[AnnotationNodeMesh] = meshAnn
		}
		node.Annotations = a
		var c *corev1.ConfigMap
		if mode&8 == 0 {
			c = cm(doc)
		}
		var flags Overrides
		if mode&16 != 0 {
			flags.ASN = u32(uint32(len(doc)) * 1000)
		}
		secret := func(name, key string) (string, error) {
			if name == "fail" {
				return "", errors.New("lookup failed")
			}
			return name + key, nil
		}
		cfg, err := Resolve(c, node, secret, flags)
		if err != nil {
			if !reflect.DeepEqual(cfg, Config{}) {
				t.Fatalf("non-zero config with error %v", err)
			}
			return
		}
		checkInvariants(t, cfg, node)
		// The mesh of a valid config is well-formed too.
		others := []*corev1.Node{node, mkNode("x", internal("10.0.0.2"), ann(AnnotationASN, asnAnn)), mkNode("y", internal("10.0.0.3"))}
		mp := MeshPeers(node, others, cfg)
		if !cfg.NodeMesh && mp != nil {
			t.Fatalf("mesh peers %v with the mesh off", mp)
		}
		for i, p := range mp {
			if i > 0 && mp[i-1].Address.Compare(p.Address) >= 0 {
				t.Fatalf("mesh peers not sorted or duplicated: %v", mp)
			}
			if p.Address == cfg.IPv4 || p.ASN == 0 || p.ASN == 23456 || p.Name == "" {
				t.Fatalf("bad mesh peer %v", p)
			}
			for _, e := range cfg.Peers {
				if e.Address == p.Address {
					t.Fatalf("mesh peer %v duplicates explicit peer", p)
				}
			}
		}
	})
}

func checkInvariants(t *testing.T, cfg Config, node *corev1.Node) {
	t.Helper()
	goodASN := func(a uint32) bool { return a != 0 && a != 23456 }
	whole := func(d time.Duration) bool { return d%time.Second == 0 }
	if !goodASN(cfg.ASN) || !goodASN(cfg.ClusterASN) {
		t.Fatalf("bad ASN %d / cluster ASN %d", cfg.ASN, cfg.ClusterASN)
	}
	if cfg.RouterID != ip("10.0.0.1") {
		t.Fatalf("router id %v, want 10.0.0.1", cfg.RouterID)
	}
	if cfg.ListenPort < 1 || cfg.ListenPort > 65535 {
		t.Fatalf("listen port %d", cfg.ListenPort)
	}
	if rt := cfg.GracefulRestart.RestartTime; rt < time.Second || rt > 4095*time.Second || !whole(rt) {
		t.Fatalf("restart time %s", rt)
	}
	seen := map[netip.Addr]bool{}
	for _, p := range cfg.Peers {
		a := p.Address
		if !a.IsValid() || a.Is4In6() || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
			t.Fatalf("bad peer address in %v", p)
		}
		if a == ip("10.0.0.1") || a == ip("fd00::1") {
			t.Fatalf("self peer %v", p)
		}
		if seen[a] {
			t.Fatalf("duplicate peer %v", p)
		}
		seen[a] = true
		if !goodASN(p.ASN) {
			t.Fatalf("bad peer ASN in %v", p)
		}
		if h := p.HoldTime; !whole(h) || (h != 0 && (h < 3*time.Second || h > 65535*time.Second)) {
			t.Fatalf("bad hold time in %v", p)
		}
		if k := p.KeepaliveTime; !whole(k) || (p.HoldTime == 0 && k != 0) || (p.HoldTime != 0 && (k < time.Second || k >= p.HoldTime)) {
			t.Fatalf("bad keepalive in %v", p)
		}
		if p.Name == "" || len(p.Password) > 80 {
			t.Fatalf("bad name or password in %v", p)
		}
	}
	if cfg.ASN == 0 || node == nil {
		t.Fatal("unreachable")
	}
}

func TestLoadBalancerPools(t *testing.T) {
	cm := func(yaml string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "skiff-bgp"}, Data: map[string]string{ConfigKey: yaml}}
	}
	got, err := LoadBalancerPools(cm("asn: 64512\nloadBalancerPools:\n- cidr: 198.18.200.0/24\n- {cidr: 10.200.0.0/16}\n- cidr: '2001:2:0:200::/120'\n"))
	if err != nil || len(got) != 3 || got[0].String() != "198.18.200.0/24" || got[1].String() != "10.200.0.0/16" || got[2].String() != "2001:2:0:200::/120" {
		t.Errorf("pools: %v %v", got, err)
	}
	if got, err := LoadBalancerPools(nil); err != nil || got != nil {
		t.Errorf("no ConfigMap: %v %v", got, err)
	}
	for yaml, want := range map[string]string{
		"loadBalancerPools: [{cidr: 198.18.200.7/24}]":       "loadBalancerPools[0].cidr: 198.18.200.7/24 has host bits set: did you mean 198.18.200.0/24?",
		"loadBalancerPools: [{cidr: 10.0.0.0/8}]":            "loadBalancerPools[0].cidr: 10.0.0.0/8: an IPv4 pool may be at most a /16",
		"loadBalancerPools: [{cidr: 'fd00::/48'}]":           "loadBalancerPools[0].cidr: fd00::/48: an IPv6 pool may be at most a /64",
		"loadBalancerPools: [{cidr: '::ffff:10.0.0.0/120'}]": "want an IPv4 CIDR or a plain IPv6 one",
		"loadBalancerPools: [{cidr: 'fd00::1/120'}]":         "fd00::1/120 has host bits set: did you mean fd00::/120?",
		"loadBalancerPools: [{cidr: nope}]":                  `loadBalancerPools[0].cidr: "nope" is not a CIDR`,
		"loadBalancerPools: [{}]":                            "loadBalancerPools[0].cidr: required",
		"loadBalancerPools: [{cidr: 198.18.0.0/24, x: 1}]":   `loadBalancerPools[0]: unknown field "x"`,
		"loadBalancerPools: {cidr: 198.18.0.0/24}":           "loadBalancerPools: must be a list of pools, got a mapping",
	} {
		_, err := LoadBalancerPools(cm(yaml))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", yaml, err, want)
		}
	}
	// The speakers accept a ConfigMap with pools.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.18.0.2"}}}}
	if _, err := Resolve(cm("loadBalancerPools: [{cidr: 198.18.200.0/24}]"), node, nil, Overrides{}); err != nil {
		t.Errorf("Resolve with pools: %v", err)
	}
}

func TestResolveBFD(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       BFD
		err        string
	}{
		{"absent", "asn: 64512\n", BFD{TransmitInterval: 100 * time.Millisecond, Multiplier: 3}, ""},
		{"empty section turns it on", "bfd: {}\n", BFD{Enabled: true, TransmitInterval: 100 * time.Millisecond, Multiplier: 3}, ""},
		{"tuned", "bfd: {transmitInterval: 50ms, multiplier: 5}\n", BFD{Enabled: true, TransmitInterval: 50 * time.Millisecond, Multiplier: 5}, ""},
		{"off", "bfd: {enabled: false}\n", BFD{TransmitInterval: 100 * time.Millisecond, Multiplier: 3}, ""},
		{"too fast", "bfd: {transmitInterval: 5ms}\n", BFD{}, "bfd.transmitInterval: 5ms must be whole milliseconds from 10ms to 1m"},
		{"sub-millisecond", "bfd: {transmitInterval: 10.5ms}\n", BFD{}, "must be whole milliseconds"},
		{"multiplier 0", "bfd: {multiplier: 0}\n", BFD{}, "bfd.multiplier"},
		{"unknown field", "bfd: {interval: 1s}\n", BFD{}, `bfd: unknown field "interval"`},
	} {
		got, err := Resolve(cm(tc.yaml), self(), nil, Overrides{})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got.BFD != tc.want {
			t.Errorf("%s: BFD %+v, want %+v", tc.name, got.BFD, tc.want)
		}
	}
}
