package kubectl

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestPriorityAndFairness checks API Priority and Fairness end to end: upstream's bootstrap
// configuration is in place, requests are classified (the response headers name the
// FlowSchema), and a user flooding LISTs into a small, rejecting priority level is turned
// away with 429s while a node's Lease renewals, classified as system, all succeed.
func TestPriorityAndFairness(t *testing.T) {
	s := framework.StartServer(t)
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := s.Run(ctx, kc, "get", "flowschemas,prioritylevelconfigurations")
	for _, want := range []string{"exempt", "catch-all", "system-nodes", "global-default", "workload-low", "leader-election", "PRIORITYLEVEL", "NOMINALCONCURRENCYSHARES"} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("bootstrap configuration lacks %q: %v\n%s", want, err, out)
		}
	}
	admin := s.Client(t)
	// client-go retries 429s itself, so the answers are counted on the wire.
	var rejected, listed atomic.Int32
	impersonate := func(user string, groups ...string) kubernetes.Interface {
		cfg := rest.CopyConfig(s.RESTConfig(t))
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
		cfg.QPS, cfg.Burst = 1000, 1000
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripper(func(r *http.Request) (*http.Response, error) {
				resp, err := rt.RoundTrip(r)
				if err == nil && resp.StatusCode == http.StatusTooManyRequests && user == "flooder" {
					rejected.Add(1)
				}
				return resp, err
			})
		}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// Classified: the answer names the FlowSchema and the priority level.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.RESTConfig(t).Host+"/api/v1/namespaces", nil)
	tr, err := rest.TransportFor(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	headers := resp.Header
	if headers.Get("X-Kubernetes-Pf-Flowschema-Uid") == "" || headers.Get("X-Kubernetes-Pf-Prioritylevel-Uid") == "" {
		t.Errorf("no APF headers: %v", headers)
	}

	// A small level that rejects, for one user.
	if _, err := admin.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "flood"}, Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To[int32](1), BorrowingLimitPercent: ptr.To[int32](0),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.FlowcontrolV1().FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "flood"}, Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "flood"}, MatchingPrecedence: 100,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "flooder"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					ClusterScope: true, Namespaces: []string{"*"}}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bulk-%d", i)}, Data: map[string]string{"d": strings.Repeat("x", 16<<10)}}
		if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "apf-node"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("apf-node")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	flooder := impersonate("flooder")
	// The flooder lists with every permission it could want (cluster-admin), so only APF stops it.
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, clusterAdminFor("flooder"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := impersonate("system:node:apf-node", "system:nodes", "system:authenticated")

	// The configuration takes effect when the APF controller has seen it.
	time.Sleep(2 * time.Second)
	floodCtx, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for g := 0; g < 40; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for floodCtx.Err() == nil {
				if _, err := flooder.CoreV1().ConfigMaps("default").List(floodCtx, metav1.ListOptions{}); err == nil {
					listed.Add(1)
				}
			}
		}()
	}
	var renewals, failures int
	var lastErr error
	for i := 0; i < 30; i++ {
		l, err := node.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "apf-node", metav1.GetOptions{})
		if err == nil {
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, err = node.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil {
			failures, lastErr = failures+1, err
		} else {
			renewals++
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopFlood()
	wg.Wait()
	if failures > 0 {
		t.Errorf("%d of 30 lease renewals failed under the flood (last: %v)", failures, lastErr)
	}
	if rejected.Load() == 0 {
		t.Errorf("the flood was never rejected (%d lists served)", listed.Load())
	}
	t.Logf("lease renewals %d/30; flood: %d lists served, %d rejected with 429", renewals, listed.Load(), rejected.Load())
}

func clusterAdminFor(user string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "apf-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
