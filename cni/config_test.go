package cni

import (
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/cni/protocol"
)

func TestParseConfig(t *testing.T) {
	ok, err := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"skiff","type":"skiff-cni"}`))
	if err != nil || ok.AgentSocket != "/run/skiff/agent/cni.sock" {
		t.Fatalf("defaults: %v %+v", err, ok)
	}
	for _, tc := range []struct{ conf, msg string }{
		{`{`, "bad network configuration"},
		{`{"name":"x"}`, "lacks cniVersion"},
		{`{"cniVersion":"0.2.0","name":"x"}`, "unsupported cniVersion"},
		{`{"cniVersion":"banana","name":"x"}`, "unsupported cniVersion"},
		{`{"cniVersion":"1.0.0"}`, "lacks name"},
		{`{"cniVersion":"1.0.0","name":"x","agentSocket":"relative.sock"}`, "absolute path"},
		{`{"cniVersion":"1.0.0","name":"x","mtu":100}`, "mtu 100 out of range"},
		{`{"cniVersion":"1.0.0","name":"x","mtu":"big"}`, "bad network configuration"},
	} {
		_, err := ParseConfig([]byte(tc.conf))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %q", tc.conf, err, tc.msg)
		}
	}
}

func TestHostVethName(t *testing.T) {
	a, b := HostVethName("0123456789abcdef"), HostVethName("0123456789abcdeg")
	if len(a) > 15 || a == b || HostVethName("0123456789abcdef") != a {
		t.Fatalf("names %q %q must be short, distinct and stable", a, b)
	}
	if n := HostVethName("Weird/ID with spaces"); len(n) > 15 || strings.ContainsAny(n, "/ ") {
		t.Fatalf("unsafe name %q", n)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"skiff","type":"skiff-cni","agentSocket":"/run/x.sock","mtu":1450}`))
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"skiff","prevResult":{"cniVersion":"1.0.0","ips":[{"address":"10.244.1.2/32"}]}}`))
	f.Add([]byte(`{"cniVersion":"0.4.0","name":"n","runtimeConfig":{"portMappings":[]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err == nil && (c.Name == "" || c.CNIVersion == "" || !strings.HasPrefix(c.AgentSocket, "/")) {
			t.Fatalf("accepted an invalid config: %+v", c)
		}
	})
}

func TestPodAddrs(t *testing.T) {
	ok := protocol.AddResponse{IP: "10.244.1.2", IPs: []string{"10.244.1.2", "fd00:10:244:1::2"}, Gateway: "169.254.1.1", GatewayIPv6: "fe80::1"}
	got, err := podAddrs(ok)
	if err != nil || len(got) != 2 || got[0].gw.String() != "169.254.1.1" || got[1].gw.String() != "fe80::1" || !got[1].ipv6() || got[0].ipv6() {
		t.Fatalf("dual-stack answer: %+v %v", got, err)
	}
	// An older agent: IP alone.
	if got, err := podAddrs(protocol.AddResponse{IP: "10.244.1.2", Gateway: "169.254.1.1"}); err != nil || len(got) != 1 {
		t.Errorf("an older agent's answer: %+v %v", got, err)
	}
	for _, bad := range []protocol.AddResponse{
		{IP: "junk", Gateway: "169.254.1.1"},
		{IPs: []string{"10.244.1.2", "10.244.1.3"}, Gateway: "169.254.1.1"},
		{IPs: []string{"fd00::2"}, Gateway: "169.254.1.1"},
		{IPs: []string{"fd00::2"}, GatewayIPv6: "fd00::1"},
		{IPs: []string{"10.244.1.2"}, Gateway: "fe80::1"},
	} {
		if got, err := podAddrs(bad); err == nil || !strings.HasPrefix(err.Error(), "skiff-cni: ") {
			t.Errorf("%+v: %+v %v, want a clear error", bad, got, err)
		}
	}
}
