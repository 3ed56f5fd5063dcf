package ttlafterfinished

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
)

var now = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

type jobOpt func(*batchv1.Job)

func newJob(opts ...jobOpt) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default", UID: "pi-uid", ResourceVersion: "7"}}
	for _, o := range opts {
		o(j)
	}
	return j
}

func ttl(s int32) jobOpt { return func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = &s } }

func condAt(t batchv1.JobConditionType, s corev1.ConditionStatus, at time.Time) jobOpt {
	return func(j *batchv1.Job) {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: t, Status: s, LastTransitionTime: metav1.Time{Time: at}})
	}
}

func completedAt(at time.Time) jobOpt { return condAt(batchv1.JobComplete, corev1.ConditionTrue, at) }

func completionTime(at time.Time) jobOpt {
	return func(j *batchv1.Job) { j.Status.CompletionTime = &metav1.Time{Time: at} }
}

func TestTimeLeft(t *testing.T) {
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	cases := []struct {
		name   string
		job    *batchv1.Job
		want   time.Duration
		wantOK bool
	}{
		{name: "no TTL", job: newJob(completedAt(ago(time.Hour)))},
		{name: "not finished", job: newJob(ttl(10))},
		{name: "success criteria met, pods still terminating", job: newJob(ttl(10), condAt(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, ago(time.Hour)))},
		{name: "failure target, pods still terminating", job: newJob(ttl(10), condAt(batchv1.JobFailureTarget, corev1.ConditionTrue, ago(time.Hour)))},
		{name: "Complete but False", job: newJob(ttl(10), condAt(batchv1.JobComplete, corev1.ConditionFalse, ago(time.Hour)))},
		{name: "being deleted", job: newJob(ttl(10), completedAt(ago(time.Hour)), func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: now} })},
		{name: "complete, time left", job: newJob(ttl(100), completedAt(ago(30*time.Second))), want: 70 * time.Second, wantOK: true},
		{name: "complete, expired", job: newJob(ttl(100), completedAt(ago(101*time.Second))), want: -time.Second, wantOK: true},
		{name: "expires exactly now", job: newJob(ttl(100), completedAt(ago(100*time.Second))), want: 0, wantOK: true},
		{name: "failed counts too", job: newJob(ttl(60), condAt(batchv1.JobFailed, corev1.ConditionTrue, ago(10*time.Second))), want: 50 * time.Second, wantOK: true},
		{name: "TTL 0: expired on finishing", job: newJob(ttl(0), completedAt(now)), want: 0, wantOK: true},
		{name: "counts from the final condition, not from SuccessCriteriaMet",
			job:  newJob(ttl(60), condAt(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, ago(time.Hour)), completedAt(ago(10*time.Second))),
			want: 50 * time.Second, wantOK: true},
		{name: "no transition time: completionTime", job: newJob(ttl(60), completedAt(time.Time{}), completionTime(ago(20*time.Second))), want: 40 * time.Second, wantOK: true},
		{name: "the transition time wins over completionTime", job: newJob(ttl(60), completedAt(ago(5*time.Second)), completionTime(ago(time.Hour))), want: 55 * time.Second, wantOK: true},
		{name: "no time at all", job: newJob(ttl(60), condAt(batchv1.JobFailed, corev1.ConditionTrue, time.Time{}))},
		{name: "finished in the future (skew): more than the TTL left", job: newJob(ttl(60), completedAt(now.Add(time.Minute))), want: 2 * time.Minute, wantOK: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := TimeLeft(tc.job, now)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("TimeLeft = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

type requeue struct {
	key string
	d   time.Duration
}

type fixture struct {
	c        *Controller
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	requeues []requeue
}

// newFixture seeds the API with api and the informer cache with cached, so a test can make
// the cache lag the API.
func newFixture(t *testing.T, api []runtime.Object, cached ...*batchv1.Job) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset(api...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory.Batch().V1().Jobs(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	f := &fixture{c: c, client: client, factory: factory}
	c.now = func() time.Time { return now }
	c.after = func(key string, d time.Duration) { f.requeues = append(f.requeues, requeue{key, d}) }
	for _, j := range cached {
		_ = factory.Batch().V1().Jobs().Informer().GetIndexer().Add(j)
	}
	return f
}

func (f *fixture) sync(t *testing.T) error {
	t.Helper()
	return f.c.sync(context.Background(), "default/pi")
}

func (f *fixture) verbs() []string {
	var out []string
	for _, a := range f.client.Actions() {
		out = append(out, a.GetVerb())
	}
	return out
}

func TestSyncDeletesExpiredJob(t *testing.T) {
	j := newJob(ttl(60), completedAt(now.Add(-time.Hour)))
	f := newFixture(t, []runtime.Object{j}, j)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if got := f.verbs(); !reflect.DeepEqual(got, []string{"get", "delete"}) {
		t.Fatalf("API calls %v, want a fresh get, then the delete", got)
	}
	fresh, del := f.client.Actions()[0].(ktesting.GetAction), f.client.Actions()[1].(ktesting.DeleteAction)
	if fresh.GetName() != "pi" || del.GetName() != "pi" || del.GetNamespace() != "default" {
		t.Errorf("got %s, deleted %s/%s", fresh.GetName(), del.GetNamespace(), del.GetName())
	}
	opts := del.GetDeleteOptions()
	if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationForeground {
		t.Errorf("propagation %v, want Foreground", opts.PropagationPolicy)
	}
	if p := opts.Preconditions; p == nil || p.UID == nil || *p.UID != "pi-uid" || p.ResourceVersion == nil || *p.ResourceVersion != "7" {
		t.Errorf("preconditions %+v, want the fresh copy's UID and resourceVersion", p)
	}
	if _, err := f.client.BatchV1().Jobs("default").Get(context.Background(), "pi", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("job still there: %v", err)
	}
	if len(f.requeues) != 0 {
		t.Errorf("requeues %v after deleting", f.requeues)
	}
}

func TestSyncWaitsForExpiry(t *testing.T) {
	cases := []struct {
		name       string
		finished   time.Duration // before now
		wantLeft   time.Duration // requeued after; 0: deleted
		wantDelete bool
	}{
		{"40s left", 20 * time.Second, 40 * time.Second, false},
		{"a millisecond left", 60*time.Second - time.Millisecond, time.Millisecond, false},
		{"expires exactly now", 60 * time.Second, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob(ttl(60), completedAt(now.Add(-tc.finished)))
			f := newFixture(t, []runtime.Object{j}, j)
			if err := f.sync(t); err != nil {
				t.Fatal(err)
			}
			if tc.wantDelete {
				if got := f.verbs(); !reflect.DeepEqual(got, []string{"get", "delete"}) || len(f.requeues) != 0 {
					t.Errorf("API calls %v requeues %v, want the delete", got, f.requeues)
				}
				return
			}
			if got := f.verbs(); len(got) != 0 {
				t.Errorf("API calls %v before the TTL ran out", got)
			}
			if want := []requeue{{"default/pi", tc.wantLeft}}; !reflect.DeepEqual(f.requeues, want) {
				t.Errorf("requeues %v, want %v", f.requeues, want)
			}
		})
	}
}

func TestSyncLeavesJobsAlone(t *testing.T) {
	for name, j := range map[string]*batchv1.Job{
		"no TTL":         newJob(completedAt(now.Add(-time.Hour))),
		"running":        newJob(ttl(0)),
		"being deleted":  newJob(ttl(0), completedAt(now.Add(-time.Hour)), func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: now} }),
		"no finish time": newJob(ttl(0), condAt(batchv1.JobFailed, corev1.ConditionTrue, time.Time{})),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, []runtime.Object{j}, j)
			if err := f.sync(t); err != nil {
				t.Fatal(err)
			}
			if got := f.verbs(); len(got) != 0 || len(f.requeues) != 0 {
				t.Errorf("API calls %v, requeues %v", got, f.requeues)
			}
		})
	}
	t.Run("not in the cache", func(t *testing.T) {
		f := newFixture(t, []runtime.Object{newJob(ttl(0), completedAt(now.Add(-time.Hour)))})
		if err := f.sync(t); err != nil {
			t.Fatal(err)
		}
		if got := f.verbs(); len(got) != 0 {
			t.Errorf("API calls %v", got)
		}
	})
}

func TestSyncTrustsOnlyTheFreshCopy(t *testing.T) {
	cached := newJob(ttl(60), completedAt(now.Add(-time.Hour)))
	t.Run("TTL raised since the cache saw it", func(t *testing.T) {
		fresh := newJob(ttl(7200), completedAt(now.Add(-time.Hour)))
		f := newFixture(t, []runtime.Object{fresh}, cached)
		if err := f.sync(t); err != nil {
			t.Fatal(err)
		}
		if got := f.verbs(); !reflect.DeepEqual(got, []string{"get"}) {
			t.Errorf("API calls %v, want only the get", got)
		}
		if want := []requeue{{"default/pi", time.Hour}}; !reflect.DeepEqual(f.requeues, want) {
			t.Errorf("requeues %v, want %v (by the fresh TTL)", f.requeues, want)
		}
	})
	t.Run("TTL removed", func(t *testing.T) {
		fresh := newJob(completedAt(now.Add(-time.Hour)))
		f := newFixture(t, []runtime.Object{fresh}, cached)
		if err := f.sync(t); err != nil {
			t.Fatal(err)
		}
		if got := f.verbs(); !reflect.DeepEqual(got, []string{"get"}) || len(f.requeues) != 0 {
			t.Errorf("API calls %v requeues %v", got, f.requeues)
		}
	})
	t.Run("replaced by a new job of that name", func(t *testing.T) {
		fresh := newJob(ttl(60), func(j *batchv1.Job) { j.UID = types.UID("new-uid") })
		f := newFixture(t, []runtime.Object{fresh}, cached)
		if err := f.sync(t); err != nil {
			t.Fatal(err)
		}
		if got := f.verbs(); !reflect.DeepEqual(got, []string{"get"}) {
			t.Errorf("API calls %v, want no delete of the running replacement", got)
		}
	})
	t.Run("already gone", func(t *testing.T) {
		f := newFixture(t, nil, cached)
		if err := f.sync(t); err != nil {
			t.Fatal(err)
		}
		if got := f.verbs(); !reflect.DeepEqual(got, []string{"get"}) {
			t.Errorf("API calls %v", got)
		}
	})
}

func TestSyncDeleteErrors(t *testing.T) {
	j := newJob(ttl(60), completedAt(now.Add(-time.Hour)))
	cases := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"changed after the get: retried", apierrors.NewConflict(batchv1.Resource("jobs"), "pi", errors.New("precondition failed")), true},
		{"deleted meanwhile: done", apierrors.NewNotFound(batchv1.Resource("jobs"), "pi"), false},
		{"API down: retried", apierrors.NewServiceUnavailable("etcd"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []runtime.Object{j}, j)
			f.client.PrependReactor("delete", "jobs", func(ktesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			if err := f.sync(t); (err != nil) != tc.wantErr {
				t.Errorf("err %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}

func TestJobEventsQueueOnlyCandidates(t *testing.T) {
	f := newFixture(t, nil)
	f.c.jobEvent(newJob(ttl(60)))                                                                   // running
	f.c.jobEvent(newJob(completedAt(now)))                                                          // no TTL
	f.c.jobEvent(newJob(ttl(60), condAt(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, now))) // not finished yet
	if n := f.c.loop.Len(); n != 0 {
		t.Fatalf("%d keys queued for jobs that need no cleanup", n)
	}
	f.c.jobEvent(newJob(ttl(60), completedAt(now)))
	if n := f.c.loop.Len(); n != 1 {
		t.Fatalf("%d keys queued for a finished job with a TTL, want 1", n)
	}
}
