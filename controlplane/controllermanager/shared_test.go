package controllermanager

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestStartedInformers(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	pods := factory.Core().V1().Pods().Informer()
	replicaSets := factory.Apps().V1().ReplicaSets().Informer()
	shared := startedInformers(factory)
	pod, rs := corev1.SchemeGroupVersion.WithKind("Pod"), appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	podsGVR, rsGVR := corev1.SchemeGroupVersion.WithResource("pods"), appsv1.SchemeGroupVersion.WithResource("replicasets")
	if inf := shared(podsGVR, pod); inf != nil {
		t.Fatal("an informer that has not started is offered")
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	// client-go hands out a fresh typed wrapper each time: the informer behind it is the same
	// when its indexer is.
	if inf := shared(podsGVR, pod); inf == nil || inf.GetIndexer() != pods.GetIndexer() {
		t.Fatalf("pods: got %v, want the started informer", inf)
	}
	if inf := shared(rsGVR, rs); inf == nil || inf.GetIndexer() != replicaSets.GetIndexer() {
		t.Fatalf("replicasets: got %v, want the started informer", inf)
	}
	// No controller asked for Secrets: the collector keeps to their metadata, and asking must
	// not create a typed informer behind its back.
	if inf := shared(corev1.SchemeGroupVersion.WithResource("secrets"), corev1.SchemeGroupVersion.WithKind("Secret")); inf != nil {
		t.Fatal("secrets: an informer nobody started is offered")
	}
	if got := startedKinds(factory); got.Len() != 2 || !got.Has(pod) || !got.Has(rs) {
		t.Fatalf("started kinds %v, want Pod and ReplicaSet", got.UnsortedList())
	}
}
