package version

import (
	"strings"
	"testing"
)

func TestCheckAgentSkew(t *testing.T) {
	for _, c := range []struct {
		server, agent string
		want          string // a part of the error; "" when allowed
	}{
		{"v1.37.2+skiff", "v1.37.2+skiff", ""},
		{"v1.37.2+skiff", "v1.37.0", ""},
		{"v1.37.0", "v1.37.9", ""}, // patch versions do not count
		{"v1.37.2+skiff", "v1.36.5+skiff", ""},
		{"v1.37.2", "v1.34.0", ""},
		{"v1.37.2", "v1.33.9", "4 minor versions older"},
		{"v1.37.2", "v1.38.0", "newer than its server"},
		{"v1.37.2", "v2.37.2", "different major"},
		{"v1.37.2", "dev", `version "dev"`},
		{"", "v1.37.2", `version ""`},
	} {
		err := CheckAgentSkew(c.server, c.agent)
		if c.want == "" && err != nil {
			t.Errorf("server %s, agent %s: %v, want allowed", c.server, c.agent, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("server %s, agent %s: %v, want an error with %q", c.server, c.agent, err, c.want)
		}
	}
}

func TestCheckServerSkew(t *testing.T) {
	for _, c := range []struct {
		running, joining string
		ok               bool
	}{
		{"v1.37.2+skiff", "v1.37.2+skiff", true},
		{"v1.37.2", "v1.38.0", true},
		{"v1.38.0", "v1.37.2", true},
		{"v1.37.2", "v1.39.0", false},
		{"v1.39.0", "v1.37.2", false},
		{"v1.37.2", "v2.37.2", false},
		{"v1.37.2", "garbage", false},
	} {
		if err := CheckServerSkew(c.running, c.joining); (err == nil) != c.ok {
			t.Errorf("running %s, joining %s: %v, want ok=%t", c.running, c.joining, err, c.ok)
		}
	}
}

func TestKnown(t *testing.T) {
	for v, want := range map[string]bool{"v1.37.2+skiff": true, "v1.36.0": true, "v0.0.0-master+$Format:%H$": false, "dev": false, "": false} {
		if got := Known(v); got != want {
			t.Errorf("Known(%q) = %t, want %t", v, got, want)
		}
	}
}
