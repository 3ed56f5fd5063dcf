package hostaddr

import (
	"net"
	"testing"
)

func TestFirst(t *testing.T) {
	ip := First()
	if ip.To4() == nil {
		t.Fatalf("First() = %v, want an IPv4 address", ip)
	}
	if ip.IsLoopback() && ip.String() != "127.0.0.1" {
		t.Errorf("a loopback address other than the fallback: %v", ip)
	}
}

func TestFirstOf(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		ip := FirstOf(v6)
		if (ip.To4() == nil) != v6 || ip.IsLinkLocalUnicast() {
			t.Errorf("FirstOf(%v) = %v: want an address of that family, not link-local", v6, ip)
		}
		if ip.IsLoopback() && !ip.Equal(net.IPv6loopback) && !ip.Equal(net.IPv4(127, 0, 0, 1)) {
			t.Errorf("FirstOf(%v): a loopback address other than the fallback: %v", v6, ip)
		}
	}
}
