package config

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// LoadBalancerClass is the loadBalancerClass skiff serves (allocates for and advertises);
// Services without a class are skiff's too.
const LoadBalancerClass = "skiff.sh/bgp"

// LoadBalancerPools reads the loadBalancerPools of the skiff-bgp ConfigMap (none without
// one): the prefixes (IPv4 and IPv6) LoadBalancer Services take their addresses from.
func LoadBalancerPools(cm *corev1.ConfigMap) ([]netip.Prefix, error) {
	if cm == nil {
		return nil, nil
	}
	cmName := fmt.Sprintf("configmap %s/%s", cm.Namespace, cm.Name)
	data, ok := cm.Data[ConfigKey]
	if !ok {
		return nil, nil
	}
	src := cmName + ": " + ConfigKey
	var f fileConfig
	if err := decode(src, []byte(data), configShape, true, &f); err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for i, p := range f.LoadBalancerPools {
		path := fmt.Sprintf("loadBalancerPools[%d].cidr", i)
		text, ok, err := rawString(src, path, p.CIDR, "a CIDR")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fieldError(src, path, "required")
		}
		prefix, err := ParsePool(text)
		if err != nil {
			return nil, fieldError(src, path, "%v", err)
		}
		out = append(out, prefix)
	}
	return out, nil
}

// ParsePool reads a LoadBalancer pool: a CIDR given as its network address (198.18.200.0/24,
// not 198.18.200.7/24), an IPv4 one at most a /16, an IPv6 one at most a /64 (a pool's
// addresses are handed out one by one; a larger IPv6 range would only be a mistake).
func ParsePool(text string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(text))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (want e.g. 198.18.200.0/24 or 2001:db8:200::/120)", text)
	}
	switch {
	case p.Addr().Is4In6() || p.Addr().Zone() != "":
		return netip.Prefix{}, fmt.Errorf("%s: want an IPv4 CIDR or a plain IPv6 one", p)
	case p.Addr().Is4() && p.Bits() < 16:
		return netip.Prefix{}, fmt.Errorf("%s: an IPv4 pool may be at most a /16", p)
	case p.Addr().Is6() && p.Bits() < 64:
		return netip.Prefix{}, fmt.Errorf("%s: an IPv6 pool may be at most a /64", p)
	case p.Masked() != p:
		return netip.Prefix{}, fmt.Errorf("%s has host bits set: did you mean %s?", p, p.Masked())
	}
	return p, nil
}
