package runtime

import (
	"errors"
	"os"
	"os/exec"
	goruntime "runtime"
	"syscall"
	"testing"
	"time"
)

var errOnMainThread = errors.New("on the main thread")

func alive(pid int) bool {
	// Reaped or not, a killed child is gone from /proc's view once Wait returns; a live one
	// answers signal 0.
	return syscall.Kill(pid, 0) == nil
}

func waitExit(cmd *exec.Cmd, within time.Duration) bool {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(within):
		return false
	}
}

func sleeper() *exec.Cmd {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	return cmd
}

// TestPdeathsigFollowsTheThread shows the hazard and the cure: a child with Pdeathsig started
// on a thread that then ends is killed, with this process alive; one started by
// startFromStableThread survives other threads ending.
func TestPdeathsigFollowsTheThread(t *testing.T) {
	// The hazard: start on a locked thread, then let that goroutine return locked, which
	// makes the runtime end the thread — unless it is the main thread, which the runtime
	// keeps: a goroutine that lands there holds it until the end, and the next try lands on
	// another thread.
	doomed := sleeper()
	release := make(chan struct{})
	defer close(release)
	for {
		started := make(chan error)
		go func() {
			goruntime.LockOSThread()
			if syscall.Gettid() == os.Getpid() {
				started <- errOnMainThread
				<-release
				goruntime.UnlockOSThread()
				return
			}
			started <- doomed.Start()
		}()
		err := <-started
		if err == errOnMainThread {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	if !waitExit(doomed, 5*time.Second) {
		_ = doomed.Process.Kill()
		t.Fatal("a Pdeathsig child outlived the thread that started it; the premise of the start thread is wrong")
	}

	// The cure.
	kept := sleeper()
	if err := startFromStableThread(kept); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kept.Process.Kill(); _ = kept.Wait() }()
	for i := 0; i < 8; i++ { // end a few threads, as failed namespace switches would
		done := make(chan struct{})
		go func() { goruntime.LockOSThread(); close(done) }()
		<-done
	}
	time.Sleep(200 * time.Millisecond)
	if !alive(kept.Process.Pid) {
		t.Fatal("a child started from the stable thread died when other threads ended")
	}
	if waitExit(kept, 300*time.Millisecond) {
		t.Fatal("the child started from the stable thread exited")
	}
}
