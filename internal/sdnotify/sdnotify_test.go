package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
)

func TestReady(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Ready(); sent || err != nil {
		t.Fatalf("outside systemd: sent %v, %v", sent, err)
	}
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	if sent, err := Ready(); !sent || err != nil {
		t.Fatalf("sent %v, %v", sent, err)
	}
	buf := make([]byte, 64)
	n, _, err := conn.ReadFromUnix(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Errorf("systemd got %q, %v", buf[:n], err)
	}
}
