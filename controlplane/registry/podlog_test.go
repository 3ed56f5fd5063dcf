package registry

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/websocket"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"

	"github.com/skiff-sh/skiff/controlplane/scheme"
)

// A short log (sent with a Content-Length, so its last bytes come with io.EOF) reaches a
// WebSocket client whole, as upstream's conformance reads pods/log; the library's stream
// alone loses it.
func TestLogOverWebSocket(t *testing.T) {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("container is alive\n"))
	}))
	defer agent.Close()
	loc, _ := url.Parse(agent.URL + "/containerLogs/ns/pod/c")
	read := func(wrap bool) string {
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			st := genericrest.LocationStreamer{Location: loc, Transport: http.DefaultTransport, ContentType: "text/plain"}
			if wrap {
				responsewriters.StreamObject(200, schema.GroupVersion{Version: "v1"}, scheme.Codecs, &logStreamer{st}, w, r)
			} else {
				responsewriters.StreamObject(200, schema.GroupVersion{Version: "v1"}, scheme.Codecs, &st, w, r)
			}
		}))
		defer api.Close()
		cfg, _ := websocket.NewConfig("ws"+strings.TrimPrefix(api.URL, "http")+"/log", "http://localhost")
		cfg.Protocol = []string{"binary.k8s.io"}
		ws, err := websocket.DialConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		var buf bytes.Buffer
		for {
			var msg []byte
			if err := websocket.Message.Receive(ws, &msg); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				return buf.String()
			}
			buf.Write(msg)
		}
	}
	if got := read(true); got != "container is alive\n" {
		t.Errorf("pods/log over a WebSocket: %q", got)
	}
	if got := read(false); got != "" {
		t.Logf("the library alone now keeps the last bytes (%q): logStreamer may go", got)
	}
}

func TestEOFApart(t *testing.T) {
	r := &eofApart{ReadCloser: io.NopCloser(&dataWithEOF{data: []byte("abc")})}
	buf := make([]byte, 8)
	if n, err := r.Read(buf); n != 3 || err != nil {
		t.Fatalf("first read %d %v, want the data without io.EOF", n, err)
	}
	if n, err := r.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("second read %d %v, want io.EOF", n, err)
	}
}

// dataWithEOF returns all its data and io.EOF from one Read, as an HTTP body may.
type dataWithEOF struct{ data []byte }

func (d *dataWithEOF) Read(p []byte) (int, error) {
	n := copy(p, d.data)
	d.data = d.data[n:]
	return n, io.EOF
}
