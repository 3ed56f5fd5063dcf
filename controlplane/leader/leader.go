// Package leader runs a component only while it holds a Lease, as kube-scheduler and
// kube-controller-manager do: identity "<host>_<uuid>", 15 s lease, renewed every 2 s.
package leader

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Options configure an election.
type Options struct {
	// Namespace and Name locate the Lease (kube-system/kube-scheduler).
	Namespace, Name string
	// LeaseDuration is how long a lease is valid without renewal (15 s).
	LeaseDuration time.Duration
}

// Identity returns "<host>_<uuid>", unique per process.
func Identity() string {
	host, _ := os.Hostname()
	return host + "_" + uuid.NewString()
}

// Run campaigns for the lease and runs lead while holding it. It returns nil when ctx ends;
// if leadership is lost, lead's context is cancelled and Run returns an error, so the process
// exits non-zero and a fresh one campaigns again (as upstream's "leaderelection lost").
func Run(ctx context.Context, client kubernetes.Interface, o Options, log *slog.Logger, lead func(ctx context.Context)) error {
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 15 * time.Second
	}
	id := Identity()
	leadDone := make(chan struct{})
	var started atomic.Bool
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaseDuration,
		RenewDeadline:   o.LeaseDuration * 2 / 3,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Name:            o.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				started.Store(true)
				defer close(leadDone)
				log.Info("became leader", "lease", o.Namespace+"/"+o.Name, "identity", id)
				lead(ctx)
			},
			OnStoppedLeading: func() { log.Info("stopped leading", "lease", o.Namespace+"/"+o.Name, "identity", id) },
			OnNewLeader: func(holder string) {
				if holder != id {
					log.Info("leader elected", "lease", o.Namespace+"/"+o.Name, "holder", holder)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	// client-go runs lead in its own goroutine and does not wait for it: wait here, so
	// nothing of the component runs on once Run has returned.
	if started.Load() {
		<-leadDone
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("lost the lease %s/%s (identity %s): leaderelection lost", o.Namespace, o.Name, id)
}
