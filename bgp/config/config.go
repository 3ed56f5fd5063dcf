// Package config resolves a node's BGP configuration: which AS the node's embedded GoBGP
// speaker runs as, with which router id and port, and which routers it peers with. It does
// no I/O: the caller hands in the ConfigMap, the Node, a way to read Secrets and the agent's
// flags, and gets back a validated Config (or a precise error).
//
// # Model
//
// Every node runs a BGP speaker that advertises its pod CIDR. Speakers peer with
//
//   - each other, when the node mesh is on (the default, as in Calico's node-to-node mesh):
//     one session per other node, to its InternalIP, computed by MeshPeers from the Node
//     list. Nodes normally share one AS, making the mesh iBGP; a node whose AS differs (its
//     bgp.skiff.sh/asn annotation) is reached over eBGP instead;
//   - explicit peers, typically the top-of-rack routers, listed in the configuration. A peer
//     with a nodeSelector only applies to nodes whose labels carry every listed pair, so one
//     list can give each rack its own ToR (as Calico's BGPPeer nodeSelector or Cilium's
//     per-node peering policies). Turn the mesh off when every node peers with its ToRs
//     (route reflection or eBGP fabric), as with Calico's nodeToNodeMeshEnabled: false.
//
// # Sources and precedence
//
// Settings come from four places; a setting given in a higher one replaces the lower ones:
//
//  1. agent flags (Overrides): ASN, Peers (a non-nil list replaces the peer list), NodeMesh;
//  2. Node annotations: bgp.skiff.sh/asn (decimal AS number), bgp.skiff.sh/peers (a YAML or
//     JSON list of peers in the ConfigMap's format, replacing the cluster list for this
//     node; "[]" means no explicit peers) and bgp.skiff.sh/node-mesh ("true" or "false");
//  3. the ConfigMap kube-system/skiff-bgp, key config.yaml (cluster-wide);
//  4. built-in defaults: AS 64512, node mesh on, port 179, no peers, graceful restart on
//     with a 120 s restart time, hold time 90 s, keepalive a third of the hold time.
//
// A missing ConfigMap (nil) means all defaults; a ConfigMap without the config.yaml key is
// an error (the key is probably misspelt). listenPort and gracefulRestart are only set in the
// ConfigMap. Peer lists are never merged: the highest source that gives one wins whole.
// Everything that is given is validated, even when a higher source overrides it, so a bad
// value is reported as soon as it is written rather than when the override goes away.
//
// # config.yaml
//
//	asn: 64512                 # local AS of every node; 1..4294967295 except 23456 (AS_TRANS)
//	nodeMesh: true             # full mesh among nodes
//	listenPort: 179            # 1..65535
//	peers:
//	  - address: 198.18.0.254  # IPv4 or IPv6, required; a link-local IPv6 one names its interface: fe80::1%eth1
//	    asn: 64512             # required
//	    passwordSecret: {name: bgp-secrets, key: tor}  # TCP MD5 password, kube-system Secret
//	    holdTime: 9s           # 0 (no keepalives) or 3s..65535s, whole seconds; default 90s
//	    keepaliveTime: 3s      # 1s..holdTime-1s, whole seconds; default holdTime/3
//	    ebgpMultihop: 2        # TTL for eBGP sessions to non-adjacent peers, 1..255
//	    nodeSelector: {rack: r1}
//	gracefulRestart: {enabled: true, restartTime: 120s}  # restartTime 1s..4095s
//	bfd: {enabled: true, transmitInterval: 100ms, multiplier: 3}  # BFD beside every session; off when absent
//
// Decoding is strict: unknown fields (including case mismatches such as "ASN"), duplicate
// keys and values of the wrong type are errors naming the field path, e.g.
// "peers[1].passwordSecret: unknown field "nmae"". A null value counts as unset. Durations
// are Go durations ("9s", "1m30s") or a plain integer number of seconds (BGP timers are
// whole seconds). Secret names and keys and nodeSelector values must be strings: YAML 1.1
// reads an unquoted y, no, on or 1 as a boolean or number, so such values must be quoted.
//
// # Peer resolution
//
// For the winning peer list, in order: peers whose nodeSelector does not match the node's
// labels are dropped; two remaining peers with the same address are an error; a peer whose
// address is one of the node's own addresses is dropped (so one list can include nodes
// that act as route reflectors); then the passwords of the remaining peers are read
// through the secret function, which is called for nothing else. Each peer gets a stable
// Name, "tor-<address>" for explicit peers and "mesh-<node name>" for mesh peers. Because
// duplicates are checked after selection, peers in different racks may share an address
// (each rack's gateway) as long as their nodeSelectors never both match.
//
// The router id is the node's first InternalIP address, IPv4 preferred.
package config

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Where the configuration lives and the annotations that override it.
const (
	// ConfigMapNamespace and ConfigMapName locate the cluster-wide configuration.
	ConfigMapNamespace = "kube-system"
	ConfigMapName      = "skiff-bgp"
	// ConfigKey is the ConfigMap data key holding the YAML configuration.
	ConfigKey = "config.yaml"
	// SecretNamespace holds the Secrets that passwordSecret refers to.
	SecretNamespace = "kube-system"

	// AnnotationASN overrides the node's AS number (decimal).
	AnnotationASN = "bgp.skiff.sh/asn"
	// AnnotationPeers replaces the cluster peer list for the node (a YAML/JSON list).
	AnnotationPeers = "bgp.skiff.sh/peers"
	// AnnotationNodeMesh turns the node mesh on or off for the node ("true"/"false").
	AnnotationNodeMesh = "bgp.skiff.sh/node-mesh"
)

// Defaults and limits.
const (
	DefaultASN         uint32 = 64512
	DefaultListenPort  int32  = 179
	DefaultHoldTime           = 90 * time.Second
	DefaultRestartTime        = 120 * time.Second

	// ASTrans is AS 23456, which stands in for 4-byte AS numbers towards 2-byte speakers
	// (RFC 6793) and cannot be a real AS.
	ASTrans uint32 = 23456

	// MinHoldTime and MaxHoldTime bound a non-zero hold time (RFC 4271 section 4.2).
	MinHoldTime = 3 * time.Second
	MaxHoldTime = 65535 * time.Second
	// MinRestartTime and MaxRestartTime bound the graceful-restart time, a 12-bit count of
	// seconds (RFC 4724).
	MinRestartTime = 1 * time.Second
	MaxRestartTime = 4095 * time.Second
	// MaxPasswordLen is the longest TCP MD5 key Linux accepts (TCP_MD5SIG_MAXKEYLEN).
	MaxPasswordLen = 80
)

// Config is a node's resolved BGP configuration.
type Config struct {
	// ASN is the node's local AS.
	ASN uint32
	// ClusterASN is the AS of a node that has no bgp.skiff.sh/asn annotation: the ASN flag
	// if set (agents are assumed to share their flags), else the ConfigMap's asn, else
	// 64512. MeshPeers uses it for the other nodes; zero means ASN.
	ClusterASN uint32
	// RouterID is the node's BGP identifier (32 bits, written as an IPv4 address, RFC 6286):
	// its IPv4 InternalIP, or on an IPv6-only node one derived from its IPv6 InternalIP
	// (DerivedRouterID).
	RouterID netip.Addr
	// IPv4 is the node's IPv4 InternalIP (invalid on an IPv6-only node): its address on
	// sessions to IPv4 peers, where the speaker listens, and the next hop of the IPv4 routes
	// it originates.
	IPv4 netip.Addr
	// IPv6 is the node's IPv6 InternalIP, if it has one: the next hop of the IPv6 routes it
	// originates (MP-BGP, over its IPv4 sessions as over IPv6 ones) and its address on
	// sessions to IPv6 peers.
	IPv6       netip.Addr
	ListenPort int32
	// NodeMesh asks for a session with every other node (see MeshPeers).
	NodeMesh bool
	// Peers are the explicit peers that apply to the node, in configuration order.
	Peers           []Peer
	GracefulRestart GracefulRestart
	// BFD runs a BFD session beside every BGP session, taking the BGP session down when
	// the peer is lost (off unless the ConfigMap's bfd section turns it on).
	BFD BFD
}

// BFD are the node's BFD (RFC 5880) settings: a peer is lost after Multiplier intervals
// without a packet.
type BFD struct {
	Enabled          bool
	TransmitInterval time.Duration
	Multiplier       uint8
}

// DefaultBFD detects a lost peer in 300 ms (3 x 100 ms), as FRR's bfdd defaults to 3 x 300 ms
// and is commonly tuned.
var DefaultBFD = BFD{TransmitInterval: 100 * time.Millisecond, Multiplier: 3}

// GracefulRestart is the speaker's graceful-restart capability (RFC 4724).
type GracefulRestart struct {
	Enabled bool
	// RestartTime is how long peers keep this node's routes while it restarts.
	RestartTime time.Duration
}

// Peer is one BGP session.
type Peer struct {
	Address netip.Addr
	ASN     uint32
	// Password is the TCP MD5 (RFC 2385) key; empty means none.
	Password string
	// HoldTime is 0 (no hold timer, no keepalives) or 3s..65535s; KeepaliveTime is 0 when
	// HoldTime is, else 1s..HoldTime-1s. Both are whole seconds.
	HoldTime, KeepaliveTime time.Duration
	// EBGPMultihop is the TTL of an eBGP session to a peer that is not directly connected;
	// 0 means unset (TTL 1). It has no effect on iBGP sessions.
	EBGPMultihop uint8
	// Name is a stable identifier: "tor-<address>" for explicit peers (unless a flag peer
	// names itself), "mesh-<node name>" for mesh peers.
	Name string
	// Passive waits for the peer to connect instead of dialing it. In the node mesh the
	// node with the lower address is passive, so exactly one side of each pair dials and a
	// restarting node is not caught in GoBGP's connection-collision idle time.
	Passive bool
}

// String describes p without its password.
func (p Peer) String() string {
	pw := ""
	if p.Password != "" {
		pw = "<redacted>"
	}
	return fmt.Sprintf("{Name:%s Address:%s ASN:%d Password:%s HoldTime:%s KeepaliveTime:%s EBGPMultihop:%d}",
		p.Name, p.Address, p.ASN, pw, p.HoldTime, p.KeepaliveTime, p.EBGPMultihop)
}

// GoString is String, so that %#v does not print the password either.
func (p Peer) GoString() string { return "config.Peer" + p.String() }

// Overrides are the agent's flags, the highest-precedence source.
type Overrides struct {
	// ASN replaces the node's AS when set.
	ASN *uint32
	// Peers, when non-nil, replace the peer list (an empty non-nil slice means none). A
	// zero HoldTime or KeepaliveTime means the default (90s, HoldTime/3), an empty Name
	// "tor-<address>"; Password is used as given.
	Peers []Peer
	// NodeMesh turns the node mesh on or off when set.
	NodeMesh *bool
}

// Resolve computes node's BGP configuration from the ConfigMap kube-system/skiff-bgp (nil
// when it does not exist), the node's annotations and the agent's flags, in increasing
// precedence (see the package documentation). secret returns a key of a kube-system
// Secret; it is called only for the peers that apply to the node and have a
// passwordSecret, and may be nil when none do.
func Resolve(cm *corev1.ConfigMap, node *corev1.Node, secret func(name, key string) (string, error), flags Overrides) (Config, error) {
	if node == nil {
		return Config{}, errors.New("bgp config: node is nil")
	}
	nodeCtx := fmt.Sprintf("node %q", node.Name)

	// 3. The ConfigMap (and 4. the defaults underneath it).
	cluster, err := parseConfigMap(cm)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{
		ASN:             DefaultASN,
		ListenPort:      DefaultListenPort,
		NodeMesh:        true,
		GracefulRestart: GracefulRestart{Enabled: true, RestartTime: DefaultRestartTime},
		BFD:             DefaultBFD,
	}
	if cluster.asn != nil {
		cfg.ASN = *cluster.asn
	}
	if cluster.nodeMesh != nil {
		cfg.NodeMesh = *cluster.nodeMesh
	}
	if cluster.listenPort != nil {
		cfg.ListenPort = *cluster.listenPort
	}
	if cluster.grEnabled != nil {
		cfg.GracefulRestart.Enabled = *cluster.grEnabled
	}
	if cluster.grRestartTime != nil {
		cfg.GracefulRestart.RestartTime = *cluster.grRestartTime
	}
	if cluster.bfd != nil {
		cfg.BFD = *cluster.bfd
	}
	cfg.ClusterASN = cfg.ASN
	specs, specSrc := cluster.peers, cluster.src

	// 2. The node's annotations.
	ann, err := parseAnnotations(node)
	if err != nil {
		return Config{}, err
	}
	if ann.asn != nil {
		cfg.ASN = *ann.asn
	}
	if ann.nodeMesh != nil {
		cfg.NodeMesh = *ann.nodeMesh
	}
	if ann.peersSet {
		specs, specSrc = ann.peers, ann.peersSrc
	}

	// 1. The agent's flags.
	var flagPeers []Peer
	if flags.ASN != nil {
		if err := checkASN(int64(*flags.ASN)); err != nil {
			return Config{}, fmt.Errorf("flags: asn: %w", err)
		}
		cfg.ASN, cfg.ClusterASN = *flags.ASN, *flags.ASN
	}
	if flags.NodeMesh != nil {
		cfg.NodeMesh = *flags.NodeMesh
	}
	if flags.Peers != nil {
		if flagPeers, err = normalizeFlagPeers(flags.Peers); err != nil {
			return Config{}, err
		}
	}

	if _, err = sessionAddr(node); err != nil {
		return Config{}, fmt.Errorf("%s: %w", nodeCtx, err)
	}
	cfg.IPv4, cfg.IPv6, _ = internalIPs(node)
	cfg.RouterID = cfg.IPv4
	if !cfg.IPv4.IsValid() {
		cfg.RouterID = DerivedRouterID(cfg.IPv6)
	}
	own := nodeAddrs(node)

	if flags.Peers != nil {
		cfg.Peers, err = selectFlagPeers(flagPeers, own)
	} else {
		cfg.Peers, err = selectSpecPeers(specs, specSrc, node, own, secret)
	}
	if err != nil {
		return Config{}, err
	}
	// The inputs were validated piecewise; make sure the whole holds together.
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("bgp config: internal error: %w", err)
	}
	return cfg, nil
}

// Validate checks the invariants Resolve guarantees, for Configs built by other means.
func (c Config) Validate() error {
	if err := checkASN(int64(c.ASN)); err != nil {
		return fmt.Errorf("asn: %w", err)
	}
	if c.ClusterASN != 0 {
		if err := checkASN(int64(c.ClusterASN)); err != nil {
			return fmt.Errorf("clusterASN: %w", err)
		}
	}
	if !c.RouterID.Is4() || c.RouterID.IsUnspecified() {
		return fmt.Errorf("routerID: %v is not a 32-bit identifier (an IPv4 address, not 0.0.0.0)", c.RouterID)
	}
	if !usableAddr(c.IPv4) && !usableAddr(c.IPv6) {
		return fmt.Errorf("the node has no usable address (ipv4 %v, ipv6 %v)", c.IPv4, c.IPv6)
	}
	if c.ListenPort < 1 || c.ListenPort > 65535 {
		return fmt.Errorf("listenPort: %d is out of range: must be between 1 and 65535", c.ListenPort)
	}
	if err := checkRestartTime(c.GracefulRestart.RestartTime); err != nil {
		return fmt.Errorf("gracefulRestart.restartTime: %w", err)
	}
	seen := map[netip.Addr]int{}
	for i, p := range c.Peers {
		if err := p.validate(); err != nil {
			return fmt.Errorf("peers[%d]: %w", i, err)
		}
		if p.Address == c.IPv4 || p.Address == c.IPv6 {
			return fmt.Errorf("peers[%d]: address %s is the node's own", i, p.Address)
		}
		if j, dup := seen[p.Address]; dup {
			return fmt.Errorf("peers[%d]: duplicate peer address %s (also peers[%d])", i, p.Address, j)
		}
		seen[p.Address] = i
	}
	return nil
}

func (p Peer) validate() error {
	if !usableAddr(p.Address) {
		return fmt.Errorf("address: %v is not a usable unicast address", p.Address)
	}
	if err := checkASN(int64(p.ASN)); err != nil {
		return fmt.Errorf("asn: %w", err)
	}
	if err := checkHoldTime(p.HoldTime); err != nil {
		return fmt.Errorf("holdTime: %w", err)
	}
	if err := checkKeepalive(p.KeepaliveTime, p.HoldTime); err != nil {
		return fmt.Errorf("keepaliveTime: %w", err)
	}
	if len(p.Password) > MaxPasswordLen {
		return fmt.Errorf("password: %d bytes is too long: TCP MD5 keys are at most %d bytes", len(p.Password), MaxPasswordLen)
	}
	if p.Name == "" {
		return errors.New("name: empty")
	}
	return nil
}

// checkASN accepts 1..4294967295 except AS_TRANS.
func checkASN(v int64) error {
	switch {
	case v == 0:
		return errors.New("AS 0 is reserved (RFC 7607) and cannot be used")
	case v == int64(ASTrans):
		return errors.New("AS 23456 is reserved as AS_TRANS (RFC 6793) and cannot be used")
	case v < 0 || v > 4294967295:
		return fmt.Errorf("%d is out of range: must be between 1 and 4294967295", v)
	}
	return nil
}

func checkWholeSeconds(d time.Duration) error {
	if d%time.Second != 0 {
		return fmt.Errorf("%s is not a whole number of seconds", d)
	}
	return nil
}

// checkHoldTime accepts 0 or 3s..65535s in whole seconds (RFC 4271).
func checkHoldTime(d time.Duration) error {
	if d < 0 || (d > 0 && d < MinHoldTime) || d > MaxHoldTime {
		return fmt.Errorf("%s is invalid: must be 0 (no hold timer) or between 3s and 65535s (RFC 4271)", d)
	}
	return checkWholeSeconds(d)
}

// checkKeepalive accepts 0 with a zero hold time, else 1s..hold-1s in whole seconds.
func checkKeepalive(k, hold time.Duration) error {
	if hold == 0 {
		if k != 0 {
			return fmt.Errorf("%s is invalid: must be 0 when holdTime is 0 (no keepalives are sent)", k)
		}
		return nil
	}
	if k < time.Second {
		return fmt.Errorf("%s is invalid: must be at least 1s", k)
	}
	if k >= hold {
		return fmt.Errorf("%s must be less than holdTime %s", k, hold)
	}
	return checkWholeSeconds(k)
}

// checkRestartTime accepts 1s..4095s in whole seconds (RFC 4724).
func checkRestartTime(d time.Duration) error {
	if d < MinRestartTime || d > MaxRestartTime {
		return fmt.Errorf("%s is out of range: must be between 1s and 4095s (RFC 4724)", d)
	}
	return checkWholeSeconds(d)
}

// usableAddr is a valid, non-mapped unicast address, zoned only if it is an IPv6 link-local
// one (a link-local peer names its interface).
func usableAddr(a netip.Addr) bool {
	return a.IsValid() && (a.Zone() == "" || a.Is6() && a.IsLinkLocalUnicast()) && !a.Is4In6() && !a.IsUnspecified() && !a.IsMulticast() &&
		a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// parsePeerAddr is parseAddr for a peer, which may also be a link-local IPv6 address: a
// router on a link the node shares, reached with no address of the node's own on that link
// (an unnumbered fabric). Such an address is only meaningful with its interface, given as
// the zone (fe80::1%eth1, as ping, ip and FRR's own CLI write it); no other peer has a zone.
func parsePeerAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || !a.IsLinkLocalUnicast() {
		return parseAddr(s)
	}
	switch zone := a.Zone(); {
	case zone == "":
		return netip.Addr{}, fmt.Errorf("%q is a link-local address: name the interface its router is on, as in %s%%eth1", s, a)
	case !validInterfaceName(zone):
		return netip.Addr{}, fmt.Errorf("%q: %q is not an interface name (1 to 15 bytes, no '/', ':' or whitespace)", s, zone)
	}
	return a, nil
}

// validInterfaceName is what Linux accepts as a network interface's name (dev_valid_name),
// and not a number (which an IPv6 zone may also be, but names no interface in a shared
// configuration).
func validInterfaceName(name string) bool {
	if len(name) == 0 || len(name) > 15 || name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n\r\v\f") {
		return false
	}
	_, err := strconv.Atoi(name)
	return err != nil
}

// parseAddr parses an address as given in configuration.
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not a valid IP address", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q: IPv6 zones are not supported", s)
	}
	a = a.Unmap()
	switch {
	case a.IsUnspecified():
		return netip.Addr{}, fmt.Errorf("%q is the unspecified address", s)
	case a.IsMulticast():
		return netip.Addr{}, fmt.Errorf("%q is a multicast address", s)
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return netip.Addr{}, fmt.Errorf("%q is the broadcast address", s)
	}
	return a, nil
}

// DerivedRouterID is the BGP identifier of a node without an IPv4 address: a hash of its IPv6
// address (FNV-1a, never 0), as Calico's "hash" router ID. Distinct nodes collide with the
// odds of 32-bit hashes; an identifier needs only be unique within the AS.
func DerivedRouterID(ipv6 netip.Addr) netip.Addr {
	h := fnv.New32a()
	b := ipv6.As16()
	_, _ = h.Write(b[:])
	v := h.Sum32()
	if v == 0 {
		v = 1
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// sessionAddr is the node's first InternalIP, IPv4 preferred: where its mesh peers reach it.
func sessionAddr(node *corev1.Node) (netip.Addr, error) {
	v4, v6, bad := internalIPs(node)
	switch {
	case v4.IsValid():
		return v4, nil
	case v6.IsValid():
		return v6, nil
	case len(bad) > 0:
		return netip.Addr{}, fmt.Errorf("no usable InternalIP address in status.addresses: %s", strings.Join(bad, "; "))
	}
	return netip.Addr{}, errors.New("no InternalIP address in status.addresses (BGP speaks from the node's InternalIP)")
}

// internalIPs are the node's first usable IPv4 and IPv6 InternalIPs (invalid when it has
// none of a family), and why the unusable ones are.
func internalIPs(node *corev1.Node) (v4, v6 netip.Addr, bad []string) {
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := parseAddr(a.Address)
		switch {
		case err != nil:
			bad = append(bad, err.Error())
		case ip.Is4() && !v4.IsValid():
			v4 = ip
		case ip.Is6() && !v6.IsValid():
			v6 = ip
		}
	}
	return v4, v6, bad
}

// nodeAddrs are all of node's addresses that are IPs, of any type.

func nodeAddrs(node *corev1.Node) map[netip.Addr]bool {
	own := map[netip.Addr]bool{}
	if node == nil {
		return own
	}
	for _, a := range node.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			own[ip.WithZone("").Unmap()] = true
		}
	}
	return own
}

// peerName is the stable name of an explicit peer.
func peerName(a netip.Addr) string { return "tor-" + a.String() }

// defaultKeepalive is a third of hold, in whole seconds (at least 1s when hold is set).
func defaultKeepalive(hold time.Duration) time.Duration {
	return (hold / 3).Truncate(time.Second)
}
