package rbac

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestNodeAuthorizerKeepsUpWithBinding races binding against the bound node's first
// requests, as an agent does when its watch delivers a pod: right after each binding returns,
// the node reads the pod, one Secret and one ConfigMap the pod uses, and requests a token for
// its service account bound to it. The Node authorizer's view of which pods are on which node
// is an informer that can lag the binding by a few milliseconds; no request of the node may
// be refused for that (issue 40: a refused token request delayed a pod's volume mount in a
// conformance run). A node asking for another node's pod's secret is still refused.
func TestNodeAuthorizerKeepsUpWithBinding(t *testing.T) {
	s := framework.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	acfg := s.RESTConfig(t)
	acfg.QPS, acfg.Burst = -1, 0
	admin, err := kubernetes.NewForConfig(acfg)
	if err != nil {
		t.Fatal(err)
	}

	var cfg *rest.Config
	cfg, err = clientcmd.BuildConfigFromFlags("", user(t, s, "system:node:race-n1", "system:nodes"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // unthrottled: the race is the point
	node, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "node-race"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"race-n1", "race-n2"} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, time.Minute, "the namespace's default service account", func() (bool, string) {
		_, err := admin.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	// Churn, as on a busy cluster: other pods rewritten over and over with large annotations,
	// so every informer of pods in the server has a queue to work through.
	churn, stopChurn := context.WithCancel(ctx)
	var churned sync.WaitGroup
	var churns atomic.Int64
	big := strings.Repeat("x", 200<<10) // under the 256 KiB limit on annotations
	for i := range 3 {
		name := fmt.Sprintf("ballast-%d", i)
		if _, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "skiff.local/pause:1"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		churned.Add(1)
		go func() {
			defer churned.Done()
			for n := 0; churn.Err() == nil; n++ {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"ballast":"%d%s"}}}`, n, big)
				if _, err := admin.CoreV1().Pods(ns).Patch(churn, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && churn.Err() == nil {
					t.Errorf("churn: %v", err)
					return
				}
				churns.Add(1)
			}
		}()
	}

	const workers, perWorker = 8, 10
	var mu sync.Mutex
	var refused []string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				name := fmt.Sprintf("p-%d-%d", w, i)
				if err := bindAndUse(ctx, admin, node, ns, name, "race-n1"); err != nil {
					mu.Lock()
					refused = append(refused, fmt.Sprintf("%s: %v", name, err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	stopChurn()
	churned.Wait()
	t.Logf("%d pods bound and used beside %d rewrites of other pods", workers*perWorker, churns.Load())
	if len(refused) > 0 {
		t.Errorf("%d of %d bound pods' requests refused; first: %s", len(refused), workers*perWorker, refused[0])
	}

	// The other node's pod's objects stay closed to race-n1, after a live read as well.
	if err := bindAndUse(ctx, admin, node, ns, "elsewhere", "race-n2"); !apierrors.IsForbidden(err) {
		t.Errorf("race-n1 reading race-n2's pod's objects: %v, want forbidden", err)
	}
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lookups := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "skiff_node_authorizer_live_lookups_total{result=\""); ok {
			result, value, _ := strings.Cut(rest, "\"} ")
			lookups[result] = value
		}
	}
	// "related": requests the informer alone would have refused (the race this test runs).
	t.Logf("live lookups after a miss: %v", lookups)
	if lookups["unrelated"] == "" {
		t.Errorf("the refusal of race-n2's secret was not counted as an unrelated live lookup: %v", lookups)
	}
}

// bindAndUse makes a pod (with a Secret and a ConfigMap of its own), binds it to target and
// then, as the node, reads the pod, its Secret and ConfigMap and requests its token.
func bindAndUse(ctx context.Context, admin, node kubernetes.Interface, ns, name, target string) error {
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "skiff.local/pause:1"}},
			Volumes: []corev1.Volume{
				{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	if err := admin.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Target: corev1.ObjectReference{Kind: "Node", Name: target}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("admin bind: %w", err)
	}
	if _, err := node.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("get pod: %w", err)
	}
	if _, err := node.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("get secret: %w", err)
	}
	if _, err := node.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("get configmap: %w", err)
	}
	exp := int64(3600)
	if _, err := node.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp, BoundObjectRef: &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: name, UID: pod.UID}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	return nil
}
