package leader

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestLostLeadershipIsAnError: when renewals fail past the renew deadline (the API server
// unreachable, or another holder — the fake clientset does not enforce resourceVersions, so
// a stolen Lease would be overwritten; failing updates stand for both), lead's context ends
// and Run returns an error (the process exits non-zero), not nil as a clean stop would.
func TestLostLeadershipIsAnError(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a renew deadline (a few seconds)")
	}
	client := fake.NewClientset()
	// The reactor is installed before the client is shared (the fake's reactor chain is not
	// safe to change while in use) and starts failing renewals once the test says so.
	var failing atomic.Bool
	client.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leading := make(chan struct{})
	leadEnded := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, client, Options{Namespace: "kube-system", Name: "kube-scheduler", LeaseDuration: 4 * time.Second}, log,
			func(ctx context.Context) {
				close(leading)
				<-ctx.Done()
				close(leadEnded)
			})
	}()
	select {
	case <-leading:
	case <-ctx.Done():
		t.Fatal("never became leader")
	}
	failing.Store(true)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "leaderelection lost") {
			t.Fatalf("Run() = %v, want the lost lease", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return after losing the lease")
	}
	select {
	case <-leadEnded:
	default:
		t.Fatal("Run returned while lead was still running")
	}
}

// TestCleanStopIsNil: ending ctx is not an error.
func TestCleanStopIsNil(t *testing.T) {
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	leading := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, client, Options{Namespace: "kube-system", Name: "kube-controller-manager"}, slog.New(slog.NewTextHandler(io.Discard, nil)),
			func(ctx context.Context) { close(leading); <-ctx.Done() })
	}()
	<-leading
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run() after ctx ended = %v", err)
	}
}
