package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// BenchmarkAPIAuthorization measures what RBAC costs a request: ConfigMap create and get by
// a user whom a RoleBinding authorizes, among 1000 RoleBindings in the same namespace,
// against the same requests by a system:masters user (allowed before RBAC is consulted).
// Both authenticate with client certificates, so the ratio is the authorization step alone;
// the two are interleaved so machine noise falls on both.
func BenchmarkAPIAuthorization(b *testing.B) {
	s := framework.StartServer(b)
	admin := protobufClient(b, s)
	ctx := context.Background()
	const ns = "bench-rbac"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-writer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"create", "get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// 1000 bindings for others, then the user's own: the authorizer walks them all.
	for i := 0; i < 1000; i++ {
		if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%04d", i)},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-writer"},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: fmt.Sprintf("user-%d", i)}}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "zz-bench-user"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-writer"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "bench-user"}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	user := userClient(b, s, "bench-user")
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := user.CoreV1().ConfigMaps(ns).Get(ctx, "none", metav1.GetOptions{})
		if err == nil || !strings.Contains(err.Error(), "forbidden") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("binding never took effect: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	value := strings.Repeat("x", 200)
	n := b.N
	seq := 0
	create := func(c kubernetes.Interface) func(int) error {
		return func(int) error {
			seq++
			_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", seq)},
				Data: map[string]string{"v": value}}, metav1.CreateOptions{})
			return err
		}
	}
	get := func(c kubernetes.Interface) func(int) error {
		return func(i int) error {
			_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("cm-%d", i%seq+1), metav1.GetOptions{})
			return err
		}
	}
	b.ResetTimer()
	var adminCreate, userCreate, adminGet, userGet time.Duration
	// Five rounds, alternating, each a median; the figure is the median of the rounds.
	var ac, uc, ag, ug []time.Duration
	for round := 0; round < 5; round++ {
		for _, m := range []struct {
			f   func(int) error
			out *[]time.Duration
		}{{create(admin), &ac}, {create(user), &uc}, {get(admin), &ag}, {get(user), &ug}} {
			d, err := timeN(max(n/5, 1), m.f)
			if err != nil {
				b.Fatal(err)
			}
			*m.out = append(*m.out, d)
		}
	}
	b.StopTimer()
	adminCreate, userCreate, adminGet, userGet = median(ac), median(uc), median(ag), median(ug)
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) }
	b.ReportMetric(us(adminCreate), "masters-create-µs")
	b.ReportMetric(us(userCreate), "rbac-create-µs")
	b.ReportMetric(us(adminGet), "masters-get-µs")
	b.ReportMetric(us(userGet), "rbac-get-µs")
	b.ReportMetric(float64(userCreate)/float64(adminCreate), "rbac/masters-create")
	b.ReportMetric(float64(userGet)/float64(adminGet), "rbac/masters-get")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// userClient is a protobuf client with a client certificate for name, issued by the
// cluster CA with `skiff kubeconfig`.
func userClient(b *testing.B, s *framework.Server, name string) kubernetes.Interface {
	out := filepath.Join(b.TempDir(), "user.kubeconfig")
	if o, err := exec.Command(framework.Binary(b), "kubeconfig", "--data-dir", s.Dir, "--user", name, "--out", out,
		"--server", fmt.Sprintf("https://127.0.0.1:%d", s.Port)).CombinedOutput(); err != nil {
		b.Fatalf("skiff kubeconfig: %v\n%s", err, o)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", out)
	if err != nil {
		b.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf"
	cfg.QPS, cfg.Burst = -1, 0
	return kubernetes.NewForConfigOrDie(cfg)
}
