package pods

import (
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// backoffs holds every retry delay of the node's pods, as the kubelet's: a container's crash
// loop ("<uid>/<container>"), a pod's image pulls ("<uid>_<image>"), its sandbox
// ("<uid>/sandbox") and its container starts ("<uid>/start/<container>"), with the error of
// each start that failed, reported again while its retry waits. It owns its maps; the pod
// manager only asks it.
type backoffs struct {
	mu    sync.Mutex
	until map[string]time.Time // earliest next attempt
	delay map[string]time.Duration
	// startErrs is each container's last failed start.
	startErrs map[string]*waitingError
}

func newBackoffs() *backoffs {
	return &backoffs{until: map[string]time.Time{}, delay: map[string]time.Duration{}, startErrs: map[string]*waitingError{}}
}

// blocked reports whether key's last failure is more recent than its delay.
func (b *backoffs) blocked(key string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	until, ok := b.until[key]
	return ok && now.Before(until)
}

// failed starts key's delay at initial or doubles it up to maxDelay; a failure more than
// twice maxDelay after the previous one starts again at initial.
func (b *backoffs) failed(key string, now time.Time, initial, maxDelay time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.delay[key]
	if last := b.until[key].Add(-d); d == 0 || now.Sub(last) > 2*maxDelay {
		d = initial
	} else {
		d = min(d*2, maxDelay)
	}
	b.delay[key] = d
	b.until[key] = now.Add(d)
}

// succeeded forgets key's delay and its last start error.
func (b *backoffs) succeeded(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.until, key)
	delete(b.delay, key)
	delete(b.startErrs, key)
}

// startFailed records a failed container start: its delay grows and err is its last error.
func (b *backoffs) startFailed(key string, now time.Time, err *waitingError) {
	b.failed(key, now, startBackoffInitial, startBackoffMax)
	b.mu.Lock()
	b.startErrs[key] = err
	b.mu.Unlock()
}

// lastStartErr is key's last failed start (nil if none).
func (b *backoffs) lastStartErr(key string) *waitingError {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.startErrs[key]
}

// crashed is a container's exit under a restart policy that restarts it: false while its
// crash delay runs; else the delay starts at 10 s or doubles to 5 min (back to 10 s after a
// run of more than 10 minutes, as upstream) and the container may restart now.
func (b *backoffs) crashed(key string, now time.Time, ranLong bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if until, ok := b.until[key]; ok && now.Before(until) {
		return false
	}
	d := b.delay[key]
	if d == 0 || ranLong {
		d = crashBackoffInitial
	} else {
		d = min(d*2, crashBackoffMax)
	}
	b.delay[key] = d
	b.until[key] = now.Add(d)
	return true
}

// forgetPod drops everything of a pod that is gone.
func (b *backoffs) forgetPod(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.until {
		if strings.HasPrefix(k, string(uid)) {
			delete(b.until, k)
			delete(b.delay, k)
		}
	}
	for k := range b.startErrs {
		if strings.HasPrefix(k, string(uid)) {
			delete(b.startErrs, k)
		}
	}
}

// The delays, as the kubelet's: a crashed container 10 s doubling to 5 min; an image pull,
// a sandbox or a container start that failed 10 s doubling to 5 min.
const (
	crashBackoffInitial     = 10 * time.Second
	crashBackoffMax         = 5 * time.Minute
	imagePullBackoffInitial = 10 * time.Second
	imagePullBackoffMax     = 5 * time.Minute
	startBackoffInitial     = 10 * time.Second
	startBackoffMax         = 5 * time.Minute
)
