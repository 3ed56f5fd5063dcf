package controlplane

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/gctune"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestIdleGCTarget: `skiff server` with default flags lowers its garbage collector target
// (the runtime's own reading, go_gc_gogc_percent on /metrics) once it has been idle for
// half a minute, and puts Go's default back as soon as clients keep it busy.
func TestIdleGCTarget(t *testing.T) {
	s := framework.StartServer(t)
	// Unthrottled: at client-go's default of 5 requests a second, ClusterRole lists
	// allocate ~2.9 MB/s in the server, which with its own ~1.4 MB/s sits right at the
	// 4 MiB/s average that makes the tuner busy; eight free listers are far over 16 MiB/s.
	cfg := s.RESTConfig(t)
	cfg.QPS = -1
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gogc := func() (int, error) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return 0, err
		}
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, "go_gc_gogc_percent "); ok {
				return strconv.Atoi(v)
			}
		}
		return 0, fmt.Errorf("no go_gc_gogc_percent in /metrics")
	}
	waitFor := func(want int, load func()) {
		t.Helper()
		var got int
		var err error
		for ctx.Err() == nil {
			if got, err = gogc(); err == nil && got == want {
				return
			}
			if load != nil {
				load()
			} else {
				// A scrape of /metrics allocates some 3.4 MB in the server: every 20 s
				// it adds ~0.2 MB/s to the idle server's ~1.4 MB/s, well under the
				// 2 MiB/s average below which the tuner calls it idle.
				time.Sleep(20 * time.Second)
			}
		}
		t.Fatalf("GOGC never %d: last %d (%v)", want, got, err)
	}
	// Start-up is busy; half a minute after it the server is idle (its own leases and
	// controllers allocate about 1 MB a second, under the 2 MiB of DefaultPolicy).
	waitFor(gctune.DefaultIdlePercent, nil)
	// Clients listing every namespace's objects, as dashboards and informers re-listing do.
	waitFor(100, func() {
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 20; j++ {
					if _, err := client.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
}
