package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/dataplane/services"
)

func TestHealthServer(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	// The node's address of each family (loopback's stand in for them).
	h := newHealthServer([]netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer h.Close(t.Context())
	get := func(host string) (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://%s/", net.JoinHostPort(host, fmt.Sprint(port))))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	h.Sync([]services.HealthCheck{{Namespace: "default", Name: "web", Port: port, LocalEndpoints: 2}})
	for _, host := range []string{"127.0.0.1", "::1"} {
		if code, body := get(host); code != 200 || !strings.Contains(body, `"localEndpoints":2`) || !strings.Contains(body, `"name":"web"`) {
			t.Errorf("with local endpoints, on %s: %d %s", host, code, body)
		}
	}
	h.Sync([]services.HealthCheck{{Namespace: "default", Name: "web", Port: port, LocalEndpoints: 0}})
	if code, body := get("::1"); code != 503 || !strings.Contains(body, `"localEndpoints":0`) {
		t.Errorf("without: %d %s", code, body)
	}
	h.Sync(nil)
	for _, host := range []string{"127.0.0.1", "::1"} {
		if code, _ := get(host); code != 0 {
			t.Errorf("after the Service went, on %s: %d, want the port closed", host, code)
		}
	}
}
