package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/skiff-sh/skiff/cni/protocol"
)

// agentClient talks to the node agent over its Unix socket.
type agentClient struct {
	socket string
	http   *http.Client
}

func newAgentClient(socket string) *agentClient {
	return &agentClient{socket: socket, http: &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}},
	}}
}

func (c *agentClient) call(path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := c.http.Post("http://skiff-agent"+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("skiff-cni: node agent at %s: %w", c.socket, err)
	}
	defer r.Body.Close()
	if r.StatusCode/100 != 2 {
		var e protocol.Error
		_ = json.NewDecoder(r.Body).Decode(&e)
		return fmt.Errorf("skiff-cni: node agent: %s (HTTP %d)", e.Message, r.StatusCode)
	}
	if resp != nil {
		return json.NewDecoder(r.Body).Decode(resp)
	}
	return nil
}
