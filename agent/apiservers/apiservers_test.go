package apiservers

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// listener accepts and closes connections until the test ends or it is closed.
func listener(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func TestDialerFailsOver(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	down, b, c := closedAddr(t), listener(t), listener(t)
	d, err := NewDialer([]string{"https://" + down, "https://" + b.Addr().String(), "https://" + c.Addr().String()}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := d.DialContext(ctx, "tcp", "ignored:1")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if d.Current() != b.Addr().String() {
		t.Errorf("current %s, want the first live server %s", d.Current(), b.Addr())
	}
	_ = b.Close()
	if conn, err = d.DialContext(ctx, "tcp", "ignored:1"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if d.Current() != c.Addr().String() {
		t.Errorf("after the second server went: current %s, want %s", d.Current(), c.Addr())
	}
	_ = c.Close()
	if _, err := d.DialContext(ctx, "tcp", "ignored:1"); err == nil || !strings.Contains(err.Error(), "no API server answers") {
		t.Errorf("all down: %v", err)
	}
}

// A dial that connected to a server just before it died finishes after a later dial failed
// over; the later dial's choice stands.
func TestStaleDialDoesNotUndoFailover(t *testing.T) {
	d, err := NewDialer([]string{"https://10.0.0.1:6443", "https://10.0.0.2:6443", "https://10.0.0.3:6443"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	d.connected(0, 1) // began at server 1, which refused; reached server 2
	d.connected(0, 0) // began at server 1 earlier and reached it before it died
	if got := d.Current(); got != "10.0.0.2:6443" {
		t.Errorf("current %s after a stale dial, want 10.0.0.2:6443", got)
	}
	d.connected(0, 2) // a dial that began before the failover and went further still
	if got := d.Current(); got != "10.0.0.2:6443" {
		t.Errorf("current %s, want 10.0.0.2:6443 kept", got)
	}
	d.connected(1, 2) // server 2 refused a dial that began there
	if got := d.Current(); got != "10.0.0.3:6443" {
		t.Errorf("current %s, want 10.0.0.3:6443", got)
	}
}

func TestParseURLs(t *testing.T) {
	got, err := ParseURLs(" https://10.0.0.1:6443/, https://10.0.0.2:6443,,")
	if err != nil || len(got) != 2 || got[0] != "https://10.0.0.1:6443" || got[1] != "https://10.0.0.2:6443" {
		t.Errorf("%v %v", got, err)
	}
	for _, bad := range []string{"", ",", "http://10.0.0.1:6443", "10.0.0.1:6443", "https://10.0.0.1:6443/api"} {
		if _, err := ParseURLs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestConfig(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	base := &rest.Config{Host: "https://10.0.0.1:6443"}
	if got, d, err := Config(base, []string{"https://10.0.0.1:6443"}, log); err != nil || got != base || d != nil {
		t.Errorf("one server: the config changed (%v %v)", d, err)
	}
	got, d, err := Config(base, []string{"https://10.0.0.1:6443", "https://10.0.0.2:6443"}, log)
	if err != nil || d == nil || got.Dial == nil || got.TLSClientConfig.ServerName != ServerName || base.Dial != nil {
		t.Errorf("two servers: %+v %v", got, err)
	}
}
