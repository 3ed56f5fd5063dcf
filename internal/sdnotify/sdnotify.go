// Package sdnotify tells systemd that a unit of Type=notify is ready (sd_notify(3)): a
// datagram "READY=1" to the socket named by $NOTIFY_SOCKET. Outside systemd it does nothing.
package sdnotify

import (
	"net"
	"os"
	"strings"
)

// Ready says the service is up. It reports whether a notification was sent.
func Ready() (bool, error) { return send("READY=1") }

// Stopping says the service is shutting down.
func Stopping() (bool, error) { return send("STOPPING=1") }

func send(state string) (bool, error) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return false, nil
	}
	if strings.HasPrefix(path, "@") { // an abstract socket
		path = "\x00" + path[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return false, err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, err
	}
	return true, nil
}
