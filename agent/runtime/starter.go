package runtime

import (
	"os/exec"
	goruntime "runtime"
	"sync"
)

// Pdeathsig is delivered when the *thread* that forked the child exits, not the process
// (go.dev/issue/27505), and the Go runtime ends a thread whenever a goroutine locked to it
// returns without unlocking — which namespace switching does when it cannot switch back. A
// containerd started from an arbitrary goroutine could so be killed while the agent lives.
// Every child that must die with the agent is therefore started from one goroutine locked to
// its thread for the life of the process.
var (
	starterOnce sync.Once
	starts      chan startRequest
)

type startRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// startFromStableThread starts cmd on the process's dedicated start thread.
func startFromStableThread(cmd *exec.Cmd) error {
	starterOnce.Do(func() {
		starts = make(chan startRequest)
		go func() {
			goruntime.LockOSThread() // never unlocked and never returns: the thread lives as long as the process
			for r := range starts {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	starts <- startRequest{cmd, done}
	return <-done
}
