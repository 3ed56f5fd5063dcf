package cronjob

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustParse(t testing.TB, spec string) cron.Schedule {
	t.Helper()
	s, err := ParseSchedule(&batchv1.CronJob{Spec: batchv1.CronJobSpec{Schedule: spec}}, time.UTC)
	if err != nil {
		t.Fatalf("parse %q: %v", spec, err)
	}
	return s
}

func utc(y int, m time.Month, d, h, min, s int) time.Time {
	return time.Date(y, m, d, h, min, s, 0, time.UTC)
}

// walk is the obvious reference for Unmet: every start time in (after, now], one by one.
func walk(s cron.Schedule, after, now time.Time) (latest time.Time, n int) {
	for t := s.Next(after); !t.IsZero() && !t.After(now); t = s.Next(t) {
		latest, n = t, n+1
	}
	return latest, n
}

func TestUnmet(t *testing.T) {
	ny := mustLoad(t, "America/New_York")
	nyAt := func(m time.Month, d, h, min int) time.Time { return time.Date(2024, m, d, h, min, 0, 0, ny) }
	base := utc(2024, 5, 1, 10, 0, 0)
	cases := []struct {
		name      string
		schedule  string
		after     time.Time
		now       time.Time
		want      time.Time // zero: none due
		wantN     int
		wantError error
	}{
		{name: "nothing due yet", schedule: "0 * * * *", after: base, now: base.Add(59 * time.Minute)},
		{name: "due exactly now", schedule: "0 * * * *", after: base, now: base.Add(time.Hour), want: base.Add(time.Hour), wantN: 1},
		{name: "the after time itself is not unmet", schedule: "0 * * * *", after: base, now: base},
		{name: "three missed, the latest wins", schedule: "0 * * * *", after: base, now: base.Add(3*time.Hour + 5*time.Minute), want: base.Add(3 * time.Hour), wantN: 3},
		{name: "100 missed is not too many", schedule: "* * * * *", after: base, now: base.Add(100 * time.Minute), want: base.Add(100 * time.Minute), wantN: 100},
		{name: "101 missed", schedule: "* * * * *", after: base, now: base.Add(101*time.Minute + 30*time.Second), want: base.Add(101 * time.Minute), wantN: 101},
		{name: "ten days of minutes: capped count, exact latest", schedule: "* * * * *", after: base, now: base.Add(10*24*time.Hour + 42*time.Second), want: base.Add(10 * 24 * time.Hour), wantN: 101},
		// Upstream's estimate (elapsed / first interval) steps past 01:00 here and finds nothing.
		{name: "uneven intervals", schedule: "0 0,1 * * *", after: utc(2024, 5, 1, 23, 30, 0), now: utc(2024, 5, 2, 5, 0, 0), want: utc(2024, 5, 2, 1, 0, 0), wantN: 2},
		{name: "uneven intervals, many missed", schedule: "0 0,1 * * *", after: utc(2024, 1, 1, 23, 30, 0), now: utc(2024, 5, 2, 5, 0, 0), want: utc(2024, 5, 2, 1, 0, 0), wantN: 101},
		{name: "weekdays only, over a weekend", schedule: "30 6-16/4 * * 1-5", after: utc(2024, 5, 3, 13, 0, 0), now: utc(2024, 5, 6, 7, 0, 0), want: utc(2024, 5, 6, 6, 30, 0), wantN: 2},
		{name: "never starts", schedule: "59 23 31 2 *", after: base, now: base.Add(24 * time.Hour), wantError: errNeverStarts},
		// DST: New York skips 02:00-03:00 on 10 March 2024 and repeats 01:00-02:00 on 3 November.
		{name: "DST gap: the skipped 02:30 does not run", schedule: "TZ=America/New_York 30 2 * * *", after: nyAt(3, 9, 12, 0), now: nyAt(3, 10, 23, 0)},
		{name: "DST gap: the next day's 02:30 does", schedule: "TZ=America/New_York 30 2 * * *", after: nyAt(3, 9, 12, 0), now: nyAt(3, 11, 3, 0), want: nyAt(3, 11, 2, 30), wantN: 1},
		{name: "DST gap: hourly runs 01:00, 03:00, 04:00", schedule: "TZ=America/New_York 0 * * * *", after: nyAt(3, 10, 0, 30), now: nyAt(3, 10, 4, 30), want: nyAt(3, 10, 4, 0), wantN: 3},
		{name: "DST overlap: 01:30 runs twice", schedule: "TZ=America/New_York 30 1 * * *", after: nyAt(11, 2, 12, 0), now: utc(2024, 11, 3, 8, 0, 0), want: utc(2024, 11, 3, 6, 30, 0), wantN: 2},
		{name: "DST overlap: the second 01:30 is due after the first", schedule: "TZ=America/New_York 30 1 * * *", after: utc(2024, 11, 3, 5, 30, 0), now: utc(2024, 11, 3, 6, 31, 0), want: utc(2024, 11, 3, 6, 30, 0), wantN: 1},
		{name: "time zone via CRON_TZ", schedule: "CRON_TZ=Asia/Tokyo 0 9 * * *", after: utc(2024, 5, 1, 1, 0, 0), now: utc(2024, 5, 2, 0, 0, 1), want: utc(2024, 5, 2, 0, 0, 0), wantN: 1},
		{name: "@every keeps its phase", schedule: "@every 90s", after: base.Add(300 * time.Millisecond), now: base.Add(24*time.Hour + 45*time.Second), want: base.Add(24 * time.Hour), wantN: 101},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.schedule)
			got, n, err := Unmet(s, tc.after, tc.now)
			if !errors.Is(err, tc.wantError) {
				t.Fatalf("err %v, want %v", err, tc.wantError)
			}
			if !got.Equal(tc.want) || n != tc.wantN {
				t.Errorf("Unmet = %v, %d; want %v, %d", got.UTC(), n, tc.want.UTC(), tc.wantN)
			}
		})
	}
}

// TestUnmetMatchesWalk checks the shortcut past 100 start times against walking them all,
// over schedules of every shape and spans from minutes to a year.
func TestUnmetMatchesWalk(t *testing.T) {
	schedules := []string{"* * * * *", "*/7 * * * *", "0 * * * *", "0 0,1 * * *", "30 6-16/4 * * 1-5", "15 3 1,15 * *",
		"0 12 * * 0", "0 0 29 2 *", "@hourly", "@every 37s", "@every 25h", "TZ=America/New_York 30 2 * * *",
		"TZ=Europe/London 0 1 * * *", "TZ=Australia/Lord_Howe 15 2 * * *"}
	after := utc(2023, 12, 31, 23, 59, 30).Add(123 * time.Millisecond)
	spans := []time.Duration{time.Minute, 59 * time.Minute, 3 * time.Hour, 101 * time.Minute, 26 * time.Hour, 9 * 24 * time.Hour, 45 * 24 * time.Hour, 400 * 24 * time.Hour}
	for _, spec := range schedules {
		s := mustParse(t, spec)
		for _, span := range spans {
			now := after.Add(span)
			want, wantN := walk(s, after, now)
			got, n, err := Unmet(s, after, now)
			if err != nil {
				t.Fatalf("%s over %v: %v", spec, span, err)
			}
			if !got.Equal(want) || n != min(wantN, tooManyMissed+1) {
				t.Errorf("%s over %v: Unmet = %v, %d; walking finds %v, %d", spec, span, got.UTC(), n, want.UTC(), wantN)
			}
		}
	}
}

func TestRequeueAfter(t *testing.T) {
	hourly := mustParse(t, "0 * * * *")
	now := utc(2024, 5, 1, 10, 20, 0)
	cases := []struct {
		name          string
		s             cron.Schedule
		earliest, now time.Time
		want          time.Duration
	}{
		{"next start after now", hourly, now.Add(-5 * time.Hour), now, 40*time.Minute + requeueDelta},
		{"exactly at a start time: the one after", hourly, utc(2024, 5, 1, 9, 0, 0), utc(2024, 5, 1, 10, 0, 0), time.Hour + requeueDelta},
		{"a last start in the future (skewed clock) wins", hourly, now.Add(2 * time.Hour), now, 2*time.Hour + 40*time.Minute + requeueDelta},
		{"never starts: no requeue", mustParse(t, "59 23 31 2 *"), now.Add(-time.Hour), now, 0},
		{"DST gap: wait for the day after", mustParse(t, "TZ=America/New_York 30 2 * * *"), utc(2024, 3, 9, 8, 0, 0), utc(2024, 3, 9, 17, 0, 0),
			utc(2024, 3, 11, 6, 30, 0).Sub(utc(2024, 3, 9, 17, 0, 0)) + requeueDelta},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := RequeueAfter(tc.s, tc.earliest, tc.now); got != tc.want {
				t.Errorf("RequeueAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseSchedule(t *testing.T) {
	tokyo := mustLoad(t, "Asia/Tokyo")
	ref := utc(2024, 5, 1, 12, 0, 0)
	cases := []struct {
		name     string
		schedule string
		timeZone *string
		local    *time.Location
		want     time.Time // Next(ref)
		wantErr  string
	}{
		{name: "no zone: the local one", schedule: "0 9 * * *", local: tokyo, want: utc(2024, 5, 2, 0, 0, 0)},
		{name: "no zone, UTC local", schedule: "0 9 * * *", local: time.UTC, want: utc(2024, 5, 2, 9, 0, 0)},
		{name: "spec.timeZone", schedule: "0 9 * * *", timeZone: ptr.To("Asia/Tokyo"), local: time.UTC, want: utc(2024, 5, 2, 0, 0, 0)},
		{name: "TZ= prefix", schedule: "TZ=Asia/Tokyo 0 9 * * *", local: time.UTC, want: utc(2024, 5, 2, 0, 0, 0)},
		{name: "CRON_TZ= prefix", schedule: "CRON_TZ=Asia/Tokyo 0 9 * * *", local: time.UTC, want: utc(2024, 5, 2, 0, 0, 0)},
		{name: "a prefix wins over spec.timeZone, as upstream", schedule: "TZ=UTC 0 9 * * *", timeZone: ptr.To("Asia/Tokyo"), local: tokyo, want: utc(2024, 5, 2, 9, 0, 0)},
		{name: "unknown spec.timeZone", schedule: "0 9 * * *", timeZone: ptr.To("Mars/Olympus"), wantErr: "unknown time zone"},
		{name: "unknown prefix zone", schedule: "TZ=Mars/Olympus 0 9 * * *", wantErr: "provided bad location"},
		{name: "prefix with no schedule panics the parser", schedule: "TZ=0", wantErr: "invalid schedule format"},
		{name: "out of range", schedule: "61 * * * *", wantErr: "end of range"},
		{name: "empty", schedule: "", wantErr: "empty spec"},
		{name: "descriptor", schedule: "@daily", local: time.UTC, want: utc(2024, 5, 2, 0, 0, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSchedule(&batchv1.CronJob{Spec: batchv1.CronJobSpec{Schedule: tc.schedule, TimeZone: tc.timeZone}}, tc.local)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Next(ref); !got.Equal(tc.want) {
				t.Errorf("Next = %v, want %v", got.UTC(), tc.want)
			}
		})
	}
}

func TestConcurrency(t *testing.T) {
	cases := []struct {
		policy                 batchv1.ConcurrencyPolicy
		active                 int
		wantStart, wantReplace bool
	}{
		{"", 0, true, false}, {"", 2, true, false},
		{batchv1.AllowConcurrent, 0, true, false}, {batchv1.AllowConcurrent, 1, true, false},
		{batchv1.ForbidConcurrent, 0, true, false}, {batchv1.ForbidConcurrent, 1, false, false}, {batchv1.ForbidConcurrent, 3, false, false},
		{batchv1.ReplaceConcurrent, 0, true, false}, {batchv1.ReplaceConcurrent, 1, true, true}, {batchv1.ReplaceConcurrent, 2, true, true},
	}
	for _, tc := range cases {
		if s, r := Concurrency(tc.policy, tc.active); s != tc.wantStart || r != tc.wantReplace {
			t.Errorf("Concurrency(%q, %d) = %v, %v; want %v, %v", tc.policy, tc.active, s, r, tc.wantStart, tc.wantReplace)
		}
	}
}

type cjOpt func(*batchv1.CronJob)

func newCronJob(schedule string, created time.Time, opts ...cjOpt) *batchv1.CronJob {
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "backup", Namespace: "default", UID: "backup-uid", CreationTimestamp: metav1.NewTime(created)},
		Spec: batchv1.CronJobSpec{
			Schedule:          schedule,
			ConcurrencyPolicy: batchv1.AllowConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "backup"}, Annotations: map[string]string{"team": "ops"}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyOnFailure, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
			},
		},
	}
	for _, o := range opts {
		o(cj)
	}
	return cj
}

func lastScheduled(t time.Time) cjOpt {
	return func(cj *batchv1.CronJob) { cj.Status.LastScheduleTime = &metav1.Time{Time: t} }
}
func deadline(s int64) cjOpt {
	return func(cj *batchv1.CronJob) { cj.Spec.StartingDeadlineSeconds = &s }
}
func policy(p batchv1.ConcurrencyPolicy) cjOpt {
	return func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = p }
}
func timeZone(tz string) cjOpt      { return func(cj *batchv1.CronJob) { cj.Spec.TimeZone = &tz } }
func suspended(cj *batchv1.CronJob) { cj.Spec.Suspend = ptr.To(true) }
func withActive(names ...string) cjOpt {
	return func(cj *batchv1.CronJob) {
		for _, n := range names {
			cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: cj.Namespace, Name: n, UID: types.UID(n + "-uid")})
		}
	}
}

func reasons(es []Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Type+" "+e.Reason)
	}
	return out
}

func TestDecide(t *testing.T) {
	created := utc(2024, 5, 1, 8, 30, 0)
	at := func(h, m, s int) time.Time { return utc(2024, 5, 1, h, m, s) }
	ny := mustLoad(t, "America/New_York")
	cases := []struct {
		name        string
		cj          *batchv1.CronJob
		now         time.Time
		wantStart   time.Time // zero: none
		wantReplace bool
		wantRequeue time.Duration
		wantEvents  []string
	}{
		{name: "not due yet", cj: newCronJob("0 * * * *", created), now: at(8, 59, 0),
			wantRequeue: time.Minute + requeueDelta},
		{name: "due", cj: newCronJob("0 * * * *", created), now: at(9, 0, 5),
			wantStart: at(9, 0, 0), wantRequeue: time.Hour - 5*time.Second + requeueDelta},
		{name: "several missed: only the latest starts", cj: newCronJob("0 * * * *", created), now: at(11, 30, 0),
			wantStart: at(11, 0, 0), wantRequeue: 30*time.Minute + requeueDelta},
		{name: "already started (lastScheduleTime)", cj: newCronJob("0 * * * *", created, lastScheduled(at(9, 0, 0))), now: at(9, 0, 5),
			wantRequeue: time.Hour - 5*time.Second + requeueDelta},
		{name: "already started (its job is active, status lagging)", cj: newCronJob("0 * * * *", created, withActive(fmt.Sprintf("backup-%d", at(9, 0, 0).Unix()/60))), now: at(9, 0, 5),
			wantRequeue: time.Hour - 5*time.Second + requeueDelta},
		{name: "suspended", cj: newCronJob("0 * * * *", created, suspended), now: at(11, 0, 0)},
		{name: "suspended with a bad time zone still reports it", cj: newCronJob("0 * * * *", created, suspended, timeZone("Mars/Olympus")), now: at(11, 0, 0),
			wantEvents: []string{"Warning UnknownTimeZone"}},
		{name: "being deleted", cj: newCronJob("0 * * * *", created, func(cj *batchv1.CronJob) { cj.DeletionTimestamp = &metav1.Time{Time: at(9, 0, 0)} }), now: at(11, 0, 0)},
		{name: "unknown time zone", cj: newCronJob("0 * * * *", created, timeZone("Mars/Olympus")), now: at(11, 0, 0),
			wantEvents: []string{"Warning UnknownTimeZone"}},
		{name: "unparseable schedule", cj: newCronJob("0 * * *", created), now: at(11, 0, 0),
			wantEvents: []string{"Warning UnparseableSchedule"}},
		{name: "schedule that never starts", cj: newCronJob("59 23 31 2 *", created), now: at(11, 0, 0),
			wantEvents: []string{"Warning InvalidSchedule"}},
		{name: "spec.timeZone", cj: newCronJob("0 18 * * *", created, timeZone("Asia/Tokyo")), now: at(9, 0, 1),
			wantStart: at(9, 0, 0), wantRequeue: 24*time.Hour - time.Second + requeueDelta},
		{name: "spec.timeZone: 18:00 UTC is not a start time, Tokyo's 18:00 still is due", cj: newCronJob("0 18 * * *", created, timeZone("Asia/Tokyo")), now: at(18, 0, 1),
			wantStart: at(9, 0, 0), wantRequeue: 15*time.Hour - time.Second + requeueDelta},
		{name: "CRON_TZ in the schedule works, with a warning", cj: newCronJob("CRON_TZ=Asia/Tokyo 0 18 * * *", created), now: at(9, 0, 1),
			wantStart: at(9, 0, 0), wantRequeue: 24*time.Hour - time.Second + requeueDelta, wantEvents: []string{"Warning UnsupportedSchedule"}},
		{name: "a bad TZ in the schedule", cj: newCronJob("TZ=Mars/Olympus 0 18 * * *", created), now: at(9, 0, 1),
			wantEvents: []string{"Warning UnsupportedSchedule", "Warning UnparseableSchedule"}},
		{name: "a truncated TZ (the parser panics)", cj: newCronJob("TZ=0", created), now: at(9, 0, 1),
			wantEvents: []string{"Warning UnsupportedSchedule", "Warning UnparseableSchedule"}},
		{name: "DST gap: the nonexistent 02:30 is not due", cj: newCronJob("30 2 * * *", time.Date(2024, 3, 9, 3, 0, 0, 0, ny), timeZone("America/New_York")),
			now: time.Date(2024, 3, 10, 12, 0, 0, 0, ny), wantRequeue: utc(2024, 3, 11, 6, 30, 0).Sub(utc(2024, 3, 10, 16, 0, 0)) + requeueDelta},
		{name: "DST overlap: the repeated 01:30 starts again", cj: newCronJob("30 1 * * *", created, timeZone("America/New_York"), lastScheduled(utc(2024, 11, 3, 5, 30, 0))),
			now: utc(2024, 11, 3, 6, 30, 2), wantStart: utc(2024, 11, 3, 6, 30, 0), wantRequeue: 24*time.Hour - 2*time.Second + requeueDelta},
		// startingDeadlineSeconds
		{name: "within the deadline", cj: newCronJob("0 * * * *", created, deadline(60)), now: at(9, 0, 59),
			wantStart: at(9, 0, 0), wantRequeue: time.Hour - 59*time.Second + requeueDelta},
		// As upstream: the window is (now-deadline, now], so a start exactly deadline old is missed.
		{name: "exactly at the deadline: missed", cj: newCronJob("0 * * * *", created, deadline(60)), now: at(9, 1, 0),
			wantRequeue: 59*time.Minute + requeueDelta, wantEvents: []string{"Warning MissSchedule"}},
		{name: "past the deadline: missed, reported", cj: newCronJob("0 * * * *", created, deadline(60)), now: at(9, 1, 1),
			wantRequeue: 59*time.Minute - time.Second + requeueDelta, wantEvents: []string{"Warning MissSchedule"}},
		{name: "older misses dropped, the latest within the deadline starts", cj: newCronJob("*/10 * * * *", created, deadline(300)), now: at(11, 3, 0),
			wantStart: at(11, 0, 0), wantRequeue: 7*time.Minute + requeueDelta},
		{name: "a deadline keeps the count under the warning", cj: newCronJob("* * * * *", created, deadline(600)), now: at(20, 0, 30),
			wantStart: at(20, 0, 0), wantRequeue: 30*time.Second + requeueDelta},
		{name: "exactly 100 missed: no warning", cj: newCronJob("* * * * *", at(8, 20, 0)), now: at(10, 0, 0),
			wantStart: at(10, 0, 0), wantRequeue: time.Minute + requeueDelta},
		{name: "101 missed: warning, still starts", cj: newCronJob("* * * * *", at(8, 19, 0)), now: at(10, 0, 0),
			wantStart: at(10, 0, 0), wantRequeue: time.Minute + requeueDelta, wantEvents: []string{"Warning TooManyMissedTimes"}},
		{name: "many missed under a long deadline: warning", cj: newCronJob("* * * * *", created, deadline(3*3600)), now: at(20, 0, 30),
			wantStart: at(20, 0, 0), wantRequeue: 30*time.Second + requeueDelta, wantEvents: []string{"Warning TooManyMissedTimes"}},
		{name: "last start in the future (skewed clock)", cj: newCronJob("0 * * * *", created, lastScheduled(at(12, 0, 0))), now: at(10, 30, 0),
			wantRequeue: 2*time.Hour + 30*time.Minute + requeueDelta},
		// Concurrency policies.
		{name: "Allow with an active job", cj: newCronJob("0 * * * *", created, withActive("backup-1")), now: at(9, 0, 5),
			wantStart: at(9, 0, 0), wantRequeue: time.Hour - 5*time.Second + requeueDelta},
		{name: "Forbid with an active job", cj: newCronJob("0 * * * *", created, policy(batchv1.ForbidConcurrent), withActive("backup-1")), now: at(9, 0, 5),
			wantRequeue: time.Hour - 5*time.Second + requeueDelta, wantEvents: []string{"Normal JobAlreadyActive"}},
		{name: "Forbid with nothing active", cj: newCronJob("0 * * * *", created, policy(batchv1.ForbidConcurrent)), now: at(9, 0, 5),
			wantStart: at(9, 0, 0), wantRequeue: time.Hour - 5*time.Second + requeueDelta},
		{name: "Forbid: the skipped start runs once the active job is gone", cj: newCronJob("0 * * * *", created, policy(batchv1.ForbidConcurrent), lastScheduled(at(8, 0, 0))), now: at(9, 20, 0),
			wantStart: at(9, 0, 0), wantRequeue: 40*time.Minute + requeueDelta},
		{name: "Replace with active jobs", cj: newCronJob("0 * * * *", created, policy(batchv1.ReplaceConcurrent), withActive("backup-1", "backup-2")), now: at(9, 0, 5),
			wantStart: at(9, 0, 0), wantReplace: true, wantRequeue: time.Hour - 5*time.Second + requeueDelta},
		{name: "Replace with nothing active", cj: newCronJob("0 * * * *", created, policy(batchv1.ReplaceConcurrent)), now: at(9, 0, 5),
			wantStart: at(9, 0, 0), wantRequeue: time.Hour - 5*time.Second + requeueDelta},
		{name: "Replace, not due: nothing deleted", cj: newCronJob("0 * * * *", created, policy(batchv1.ReplaceConcurrent), withActive("backup-1"), lastScheduled(at(9, 0, 0))), now: at(9, 30, 0),
			wantRequeue: 30*time.Minute + requeueDelta},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cj.DeepCopy()
			d := Decide(tc.cj, tc.now, time.UTC)
			if !reflect.DeepEqual(before, tc.cj) {
				t.Error("Decide modified the CronJob")
			}
			switch {
			case tc.wantStart.IsZero() && d.Start != nil:
				t.Errorf("starts %v, want nothing", d.Start.UTC())
			case !tc.wantStart.IsZero() && (d.Start == nil || !d.Start.Equal(tc.wantStart)):
				t.Errorf("starts %v, want %v", d.Start, tc.wantStart)
			}
			if d.ReplaceActive != tc.wantReplace {
				t.Errorf("ReplaceActive %v, want %v", d.ReplaceActive, tc.wantReplace)
			}
			if d.Requeue != tc.wantRequeue {
				t.Errorf("Requeue %v, want %v", d.Requeue, tc.wantRequeue)
			}
			if got := reasons(d.Events); !reflect.DeepEqual(got, tc.wantEvents) {
				t.Errorf("events %q, want %q", got, tc.wantEvents)
			}
		})
	}
}

func TestDecideEventMessages(t *testing.T) {
	created := utc(2024, 5, 1, 8, 30, 0)
	d := Decide(newCronJob("0 * * * *", created, deadline(60)), utc(2024, 5, 1, 9, 5, 0), time.UTC)
	if len(d.Events) != 1 || d.Events[0].Message != "Missed scheduled time to start a job: Wed, 01 May 2024 09:00:00 +0000" {
		t.Errorf("MissSchedule %+v", d.Events)
	}
	d = Decide(newCronJob("0 * * *", created), utc(2024, 5, 1, 9, 5, 0), time.UTC)
	if len(d.Events) != 1 || !strings.HasPrefix(d.Events[0].Message, `unparseable schedule: "0 * * *" : `) || !strings.Contains(d.Events[0].Message, "expected exactly 5 fields") {
		t.Errorf("UnparseableSchedule %+v", d.Events)
	}
	d = Decide(newCronJob("0 * * * *", created, timeZone("Mars/Olympus")), utc(2024, 5, 1, 9, 5, 0), time.UTC)
	if len(d.Events) != 1 || !strings.HasPrefix(d.Events[0].Message, `invalid timeZone: "Mars/Olympus": `) {
		t.Errorf("UnknownTimeZone %+v", d.Events)
	}
}

func TestJobName(t *testing.T) {
	cj := newCronJob("0 * * * *", time.Time{})
	if got := JobName(cj, utc(2016, 5, 19, 10, 0, 0)); got != "backup-24394200" {
		t.Errorf("JobName = %q", got)
	}
	// Seconds within the minute do not change it: that is what makes a second create collide.
	if JobName(cj, utc(2016, 5, 19, 10, 0, 59)) != JobName(cj, utc(2016, 5, 19, 10, 0, 0)) {
		t.Error("names differ within one minute")
	}
}

func TestNewJob(t *testing.T) {
	scheduled := utc(2024, 5, 1, 9, 0, 0)
	for _, tc := range []struct {
		tz, wantStamp string
	}{
		{"", "2024-05-01T09:00:00Z"},
		{"Asia/Tokyo", "2024-05-01T18:00:00+09:00"},
	} {
		var opts []cjOpt
		if tc.tz != "" {
			opts = append(opts, timeZone(tc.tz))
		}
		cj := newCronJob("0 * * * *", scheduled.Add(-time.Hour), opts...)
		j := NewJob(cj, scheduled)
		if j.Name != fmt.Sprintf("backup-%d", scheduled.Unix()/60) || j.Namespace != "default" {
			t.Errorf("name %s/%s", j.Namespace, j.Name)
		}
		if got := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != tc.wantStamp {
			t.Errorf("tz %q: scheduled timestamp %q, want %q", tc.tz, got, tc.wantStamp)
		}
		if j.Annotations["team"] != "ops" || len(j.Annotations) != 2 || !reflect.DeepEqual(j.Labels, map[string]string{"app": "backup"}) {
			t.Errorf("labels %v annotations %v", j.Labels, j.Annotations)
		}
		ref := metav1.GetControllerOf(j)
		if ref == nil || ref.Kind != "CronJob" || ref.APIVersion != "batch/v1" || ref.Name != "backup" || ref.UID != "backup-uid" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("controller ref %+v", ref)
		}
		if !reflect.DeepEqual(j.Spec, cj.Spec.JobTemplate.Spec) {
			t.Errorf("spec %+v, want the template's", j.Spec)
		}
		// The job owns its maps: changing them must not reach the CronJob's template.
		j.Annotations["x"], j.Labels["x"] = "y", "y"
		j.Spec.Template.Spec.Containers[0].Image = "changed"
		if _, ok := cj.Spec.JobTemplate.Annotations["x"]; ok || cj.Spec.JobTemplate.Labels["x"] != "" || cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image != "busybox" {
			t.Error("the job shares memory with the template")
		}
	}
}

func cond(t batchv1.JobConditionType, s corev1.ConditionStatus) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: s}
}

func TestFinished(t *testing.T) {
	cases := []struct {
		name  string
		conds []batchv1.JobCondition
		want  batchv1.JobConditionType
		done  bool
	}{
		{"no conditions", nil, "", false},
		{"complete", []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue), cond(batchv1.JobComplete, corev1.ConditionTrue)}, batchv1.JobComplete, true},
		{"failed", []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue), cond(batchv1.JobFailed, corev1.ConditionTrue)}, batchv1.JobFailed, true},
		{"success criteria met, pods still terminating", []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue)}, "", false},
		{"failure target, pods still terminating", []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue)}, "", false},
		{"complete but False", []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionFalse)}, "", false},
		{"suspended", []batchv1.JobCondition{cond(batchv1.JobSuspended, corev1.ConditionTrue)}, "", false},
	}
	for _, tc := range cases {
		j := &batchv1.Job{Status: batchv1.JobStatus{Conditions: tc.conds}}
		if got, done := Finished(j); got != tc.want || done != tc.done {
			t.Errorf("%s: Finished = %q, %v; want %q, %v", tc.name, got, done, tc.want, tc.done)
		}
	}
}

type jobOpt func(*batchv1.Job)

func job(name string, opts ...jobOpt) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid")}}
	for _, o := range opts {
		o(j)
	}
	return j
}

func started(t time.Time) jobOpt {
	return func(j *batchv1.Job) { j.Status.StartTime = &metav1.Time{Time: t} }
}
func withCond(c batchv1.JobConditionType) jobOpt {
	return func(j *batchv1.Job) { j.Status.Conditions = append(j.Status.Conditions, cond(c, corev1.ConditionTrue)) }
}

var (
	complete = withCond(batchv1.JobComplete)
	failed   = withCond(batchv1.JobFailed)
)

func names(js []*batchv1.Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.Name)
	}
	return out
}

func TestHistoryToDelete(t *testing.T) {
	t0 := utc(2024, 5, 1, 0, 0, 0)
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	limits := func(s, f *int32) cjOpt {
		return func(cj *batchv1.CronJob) { cj.Spec.SuccessfulJobsHistoryLimit, cj.Spec.FailedJobsHistoryLimit = s, f }
	}
	five := []*batchv1.Job{job("s3", complete, started(h(3))), job("s1", complete, started(h(1))), job("s5", complete, started(h(5))),
		job("s2", complete, started(h(2))), job("s4", complete, started(h(4)))}
	cases := []struct {
		name string
		cj   *batchv1.CronJob
		jobs []*batchv1.Job
		want []string
	}{
		{name: "defaults keep 3 succeeded and 1 failed", cj: newCronJob("0 * * * *", t0),
			jobs: append(append([]*batchv1.Job{}, five...), job("f2", failed, started(h(2))), job("f1", failed, started(h(1))), job("f3", failed, started(h(3)))),
			want: []string{"s1", "s2", "f1", "f2"}},
		{name: "within the limits", cj: newCronJob("0 * * * *", t0), jobs: five[:3]},
		{name: "limit 0 deletes every finished job", cj: newCronJob("0 * * * *", t0, limits(ptr.To[int32](0), ptr.To[int32](0))),
			jobs: []*batchv1.Job{job("s1", complete, started(h(1))), job("f1", failed, started(h(1)))}, want: []string{"s1", "f1"}},
		{name: "larger limits", cj: newCronJob("0 * * * *", t0, limits(ptr.To[int32](4), ptr.To[int32](10))), jobs: five, want: []string{"s1"}},
		{name: "running and terminating jobs are not history", cj: newCronJob("0 * * * *", t0, limits(ptr.To[int32](0), ptr.To[int32](0))),
			jobs: []*batchv1.Job{job("running", started(h(1))), job("criteria", withCond(batchv1.JobSuccessCriteriaMet), started(h(1))),
				job("target", withCond(batchv1.JobFailureTarget), started(h(1)))}},
		{name: "jobs already being deleted are not counted", cj: newCronJob("0 * * * *", t0, limits(ptr.To[int32](1), nil)),
			jobs: []*batchv1.Job{job("s1", complete, started(h(1)), func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: h(9)} }),
				job("s2", complete, started(h(2))), job("s3", complete, started(h(3)))},
			want: []string{"s2"}},
		{name: "unstarted jobs count as newest, names break ties", cj: newCronJob("0 * * * *", t0, limits(ptr.To[int32](1), nil)),
			jobs: []*batchv1.Job{job("z-nostart", complete), job("b", complete, started(h(1))), job("a-nostart", complete), job("a", complete, started(h(1)))},
			want: []string{"a", "b", "a-nostart"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := names(HistoryToDelete(tc.cj, tc.jobs))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("deletes %q, want %q", got, tc.want)
			}
		})
	}
}
