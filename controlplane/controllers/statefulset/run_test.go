package statefulset

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// TestRunOrderedScaleUp runs the controller against informers over a fake clientset, with
// a stand-in kubelet that makes every pod Running and Ready: an OrderedReady set comes up
// one pod at a time until all are ready.
func TestRunOrderedScaleUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := fake.NewSimpleClientset(newSet(3))
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory.Apps().V1().StatefulSets(), factory.Core().V1().Pods(), factory.Apps().V1().ControllerRevisions(),
		factory.Core().V1().PersistentVolumeClaims(), record.NewFakeRecorder(100), slog.New(slog.NewTextHandler(io.Discard, nil)))
	factory.Start(ctx.Done())
	go c.Run(ctx)

	maxSeen, rv := 0, 0
	for ctx.Err() == nil {
		pods, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		notReady := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase != corev1.PodRunning {
				notReady++
				p.Status.Phase = corev1.PodRunning
				// The fake does not move resource versions; the controller skips updates that don't.
				rv++
				p.ResourceVersion = strconv.Itoa(rv)
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
				if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Ordered: never two pods coming up at once.
		if notReady > 1 {
			t.Fatalf("%d pods not ready at once", notReady)
		}
		maxSeen = max(maxSeen, len(pods.Items))
		set, _ := client.AppsV1().StatefulSets("default").Get(ctx, "web", metav1.GetOptions{})
		if st := set.Status; st.ReadyReplicas == 3 && st.CurrentRevision != "" && st.CurrentRevision == st.UpdateRevision && st.UpdatedReplicas == 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ctx.Err() != nil || maxSeen != 3 {
		set, _ := client.AppsV1().StatefulSets("default").Get(context.Background(), "web", metav1.GetOptions{})
		t.Fatalf("set did not come up: %d pods seen, status %+v", maxSeen, set.Status)
	}
	revs, _ := client.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{})
	if len(revs.Items) != 1 || metav1.GetControllerOf(&revs.Items[0]).Kind != appsv1.SchemeGroupVersion.WithKind("StatefulSet").Kind {
		t.Fatalf("revisions %+v", revs.Items)
	}
}
