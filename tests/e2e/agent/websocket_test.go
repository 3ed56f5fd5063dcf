package agent

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/websocket"
	"k8s.io/client-go/rest"
)

// logsOverWebSocket reads a pod's log as upstream's e2e does: a WebSocket to pods/log with the
// binary.k8s.io protocol, every message concatenated until the server closes.
func logsOverWebSocket(t *testing.T, cfg *rest.Config, path string) (string, error) {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return "", err
	}
	wsc, err := websocket.NewConfig("wss://"+strings.TrimPrefix(cfg.Host, "https://")+path, "http://localhost")
	if err != nil {
		return "", err
	}
	wsc.TlsConfig, wsc.Protocol, wsc.Header = tlsCfg, []string{"binary.k8s.io"}, http.Header{}
	if cfg.BearerToken != "" {
		wsc.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
	}
	ws, err := websocket.DialConfig(wsc)
	if err != nil {
		return "", err
	}
	defer ws.Close()
	var buf bytes.Buffer
	for {
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			if errors.Is(err, io.EOF) {
				return buf.String(), nil
			}
			return buf.String(), err
		}
		buf.Write(msg)
	}
}
