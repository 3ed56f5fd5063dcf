package config

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// peerSpec is a validated configured peer before selection and password lookup.
type peerSpec struct {
	path      string // "peers[2]", for errors
	peer      Peer   // without the password
	secret    *secretRef
	selectors map[string]string
}

type secretRef struct{ name, key string }

func parsePeers(src, path string, raw []filePeer) ([]peerSpec, error) {
	specs := make([]peerSpec, 0, len(raw))
	for i, rp := range raw {
		ps, err := parsePeer(src, fmt.Sprintf("%s[%d]", path, i), rp)
		if err != nil {
			return nil, err
		}
		specs = append(specs, ps)
	}
	return specs, nil
}

func parsePeer(src, path string, rp filePeer) (peerSpec, error) {
	ps := peerSpec{path: path, selectors: rp.NodeSelector}
	p := &ps.peer

	addr, ok, err := rawString(src, join(path, "address"), rp.Address, "an IP address string")
	if err != nil {
		return ps, err
	}
	if !ok {
		return ps, fieldError(src, join(path, "address"), "required")
	}
	if p.Address, err = parsePeerAddr(addr); err != nil {
		return ps, fieldError(src, join(path, "address"), "%v", err)
	}
	p.Name = peerName(p.Address)

	asn, err := rawASN(src, join(path, "asn"), rp.ASN)
	if err != nil {
		return ps, err
	}
	if asn == nil {
		return ps, fieldError(src, join(path, "asn"), "required")
	}
	p.ASN = *asn

	p.HoldTime = DefaultHoldTime
	hold, err := rawDuration(src, join(path, "holdTime"), rp.HoldTime)
	if err != nil {
		return ps, err
	}
	if hold != nil {
		if err := checkHoldTime(*hold); err != nil {
			return ps, fieldError(src, join(path, "holdTime"), "%v", err)
		}
		p.HoldTime = *hold
	}
	p.KeepaliveTime = defaultKeepalive(p.HoldTime)
	ka, err := rawDuration(src, join(path, "keepaliveTime"), rp.KeepaliveTime)
	if err != nil {
		return ps, err
	}
	if ka != nil {
		if err := checkKeepalive(*ka, p.HoldTime); err != nil {
			return ps, fieldError(src, join(path, "keepaliveTime"), "%v", err)
		}
		p.KeepaliveTime = *ka
	}

	if v, ok, err := rawInt(src, join(path, "ebgpMultihop"), rp.EBGPMultihop, 1, 255); err != nil {
		return ps, err
	} else if ok {
		p.EBGPMultihop = uint8(v)
	}

	if ref := rp.PasswordSecret; ref != nil {
		refPath := join(path, "passwordSecret")
		name, key := ref.Name, ref.Key
		if name == "" {
			return ps, fieldError(src, join(refPath, "name"), "required")
		}
		if key == "" {
			return ps, fieldError(src, join(refPath, "key"), "required")
		}
		ps.secret = &secretRef{name: name, key: key}
	}
	return ps, nil
}

// matches reports whether node's labels carry every pair of the selector.
func (ps peerSpec) matches(node *corev1.Node) bool {
	for k, v := range ps.selectors {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// selectSpecPeers applies selection, duplicate and self checks, and reads passwords.
func selectSpecPeers(specs []peerSpec, src string, node *corev1.Node, own map[netip.Addr]bool,
	secret func(name, key string) (string, error)) ([]Peer, error) {
	seen := map[netip.Addr]string{}
	var peers []Peer
	for _, ps := range specs {
		if !ps.matches(node) {
			continue
		}
		if prev, dup := seen[ps.peer.Address]; dup {
			return nil, fieldError(src, ps.path, "duplicate peer address %s (also %s)", ps.peer.Address, prev)
		}
		seen[ps.peer.Address] = ps.path
		if own[ps.peer.Address] {
			continue
		}
		p := ps.peer
		if ps.secret != nil {
			ctx := fmt.Sprintf("%s: peer %s (%s): password secret %s/%s key %q",
				src, p.Address, ps.path, SecretNamespace, ps.secret.name, ps.secret.key)
			if secret == nil {
				return nil, fmt.Errorf("%s: no secret lookup available", ctx)
			}
			pw, err := secret(ps.secret.name, ps.secret.key)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ctx, err)
			}
			if pw == "" {
				return nil, fmt.Errorf("%s: empty password", ctx)
			}
			if len(pw) > MaxPasswordLen {
				return nil, fmt.Errorf("%s: password is %d bytes, longer than the %d a TCP MD5 key may have", ctx, len(pw), MaxPasswordLen)
			}
			p.Password = pw
		}
		peers = append(peers, p)
	}
	return peers, nil
}

// normalizeFlagPeers validates flag peers and fills in their defaults.
func normalizeFlagPeers(in []Peer) ([]Peer, error) {
	out := make([]Peer, 0, len(in))
	for i, p := range in {
		path := fmt.Sprintf("peers[%d]", i)
		if !p.Address.IsValid() {
			return nil, fieldError("flags", join(path, "address"), "required")
		}
		a, err := parsePeerAddr(p.Address.String())
		if err != nil {
			return nil, fieldError("flags", join(path, "address"), "%v", err)
		}
		p.Address = a
		if p.HoldTime == 0 {
			p.HoldTime = DefaultHoldTime
		}
		if p.KeepaliveTime == 0 {
			p.KeepaliveTime = defaultKeepalive(p.HoldTime)
		}
		if p.Name == "" {
			p.Name = peerName(p.Address)
		}
		if err := p.validate(); err != nil {
			return nil, fieldError("flags", path, "%v", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// selectFlagPeers applies the duplicate and self checks to flag peers.
func selectFlagPeers(in []Peer, own map[netip.Addr]bool) ([]Peer, error) {
	seen := map[netip.Addr]int{}
	var peers []Peer
	for i, p := range in {
		if j, dup := seen[p.Address]; dup {
			return nil, fieldError("flags", fmt.Sprintf("peers[%d]", i), "duplicate peer address %s (also peers[%d])", p.Address, j)
		}
		seen[p.Address] = i
		if !own[p.Address] {
			peers = append(peers, p)
		}
	}
	return peers, nil
}
