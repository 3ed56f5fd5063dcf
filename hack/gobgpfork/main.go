// Command gobgpfork writes third_party/gobgp: the packages of GoBGP that skiff builds, copied
// unchanged from the module cache, with three edits (below). go.mod replaces
// github.com/osrg/gobgp/v3 with that directory, and `make verify` (go generate) rewrites it
// and fails on a difference, so the tree is always upstream's release plus exactly these edits.
//
// The first edit: GoBGP v3 waits a random 1-2 s before its first connection attempt to a newly
// added peer (pkg/server/fsm.go, connectLoop), and has no setting for it (v4 waits
// 0.75-1 s). RFC 4271 section 8.2.2 has a speaker in Idle initiate the TCP connection at its
// start event and only then start the ConnectRetryTimer. That wait was most of the time a
// new node's pod block took to reach the other nodes (1.7-1.9 s of it). The fork dials at
// once the first time and keeps upstream's jittered interval for every retry.
//
// The second edit: after a session ends for any reason but a local reset (the peer's
// NOTIFICATION, a closed connection, an expired hold timer), GoBGP stays Idle for a fixed
// 5 s, refusing the peer's connections and not dialing; only a local reset uses the
// configured IdleHoldTimeAfterReset. A node whose BFD reset one session, or whose agent
// restarted, was cut off from a GoBGP peer for 5-6 s. The fork uses the configured time
// (skiff sets 1 s, as FRR's first start timer) whenever it is shorter than the 5 s.
//
// The third edit: as graceful-restart helper, GoBGP dropped a restarting peer's stale routes
// whenever the peer's state went to Idle, taking every such transition for the restart timer's
// expiry — also a reconnection attempt that failed (the restarted speaker refused it because
// it had not configured its peers yet). RFC 4724 4.2 keeps them until the restart timer
// expires or the session is back. The fork drops them only at that expiry. The 5 s idle time
// hid this in skiff's mesh; with 1 s a node's block vanished from its peers for a second
// during its agent's restart.
//
// Usage: go run ./hack/gobgpfork -out third_party/gobgp
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/skiff-sh/skiff/internal/srcedit"
)

const module, version = "github.com/osrg/gobgp/v3", "v3.37.0"

// packages are the module's packages skiff's build imports (go list -deps ./... | grep
// gobgp). A new import of another GoBGP package fails to build until it is listed here.
var packages = []string{
	"api",
	"internal/pkg/table",
	"internal/pkg/version",
	"pkg/apiutil",
	"pkg/config/oc",
	"pkg/log",
	"pkg/metrics",
	"pkg/packet/bgp",
	"pkg/packet/bmp",
	"pkg/packet/mrt",
	"pkg/packet/rtr",
	"pkg/server",
	"pkg/zebra",
}

// edits are exact replacements; each must match exactly once (srcedit.Apply).
var edits = []srcedit.Edit{{
	File: "pkg/server/fsm.go",
	Old: `	tick := minConnectRetryInterval
	for {
		r := rand.New(rand.NewSource(time.Now().UnixNano()))
		timer := time.NewTimer(time.Duration(r.Intn(tick*1000)+tick*1000) * time.Millisecond)
`,
	New: `	tick := minConnectRetryInterval
	// skiff: the first attempt is made at once (RFC 4271 8.2.2); retries keep the jitter.
	first := true
	for {
		r := rand.New(rand.NewSource(time.Now().UnixNano()))
		wait := time.Duration(r.Intn(tick*1000)+tick*1000) * time.Millisecond
		if first {
			wait, first = 0, false
		}
		timer := time.NewTimer(wait)
`,
}, {
	File: "pkg/server/fsm.go",
	Old: `				fsm.idleHoldTime = holdtimeIdle
`,
	New: `				fsm.idleHoldTime = holdtimeIdle
				// skiff: the next idle hold, after a session ends for any reason, is the
				// configured IdleHoldTimeAfterReset when that is shorter than the fixed 5 s.
				if t := fsm.pConf.Timers.Config.IdleHoldTimeAfterReset; t > 0 && t < holdtimeIdle {
					fsm.idleHoldTime = t
				}
`,
}, {
	File: "pkg/server/server.go",
	Old: `		nextStateIdle := peer.fsm.pConf.GracefulRestart.State.PeerRestarting && nextState == bgp.BGP_FSM_IDLE
`,
	New: `		// skiff: only the restart timer's expiry ends a peer's restart, not any way to Idle
		// (a reconnection attempt that failed).
		nextStateIdle := peer.fsm.pConf.GracefulRestart.State.PeerRestarting && nextState == bgp.BGP_FSM_IDLE &&
			e.StateReason != nil && e.StateReason.Type == fsmRestartTimerExpired
`,
}}

func main() {
	out := flag.String("out", "third_party/gobgp", "directory to (re)write")
	flag.Parse()
	src, err := moduleDir()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.RemoveAll(*out); err != nil {
		log.Fatal(err)
	}
	for _, f := range []string{"go.mod", "go.sum", "LICENSE"} {
		if err := copyFile(filepath.Join(src, f), filepath.Join(*out, f)); err != nil {
			log.Fatal(err)
		}
	}
	for _, p := range packages {
		entries, err := os.ReadDir(filepath.Join(src, p))
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			if err := copyFile(filepath.Join(src, p, name), filepath.Join(*out, p, name)); err != nil {
				log.Fatal(err)
			}
		}
	}
	if err := srcedit.Apply(*out, edits); err != nil {
		log.Fatalf("%v (%s %s)", err, module, version)
	}
	readme := fmt.Sprintf("This is %s %s with three edits, written by hack/gobgpfork (read it for why).\n"+
		"Do not change it by hand: `go generate ./bgp` rewrites it and `make verify` fails on a difference.\n", module, version)
	if err := os.WriteFile(filepath.Join(*out, "README.skiff"), []byte(readme), 0o644); err != nil {
		log.Fatal(err)
	}
}

// moduleDir downloads (or finds) the pristine release in the module cache.
func moduleDir() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(b, &m); err != nil {
		return "", err
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, m.Error)
	}
	return m.Dir, nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, fs.FileMode(0o644))
}
