package cronjob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
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
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

var (
	created = utc(2024, 5, 1, 8, 30, 0)
	nine    = utc(2024, 5, 1, 9, 0, 0)
	now     = nine.Add(5 * time.Second)
)

type requeue struct {
	key string
	d   time.Duration
}

type fixture struct {
	c        *Controller
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	recorder *record.FakeRecorder
	requeues []requeue
}

// newFixture builds the controller over a fake clientset seeded with api; cached objects
// are put straight into the informer caches (so a test can make the cache lag the API).
func newFixture(t *testing.T, api []runtime.Object, cached ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset(api...)
	// The fake tracker assigns no UIDs: give created jobs one, as the API would.
	client.PrependReactor("create", "jobs", func(a ktesting.Action) (bool, runtime.Object, error) {
		j := a.(ktesting.CreateAction).GetObject().(*batchv1.Job)
		if j.UID == "" {
			j.UID = types.UID(j.Name + "-uid")
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	c := New(client, factory.Batch().V1().CronJobs(), factory.Batch().V1().Jobs(), recorder, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f := &fixture{c: c, client: client, factory: factory, recorder: recorder}
	c.now = func() time.Time { return now }
	c.local = time.UTC
	c.after = func(key string, d time.Duration) { f.requeues = append(f.requeues, requeue{key, d}) }
	for _, o := range cached {
		f.cache(o)
	}
	return f
}

// both seeds objs into the API and the cache alike.
func both(t *testing.T, objs ...runtime.Object) *fixture {
	return newFixture(t, objs, objs...)
}

func (f *fixture) cache(o runtime.Object) {
	switch o := o.(type) {
	case *batchv1.CronJob:
		_ = f.factory.Batch().V1().CronJobs().Informer().GetIndexer().Add(o)
	case *batchv1.Job:
		_ = f.factory.Batch().V1().Jobs().Informer().GetIndexer().Add(o)
	}
}

func (f *fixture) sync(t *testing.T) error {
	t.Helper()
	return f.c.sync(context.Background(), "default/backup")
}

func (f *fixture) actions(verb, resource string) []ktesting.Action {
	var out []ktesting.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			out = append(out, a)
		}
	}
	return out
}

// status is the one status update the sync wrote (failing the test if it wrote another number).
func (f *fixture) status(t *testing.T) batchv1.CronJobStatus {
	t.Helper()
	upd := f.actions("update", "cronjobs")
	if len(upd) != 1 || upd[0].GetSubresource() != "status" {
		t.Fatalf("cronjob updates %v, want one status update", upd)
	}
	return upd[0].(ktesting.UpdateAction).GetObject().(*batchv1.CronJob).Status
}

func (f *fixture) noStatusUpdate(t *testing.T) {
	t.Helper()
	if upd := f.actions("update", "cronjobs"); len(upd) != 0 {
		t.Errorf("status written: %+v", upd[0].(ktesting.UpdateAction).GetObject().(*batchv1.CronJob).Status)
	}
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) wantEvents(t *testing.T, want ...string) {
	t.Helper()
	got := f.events()
	if len(got) != len(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d %q, want %q...", i, got[i], want[i])
		}
	}
}

func ownedJob(cj *batchv1.CronJob, name string, opts ...jobOpt) *batchv1.Job {
	j := job(name, opts...)
	j.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))}
	return j
}

func activeNames(s batchv1.CronJobStatus) []string {
	var out []string
	for _, r := range s.Active {
		out = append(out, r.Name)
	}
	return out
}

var jobAtNine = fmt.Sprintf("backup-%d", nine.Unix()/60)

func TestSyncCreatesDueJob(t *testing.T) {
	cj := newCronJob("0 * * * *", created)
	f := both(t, cj)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	creates := f.actions("create", "jobs")
	if len(creates) != 1 {
		t.Fatalf("%d job creations, want 1", len(creates))
	}
	j := creates[0].(ktesting.CreateAction).GetObject().(*batchv1.Job)
	if j.Name != jobAtNine || creates[0].GetNamespace() != "default" {
		t.Errorf("created %s/%s, want default/%s", creates[0].GetNamespace(), j.Name, jobAtNine)
	}
	if j.Annotations[batchv1.CronJobScheduledTimestampAnnotation] != "2024-05-01T09:00:00Z" || j.Labels["app"] != "backup" {
		t.Errorf("labels %v annotations %v", j.Labels, j.Annotations)
	}
	if ref := metav1.GetControllerOf(j); ref == nil || ref.UID != cj.UID {
		t.Errorf("controller ref %+v", ref)
	}
	st := f.status(t)
	if len(st.Active) != 1 {
		t.Fatalf("active %+v, want the new job", st.Active)
	}
	want := corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: "default", Name: jobAtNine, UID: types.UID(jobAtNine + "-uid")}
	if got := st.Active[0]; got.Kind != want.Kind || got.APIVersion != want.APIVersion || got.Namespace != want.Namespace || got.Name != want.Name || got.UID != want.UID {
		t.Errorf("active ref %+v, want %+v", got, want)
	}
	if st.LastScheduleTime == nil || !st.LastScheduleTime.Time.Equal(nine) {
		t.Errorf("lastScheduleTime %v, want %v", st.LastScheduleTime, nine)
	}
	f.wantEvents(t, "Normal SuccessfulCreate Created job "+jobAtNine)
	if !reflect.DeepEqual(f.requeues, []requeue{{"default/backup", time.Hour - 5*time.Second + requeueDelta}}) {
		t.Errorf("requeues %v, want one for 10:00", f.requeues)
	}
}

func TestSyncNothingDue(t *testing.T) {
	cj := newCronJob("0 * * * *", created, lastScheduled(nine))
	f := both(t, cj)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if a := f.client.Actions(); len(a) != 0 {
		t.Errorf("API calls %v, want none", a)
	}
	f.wantEvents(t)
	if len(f.requeues) != 1 || f.requeues[0].d != time.Hour-5*time.Second+requeueDelta {
		t.Errorf("requeues %v", f.requeues)
	}
}

func TestSyncSuspendedNeitherStartsNorRequeues(t *testing.T) {
	f := both(t, newCronJob("0 * * * *", created, suspended))
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "jobs")); n != 0 {
		t.Errorf("%d jobs created while suspended", n)
	}
	if len(f.requeues) != 0 {
		t.Errorf("requeued %v while suspended", f.requeues)
	}
}

func TestSyncCronJobGone(t *testing.T) {
	f := both(t)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if a := f.client.Actions(); len(a) != 0 || len(f.requeues) != 0 {
		t.Errorf("API calls %v requeues %v for a deleted CronJob", a, f.requeues)
	}
}

func TestSyncAlreadyExists(t *testing.T) {
	cj := newCronJob("0 * * * *", created)
	t.Run("made by an earlier sync, not cached yet", func(t *testing.T) {
		existing := ownedJob(cj, jobAtNine)
		existing.UID = "earlier-uid"
		f := newFixture(t, []runtime.Object{cj, existing}, cj)
		if err := f.sync(t); err != nil {
			t.Fatal(err)
		}
		st := f.status(t)
		if len(st.Active) != 1 || st.Active[0].UID != "earlier-uid" || st.LastScheduleTime == nil || !st.LastScheduleTime.Time.Equal(nine) {
			t.Errorf("status %+v, want the existing job active", st)
		}
		f.wantEvents(t) // it was not created now
	})
	t.Run("made by an earlier sync, cached", func(t *testing.T) {
		existing := ownedJob(cj, jobAtNine)
		f := both(t, cj, existing)
		if err := f.sync(t); err != nil {
			t.Fatal(err)
		}
		if got := activeNames(f.status(t)); !reflect.DeepEqual(got, []string{jobAtNine}) {
			t.Errorf("active %v", got)
		}
		f.wantEvents(t, "Warning UnexpectedJob Saw a job that the controller did not create or forgot: "+jobAtNine)
	})
	t.Run("someone else's job of that name", func(t *testing.T) {
		foreign := job(jobAtNine)
		f := both(t, cj, foreign)
		if err := f.sync(t); err != nil {
			t.Fatal(err)
		}
		f.noStatusUpdate(t)
		f.wantEvents(t)
		if len(f.requeues) != 1 {
			t.Errorf("requeues %v, want the next start time", f.requeues)
		}
	})
}

func TestSyncCreateFails(t *testing.T) {
	cj := newCronJob("0 * * * *", created)
	t.Run("quota", func(t *testing.T) {
		f := both(t, cj)
		f.client.PrependReactor("create", "jobs", func(ktesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(batchv1.Resource("jobs"), jobAtNine, errors.New("exceeded quota"))
		})
		if err := f.sync(t); err == nil {
			t.Fatal("no error")
		}
		f.noStatusUpdate(t)
		f.wantEvents(t, "Warning FailedCreate Error creating job: ")
	})
	t.Run("namespace terminating", func(t *testing.T) {
		f := both(t, cj)
		f.client.PrependReactor("create", "jobs", func(ktesting.Action) (bool, runtime.Object, error) {
			err := apierrors.NewForbidden(batchv1.Resource("jobs"), jobAtNine, errors.New("namespace default is being terminated"))
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
			return true, nil, err
		})
		if err := f.sync(t); err == nil {
			t.Fatal("no error")
		}
		f.noStatusUpdate(t)
		f.wantEvents(t)
	})
}

func TestSyncForbid(t *testing.T) {
	cj := newCronJob("0 * * * *", created, policy(batchv1.ForbidConcurrent), lastScheduled(nine.Add(-time.Hour)), withActive("backup-old"))
	running := ownedJob(cj, "backup-old")
	f := both(t, cj, running)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "jobs")); n != 0 {
		t.Errorf("%d jobs created under Forbid with one running", n)
	}
	f.noStatusUpdate(t)
	f.wantEvents(t, "Normal JobAlreadyActive")
	if len(f.requeues) != 1 {
		t.Errorf("requeues %v", f.requeues)
	}
	// A job of another CronJob (same name, other UID) does not hold it back.
	other := newCronJob("0 * * * *", created)
	other.UID = "other-uid"
	cj2 := newCronJob("0 * * * *", created, policy(batchv1.ForbidConcurrent), lastScheduled(nine.Add(-time.Hour)))
	f = both(t, cj2, ownedJob(other, "backup-theirs"))
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "jobs")); n != 1 {
		t.Errorf("%d jobs created, want 1: the running job is not this CronJob's", n)
	}
}

func TestSyncReplace(t *testing.T) {
	cj := newCronJob("0 * * * *", created, policy(batchv1.ReplaceConcurrent), lastScheduled(nine.Add(-time.Hour)), withActive("backup-old"))
	running := ownedJob(cj, "backup-old")
	f := both(t, cj, running)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	dels := f.actions("delete", "jobs")
	if len(dels) != 1 || dels[0].(ktesting.DeleteAction).GetName() != "backup-old" {
		t.Fatalf("deletions %v, want backup-old", dels)
	}
	opts := dels[0].(ktesting.DeleteAction).GetDeleteOptions()
	if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationBackground ||
		opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "backup-old-uid" {
		t.Errorf("delete options %+v", opts)
	}
	if n := len(f.actions("create", "jobs")); n != 1 {
		t.Fatalf("%d creations, want 1", n)
	}
	// The deletion comes first: the replaced job must not run alongside its replacement.
	var order []string
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource == "jobs" {
			order = append(order, a.GetVerb())
		}
	}
	if !reflect.DeepEqual(order, []string{"delete", "create"}) {
		t.Errorf("job calls %v, want delete then create", order)
	}
	if got := activeNames(f.status(t)); !reflect.DeepEqual(got, []string{jobAtNine}) {
		t.Errorf("active %v, want only the replacement", got)
	}
	f.wantEvents(t, "Normal SuccessfulDelete Deleted job backup-old", "Normal SuccessfulCreate Created job "+jobAtNine)
}

func TestSyncReplaceDeleteFails(t *testing.T) {
	cj := newCronJob("0 * * * *", created, policy(batchv1.ReplaceConcurrent), lastScheduled(nine.Add(-time.Hour)), withActive("backup-old"))
	f := both(t, cj, ownedJob(cj, "backup-old"))
	f.client.PrependReactor("delete", "jobs", func(ktesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
	})
	if err := f.sync(t); err == nil {
		t.Fatal("no error")
	}
	if n := len(f.actions("create", "jobs")); n != 0 {
		t.Errorf("%d jobs created although the old one could not be deleted", n)
	}
	f.noStatusUpdate(t)
	f.wantEvents(t, "Warning FailedDelete")
}

func TestSyncTracksFinishedJobs(t *testing.T) {
	cj := newCronJob("0 * * * *", created, lastScheduled(nine), withActive("backup-a", "backup-b", "backup-c"))
	done := func(at time.Time) jobOpt {
		return func(j *batchv1.Job) { j.Status.CompletionTime = &metav1.Time{Time: at} }
	}
	a := ownedJob(cj, "backup-a", complete, done(nine.Add(-50*time.Minute)))
	b := ownedJob(cj, "backup-b", failed)
	c := ownedJob(cj, "backup-c") // still running
	// Not active (an older run) but finished later than a: its time is the last success.
	old := ownedJob(cj, "backup-older", complete, done(nine.Add(-10*time.Minute)))
	f := both(t, cj, a, b, c, old)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	st := f.status(t)
	if got := activeNames(st); !reflect.DeepEqual(got, []string{"backup-c"}) {
		t.Errorf("active %v, want backup-c", got)
	}
	if st.LastSuccessfulTime == nil || !st.LastSuccessfulTime.Time.Equal(nine.Add(-10*time.Minute)) {
		t.Errorf("lastSuccessfulTime %v, want 08:50", st.LastSuccessfulTime)
	}
	f.wantEvents(t, "Normal SawCompletedJob Saw completed job: backup-a, condition: Complete",
		"Normal SawCompletedJob Saw completed job: backup-b, condition: Failed")
}

func TestSyncActiveJobsMissingFromCache(t *testing.T) {
	cj := newCronJob("0 * * * *", created, lastScheduled(nine), withActive("backup-gone", "backup-new", "backup-reused"))
	justCreated := ownedJob(cj, "backup-new")
	reused := ownedJob(cj, "backup-reused")
	reused.UID = "someone-elses-uid" // same name, another object
	// Only the API knows these jobs; the watch has not delivered them.
	f := newFixture(t, []runtime.Object{cj, justCreated, reused}, cj)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if got := activeNames(f.status(t)); !reflect.DeepEqual(got, []string{"backup-new"}) {
		t.Errorf("active %v, want only the job the API still has", got)
	}
	f.wantEvents(t, "Normal MissingJob Active job went missing: backup-gone", "Normal MissingJob Active job went missing: backup-reused")
}

func TestSyncStaleCronJobCache(t *testing.T) {
	cj := newCronJob("0 * * * *", created)
	j := ownedJob(cj, jobAtNine)
	// The API's CronJob already lists the job (our own earlier status update); the cache's
	// does not yet. Acting on the cache would report the job as unexpected.
	fresh := newCronJob("0 * * * *", created, lastScheduled(nine), withActive(jobAtNine))
	fresh.UID = cj.UID
	fresh.Status.Active[0].UID = j.UID
	f := newFixture(t, []runtime.Object{fresh, j}, cj, j)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	f.wantEvents(t)
	f.noStatusUpdate(t)
	if n := len(f.actions("create", "jobs")); n != 0 {
		t.Errorf("%d creations from a stale cache", n)
	}
}

func TestSyncPrunesHistory(t *testing.T) {
	cj := newCronJob("0 * * * *", created, lastScheduled(nine))
	h := func(n int) jobOpt { return started(nine.Add(time.Duration(-n) * time.Hour)) }
	objs := []runtime.Object{cj}
	for i := 1; i <= 5; i++ {
		objs = append(objs, ownedJob(cj, fmt.Sprintf("s%d", i), complete, h(i)))
	}
	objs = append(objs, ownedJob(cj, "f1", failed, h(1)), ownedJob(cj, "f2", failed, h(2)))
	// A job of someone else is never touched.
	objs = append(objs, job("stranger", complete, h(9)))
	f := both(t, objs...)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, a := range f.actions("delete", "jobs") {
		d := a.(ktesting.DeleteAction)
		deleted = append(deleted, d.GetName())
		if p := d.GetDeleteOptions().PropagationPolicy; p == nil || *p != metav1.DeletePropagationBackground {
			t.Errorf("%s deleted with propagation %v", d.GetName(), p)
		}
	}
	// Oldest first: s5 and s4 started earliest; f2 is the older failure.
	if want := []string{"s5", "s4", "f2"}; !reflect.DeepEqual(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
	f.wantEvents(t, "Normal SuccessfulDelete Deleted job s5", "Normal SuccessfulDelete Deleted job s4", "Normal SuccessfulDelete Deleted job f2")
}

func TestJobEventsWakeTheirCronJob(t *testing.T) {
	cj := newCronJob("0 * * * *", created)
	f := both(t, cj)
	f.c.jobEvent(job("orphan"))
	if n := f.c.loop.Len(); n != 0 {
		t.Fatalf("an orphan job queued %d keys", n)
	}
	notOurs := job("rs-job")
	notOurs.OwnerReferences = []metav1.OwnerReference{{Kind: "Workflow", Name: "backup", UID: "x", Controller: ptr.To(true)}}
	f.c.jobEvent(notOurs)
	if n := f.c.loop.Len(); n != 0 {
		t.Fatalf("a job of another kind of controller queued %d keys", n)
	}
	f.c.jobEvent(cache.DeletedFinalStateUnknown{Key: "default/x", Obj: ownedJob(cj, "x")})
	if n := f.c.loop.Len(); n != 1 {
		t.Fatalf("a deleted job of the CronJob queued %d keys, want 1", n)
	}
}

func TestCronJobUpdates(t *testing.T) {
	old := newCronJob("0 * * * *", created, lastScheduled(nine))
	f := both(t, old)
	edited := old.DeepCopy()
	edited.Spec.Suspend = ptr.To(true)
	f.c.cronJobUpdated(old, edited)
	if n := f.c.loop.Len(); n != 1 || len(f.requeues) != 0 {
		t.Fatalf("a spec edit: %d queued, %v delayed; want it synced now", n, f.requeues)
	}
	// A new schedule waits for its own next start: */15 after 09:00:05 is 09:15.
	f = both(t, old)
	resched := old.DeepCopy()
	resched.Spec.Schedule = "*/15 * * * *"
	f.c.cronJobUpdated(old, resched)
	if n := f.c.loop.Len(); n != 0 {
		t.Fatalf("a schedule change queued %d keys at once", n)
	}
	if want := []requeue{{"default/backup", 15*time.Minute - 5*time.Second + requeueDelta}}; !reflect.DeepEqual(f.requeues, want) {
		t.Errorf("requeues %v, want %v", f.requeues, want)
	}
	// A schedule that no longer parses is synced at once, to report it.
	f = both(t, old)
	broken := old.DeepCopy()
	broken.Spec.Schedule = "every hour"
	f.c.cronJobUpdated(old, broken)
	if n := f.c.loop.Len(); n != 1 {
		t.Fatalf("an unparseable schedule queued %d keys, want 1", n)
	}
}
