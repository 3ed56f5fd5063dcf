package cni

import (
	"strings"
	"testing"
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
