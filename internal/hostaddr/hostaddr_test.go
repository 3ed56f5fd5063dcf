package hostaddr

import "testing"

func TestFirst(t *testing.T) {
	ip := First()
	if ip.To4() == nil {
		t.Fatalf("First() = %v, want an IPv4 address", ip)
	}
	if ip.IsLoopback() && ip.String() != "127.0.0.1" {
		t.Errorf("a loopback address other than the fallback: %v", ip)
	}
}
