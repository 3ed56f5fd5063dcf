package apiserver

import (
	"slices"
	"testing"
)

func TestPeerAddresses(t *testing.T) {
	for _, c := range []struct {
		name string
		own  string
		keys []string
		want []string
	}{
		{"alone, own key not seen yet", "10.0.0.2", nil, []string{"10.0.0.2"}},
		{"three, sorted as addresses", "10.0.0.10", []string{peerLeasePrefix + "10.0.0.9", peerLeasePrefix + "10.0.0.10", peerLeasePrefix + "10.0.0.1"},
			[]string{"10.0.0.1", "10.0.0.9", "10.0.0.10"}},
		{"junk ignored", "10.0.0.1", []string{peerLeasePrefix + "not-an-ip", "/registry/other/10.0.0.5", peerLeasePrefix}, []string{"10.0.0.1"}},
		{"duplicates once", "10.0.0.1", []string{peerLeasePrefix + "10.0.0.1", peerLeasePrefix + "10.0.0.1"}, []string{"10.0.0.1"}},
	} {
		if got := PeerAddresses(c.own, c.keys); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
