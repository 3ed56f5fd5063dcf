package nodeauth

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// laggingSource is a Source whose informer has not seen the pods in fresh yet; its live read
// sees them (or fails with liveErr).
type laggingSource struct {
	*fakeSource
	fresh   []*corev1.Pod
	liveErr error
	reads   int
}

func (s *laggingSource) LivePodsOnNode(_ context.Context, node string) ([]*corev1.Pod, error) {
	s.reads++
	if s.liveErr != nil {
		return nil, s.liveErr
	}
	pods, _ := s.fakeSource.PodsOnNode(node)
	for _, p := range s.fresh {
		if p.Spec.NodeName == node {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// A pod just bound to n1, which the informer has not delivered: its token, Secret and the
// pod itself are n1's at once; other nodes' objects stay closed; hits in the informer never
// pay for a live read; and a live read that fails refuses with its error.
func TestLiveReadOnMiss(t *testing.T) {
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa-new", Volumes: []corev1.Volume{{Name: "v",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "new-secret"}}}}}}
	node2 := &user.DefaultInfo{Name: "system:node:n2", Groups: []string{user.NodesGroup}}
	src := &laggingSource{fakeSource: world(), fresh: []*corev1.Pod{bound}}
	run(t, src, []tcase{
		{name: "token of a pod the informer lags", attrs: req(node1, "create /serviceaccounts/token ns/sa-new"), allow: true},
		{name: "secret of a pod the informer lags", attrs: req(node1, "get /secrets ns/new-secret"), allow: true},
		{name: "the pod itself", attrs: req(node1, "get /pods ns/new"), allow: true},
		{name: "another node's pod's secret", attrs: req(node2, "get /secrets ns/new-secret"), reason: "no relationship found between node 'n2'"},
	})

	src.reads = 0
	az := New(src, testNodeRules())
	if d, _, _ := az.Authorize(context.Background(), req(node1, "get /secrets ns/vol-secret")); d != authorizer.DecisionAllow || src.reads != 0 {
		t.Fatalf("a relationship the informer has: %v after %d live reads, want allowed after none", d, src.reads)
	}
	if d, _, _ := az.Authorize(context.Background(), req(node1, "get /secrets ns/nobodys")); d == authorizer.DecisionAllow || src.reads != 1 {
		t.Fatalf("an unrelated secret: %v after %d live reads, want refused after one", d, src.reads)
	}

	src.liveErr = errors.New("etcd unavailable")
	d, reason, err := az.Authorize(context.Background(), req(node1, "get /secrets ns/new-secret"))
	if d == authorizer.DecisionAllow || err == nil || !strings.Contains(err.Error(), "etcd unavailable") || !strings.Contains(reason, noRelation) {
		t.Fatalf("live read failing: %v %q %v, want a refusal with the read's error", d, reason, err)
	}
}
