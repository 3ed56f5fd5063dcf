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
	h := newHealthServer(netip.MustParseAddr("127.0.0.1"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer h.Close(t.Context())
	get := func() (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	h.Sync([]services.HealthCheck{{Namespace: "default", Name: "web", Port: port, LocalEndpoints: 2}})
	if code, body := get(); code != 200 || !strings.Contains(body, `"localEndpoints":2`) || !strings.Contains(body, `"name":"web"`) {
		t.Errorf("with local endpoints: %d %s", code, body)
	}
	h.Sync([]services.HealthCheck{{Namespace: "default", Name: "web", Port: port, LocalEndpoints: 0}})
	if code, body := get(); code != 503 || !strings.Contains(body, `"localEndpoints":0`) {
		t.Errorf("without: %d %s", code, body)
	}
	h.Sync(nil)
	if code, _ := get(); code != 0 {
		t.Errorf("after the Service went: %d, want the port closed", code)
	}
}
