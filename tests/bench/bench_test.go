// Package bench measures skiff's API server against baselines taken in the same run, so the
// figures survive a noisy shared machine: API latencies as ratios to a raw etcd operation on the
// same etcd, and idle memory as a ratio to a bare Debian etcd member.
//
//	make bench    # runs: go test -bench . ./tests/bench
package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

func protobufClient(b *testing.B, s *framework.Server) kubernetes.Interface {
	cfg := rest.CopyConfig(s.RESTConfig(b))
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf"
	cfg.QPS, cfg.Burst = -1, 0
	return kubernetes.NewForConfigOrDie(cfg)
}

func etcdClient(b *testing.B, s *framework.Server) *clientv3.Client {
	pki := filepath.Join(s.Dir, "pki")
	info := transport.TLSInfo{CertFile: filepath.Join(pki, "apiserver-etcd-client.crt"), KeyFile: filepath.Join(pki, "apiserver-etcd-client.key"),
		TrustedCAFile: filepath.Join(pki, "etcd", "ca.crt")}
	tlsCfg, err := info.ClientConfig()
	if err != nil {
		b.Fatal(err)
	}
	tlsCfg.MinVersion = tls.VersionTLS12
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://127.0.0.1:" + strconv.Itoa(s.EtcdPort)}, TLS: tlsCfg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// timeN runs f n times and returns the median duration.
func timeN(n int, f func(i int) error) (time.Duration, error) {
	d := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := f(i); err != nil {
			return 0, err
		}
		d = append(d, time.Since(start))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2], nil
}

// BenchmarkAPI times create, get, list (100 objects) and watch delivery through the API server
// (client-go, protobuf) and reports each as a median in µs and as a ratio to a raw etcd put or
// get of the same etcd measured alongside.
func BenchmarkAPI(b *testing.B) {
	s := framework.StartServer(b)
	c := protobufClient(b, s)
	e := etcdClient(b, s)
	ctx := context.Background()
	cms := c.CoreV1().ConfigMaps("default")
	value := strings.Repeat("x", 200)
	n := b.N
	seq := 0
	name := func() string { seq++; return fmt.Sprintf("bench-%d", seq) }

	b.ResetTimer()
	etcdPut, err := timeN(n, func(i int) error {
		_, err := e.Put(ctx, fmt.Sprintf("/bench/raw-%d", i), value)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	etcdGet, _ := timeN(n, func(i int) error { _, err := e.Get(ctx, fmt.Sprintf("/bench/raw-%d", i)); return err })
	create, err := timeN(n, func(int) error {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name()}, Data: map[string]string{"v": value}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	get, err := timeN(n, func(i int) error {
		_, err := cms.Get(ctx, fmt.Sprintf("bench-%d", i%seq+1), metav1.GetOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	// Lists of 100 objects from the watch cache.
	lcms := c.CoreV1().ConfigMaps("kube-public")
	for i := 0; i < 100; i++ {
		_, _ = lcms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("l", i)}}, metav1.CreateOptions{})
	}
	list, err := timeN(max(n/10, 10), func(int) error {
		_, err := lcms.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	// Watch latency: a create plus the arrival of its event on an open watch.
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	drain(w, seq)
	watchLat, err := timeN(n, func(int) error {
		nm := name()
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: nm}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == nm {
				return nil
			}
		}
		return fmt.Errorf("watch closed")
	})
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) }
	b.ReportMetric(us(create), "create-µs")
	b.ReportMetric(us(get), "get-µs")
	b.ReportMetric(us(list), "list100-µs")
	b.ReportMetric(us(watchLat), "create+watch-µs")
	b.ReportMetric(us(etcdPut), "etcd-put-µs")
	b.ReportMetric(float64(create)/float64(etcdPut), "create/etcd-put")
	b.ReportMetric(float64(get)/float64(etcdGet), "get/etcd-get")
	b.ReportMetric(float64(watchLat)/float64(create), "create+watch/create")
}

func drain(w watch.Interface, n int) {
	timeout := time.After(10 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-w.ResultChan():
		case <-timeout:
			return
		}
	}
}

// rssKiB reads a /proc/<pid>/status field (VmRSS, RssAnon) in KiB.
func rssKiB(pid int, field string) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			return strconv.Atoi(strings.Fields(l)[1])
		}
	}
	return 0, fmt.Errorf("no %s", field)
}

// BenchmarkIdle reports how long `skiff server` takes to be ready and its idle RSS (10 s after
// ready, a minute after start, and again once the OpenAPI documents have been read), against a
// bare Debian etcd member started in the same run (k3s's server, for scale, idles at 500+ MiB),
// and against the same server with Go's garbage collector target kept at its default
// (`--idle-gc-percent 0`, see internal/gctune), started after it in the same run.
func BenchmarkIdle(b *testing.B) {
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		framework.Certs(b, dir)
		cluster := framework.StartEtcdCluster(b, filepath.Join(dir, "pki"), 1)
		tuned := idleRun(b)
		plain := idleRun(b, "--idle-gc-percent", "0")
		etcd, err := rssKiB(cluster.PID(0), "VmRSS")
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"MiB-rss", "MiB-rss-anon"} {
			for _, when := range []string{"", "-60s", "-openapi"} {
				b.ReportMetric(tuned[name+when], name+when)
				b.ReportMetric(tuned[name+when]/plain[name+when], name+when+"/go-default")
			}
		}
		b.ReportMetric(tuned["s-to-ready"], "s-to-ready")
		b.ReportMetric(float64(etcd)/1024, "etcd-MiB-rss")
		b.ReportMetric(tuned["MiB-rss"]*1024/float64(etcd), "rss/etcd-rss")
	}
}

// idleRun starts a server with extra flags, samples its RSS and its anonymous part (the rest
// is the binary's own mapped code: shared, clean, reclaimable) as BenchmarkIdle says, and
// stops it.
func idleRun(b *testing.B, extra ...string) map[string]float64 {
	s := framework.NewServer(b, b.TempDir(), extra...)
	ready := s.Start()
	defer s.Stop()
	m := map[string]float64{"s-to-ready": ready.Seconds()}
	sample := func(suffix string) {
		rss, err := rssKiB(s.PID(), "VmRSS")
		if err != nil {
			b.Fatal(err)
		}
		anon, err := rssKiB(s.PID(), "RssAnon")
		if err != nil {
			b.Fatal(err)
		}
		m["MiB-rss"+suffix], m["MiB-rss-anon"+suffix] = float64(rss)/1024, float64(anon)/1024
	}
	time.Sleep(10 * time.Second) // let start-up garbage be collected
	sample("")
	// A minute on, start-up's garbage has been given back (the runtime returns freed
	// pages gradually) and the heap breathes between its live size and the GC's goal.
	time.Sleep(50 * time.Second)
	sample("-60s")
	// Then as after a client that reads the OpenAPI documents (kubectl explain, Helm's
	// validation, the conformance suite): v2 and every v3 group-version once.
	client := s.Client(b).Discovery().RESTClient()
	ctx := context.Background()
	if _, err := client.Get().AbsPath("/openapi/v2").DoRaw(ctx); err != nil {
		b.Fatal(err)
	}
	paths, err := s.Client(b).Discovery().OpenAPIV3().Paths()
	if err != nil {
		b.Fatal(err)
	}
	for _, gv := range paths {
		if _, err := gv.Schema("application/json"); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(10 * time.Second)
	sample("-openapi")
	return m
}
