package bfd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// inNetnsEnv marks the test binary's second run, inside the namespace the first made.
const inNetnsEnv = "SKIFF_BFD6_IN_NETNS"

// TestManagerOverIPv6 runs a manager with an IPv6 local address against a scripted peer, in a
// network namespace of the test's own whose loopback holds both addresses (the test binary
// runs again inside it, so every thread is there): the session comes
// Up over UDP/IPv6 with hop limit 255, and the peer's silence is a loss after the detection
// time, as over IPv4.
func TestManagerOverIPv6(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root and network namespaces: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	local, remote := netip.MustParseAddr("fd00:bfd::1"), netip.MustParseAddr("fd00:bfd::2")
	if os.Getenv(inNetnsEnv) == "" {
		// The test runs again inside a namespace of its own (every thread of the process
		// there, the manager's included), whose loopback holds both addresses.
		name := fmt.Sprintf("skiff-bfd6-%d", os.Getpid())
		ip := func(args ...string) {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				t.Fatalf("ip %v: %v\n%s", args, err, out)
			}
		}
		ip("netns", "add", name)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
		ip("-n", name, "link", "set", "lo", "up")
		for _, a := range []netip.Addr{local, remote} {
			ip("-n", name, "addr", "add", a.String()+"/128", "dev", "lo", "nodad")
		}
		cmd := exec.Command("ip", "netns", "exec", name, os.Args[0], "-test.run", "^TestManagerOverIPv6$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), inNetnsEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestManagerOverIPv6") {
			t.Fatalf("inside %s: %v\n%s", name, err, out)
		}
		return
	}
	peer := newScriptedPeer(t, remote, local)

	events := make(chan Event, 16)
	m := NewManager(local, DefaultConfig, slog.New(slog.NewTextHandler(io.Discard, nil)), func(e Event) { events <- e })
	m.SetPeers([]netip.Addr{remote})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	first, ok := peer.read(3 * time.Second)
	if !ok || first.State != Down {
		t.Fatalf("first packet %+v (ok %v), want Down", first, ok)
	}
	const ours = 91
	answer := func(state State) {
		peer.send(Packet{State: state, DetectMult: 3, MyDiscriminator: ours, YourDiscriminator: first.MyDiscriminator,
			DesiredMinTx: 50 * time.Millisecond, RequiredMinRx: 50 * time.Millisecond})
	}
	answer(Init)
	waitEvent(t, events, Up)
	if st, _ := m.State(remote); st != Up {
		t.Fatalf("state %s, want Up", st)
	}
	// Silence: lost after the detection time.
	if ev := waitEvent(t, events, Down); !ev.Lost() || ev.Diag != DiagDetectionExpired || ev.Peer != remote {
		t.Errorf("loss event %+v, want %s lost by detection time", ev, remote)
	}
}
