package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// BenchmarkHAWrite times ConfigMap creates through one API server whose embedded etcd is one
// member of three (servers joined with --cluster-init and --server on 127.0.0.1-3), against
// the same creates on a server alone, measured in the same run: the cost of the replication a
// write waits for (a majority's fsync and a round trip). Reported as medians, p99s, and the
// ratios of the HA figures to the single member's.
func BenchmarkHAWrite(b *testing.B) {
	n := max(b.N, 200)
	ctx := context.Background()
	single := framework.StartServer(b, "--node-name", "alone")
	aloneP50, aloneP99 := createLatencies(ctx, b, protobufClient(b, single), n)
	single.Stop()

	first := haServer(b, 1, "", "")
	token, err := os.ReadFile(filepath.Join(first.Dir, "token"))
	if err != nil {
		b.Fatal(err)
	}
	join := fmt.Sprintf("https://127.0.0.1:%d", first.Port)
	haServer(b, 2, join, strings.TrimSpace(string(token)))
	haServer(b, 3, join, strings.TrimSpace(string(token)))
	framework.Eventually(b, time.Minute, "three voting members", func() (bool, string) {
		out := first.Etcdctl(b, "member", "list")
		return strings.Count(out, ", started, ") == 3 && !strings.Contains(out, "true"), out
	})
	haP50, haP99 := createLatencies(ctx, b, protobufClient(b, first), n)

	us := func(d time.Duration) float64 { return float64(d.Microseconds()) }
	b.ReportMetric(us(aloneP50), "alone-create-µs")
	b.ReportMetric(us(haP50), "ha3-create-µs")
	b.ReportMetric(us(haP99), "ha3-create-p99-µs")
	b.ReportMetric(float64(haP50)/float64(aloneP50), "ha3/alone")
	b.ReportMetric(float64(haP99)/float64(aloneP99), "ha3/alone-p99")
}

// haServer starts server n of an embedded-etcd cluster on 127.0.0.n.
func haServer(b *testing.B, n int, join, token string) *framework.Server {
	ip := fmt.Sprintf("127.0.0.%d", n)
	args := []string{"--bind-address", ip, "--advertise-address", ip, "--node-name", fmt.Sprintf("srv%d", n)}
	if join == "" {
		args = append(args, "--cluster-init")
	} else {
		args = append(args, "--server", join, "--token", token)
	}
	s := framework.NewServer(b, b.TempDir(), args...)
	s.Start()
	return s
}

// createLatencies creates n ConfigMaps one after another and returns the median and p99.
func createLatencies(ctx context.Context, b *testing.B, c kubernetes.Interface, n int) (time.Duration, time.Duration) {
	value := strings.Repeat("x", 200)
	d := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ha-%d", i)},
			Data: map[string]string{"v": value}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2], d[len(d)*99/100]
}
