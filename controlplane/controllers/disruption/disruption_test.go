package disruption

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// TestSyncExpectsTheControllersScale: with maxUnavailable the expected pods are the
// controllers' replicas (a Deployment through its ReplicaSet, and a ReplicationController),
// not the pods that happen to exist.
func TestSyncExpectsTheControllersScale(t *testing.T) {
	five, two := int32(5), int32(2)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", UID: "d-uid"}, Spec: appsv1.DeploymentSpec{Replicas: &five}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "d-1", Namespace: "ns", UID: "rs-uid",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}}, Spec: appsv1.ReplicaSetSpec{Replicas: &five}}
	rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "rc-uid"}, Spec: corev1.ReplicationControllerSpec{Replicas: &two}}
	objs := []runtime.Object{d, rs, rc}
	owners := []metav1.Object{rs, rs, rs, rc}
	kinds := []string{"ReplicaSet", "ReplicaSet", "ReplicaSet", "ReplicationController"}
	for i, o := range owners {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Namespace: "ns", Labels: map[string]string{"app": "a"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: kinds[i], Name: o.GetName(), UID: types.UID(o.GetUID()), Controller: ptrTrue()}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}
	objs = append(objs, pdb)
	client := fake.NewSimpleClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	c := New(client, f.Policy().V1().PodDisruptionBudgets(), f.Core().V1().Pods(), f.Apps().V1().ReplicaSets(), f.Core().V1().ReplicationControllers(),
		f.Apps().V1().Deployments(), record.NewFakeRecorder(10), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *appsv1.Deployment:
			err = f.Apps().V1().Deployments().Informer().GetIndexer().Add(o)
		case *appsv1.ReplicaSet:
			err = f.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
		case *corev1.ReplicationController:
			err = f.Core().V1().ReplicationControllers().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = f.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *policyv1.PodDisruptionBudget:
			err = f.Policy().V1().PodDisruptionBudgets().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := c.sync(context.Background(), "ns/b"); err != nil {
		t.Fatal(err)
	}
	got, _ := client.PolicyV1().PodDisruptionBudgets("ns").Get(context.Background(), "b", metav1.GetOptions{})
	// Expected 5 (the Deployment, once for its ReplicaSet's three pods) + 2 (the RC) = 7;
	// desired 6; four healthy pods: nothing may go.
	if s := got.Status; s.ExpectedPods != 7 || s.DesiredHealthy != 6 || s.CurrentHealthy != 4 || s.DisruptionsAllowed != 0 || s.ObservedGeneration != 1 {
		t.Errorf("status %+v", s)
	}
}

func ptrTrue() *bool { b := true; return &b }
