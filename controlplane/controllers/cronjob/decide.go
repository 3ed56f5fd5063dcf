package cronjob

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// tooManyMissed is upstream's bound on unmet start times before it warns: a controller
// down over a weekend misses ~80 hourly runs, a clock off by years misses millions.
const tooManyMissed = 100

// requeueDelta pads the wake-up for the next start time, as upstream, so a sync does not
// land a hair before it on a clock that steps slightly.
const requeueDelta = 100 * time.Millisecond

// Default history limits, the API's defaults, for objects that were stored without them.
const (
	defaultSuccessfulJobsHistoryLimit = 3
	defaultFailedJobsHistoryLimit     = 1
)

// Event is an event a decision asks the controller to record on the CronJob.
type Event struct {
	Type, Reason, Message string
}

// Decision is what one sync should do about starting a job.
type Decision struct {
	// Start is the scheduled time to create a job for; nil starts nothing.
	Start *time.Time
	// ReplaceActive: delete every job in status.active before starting (Replace).
	ReplaceActive bool
	// Requeue is when to look again, for the next start time; 0 waits for a change to the
	// object (suspended, an unusable schedule or time zone, being deleted).
	Requeue time.Duration
	Events  []Event
}

func warn(reason, format string, args ...any) Event {
	return Event{corev1.EventTypeWarning, reason, fmt.Sprintf(format, args...)}
}

// Decide is the pure part of a sync: given a CronJob whose status.active already reflects
// its jobs, the time, and the zone schedules without one run in (the controller's local
// zone, as upstream), what to start, what to replace, what to report and when to look
// again. The checks run in upstream's order, so a suspended CronJob with a bad time zone
// still reports the time zone.
func Decide(cj *batchv1.CronJob, now time.Time, local *time.Location) Decision {
	if cj.DeletionTimestamp != nil {
		return Decision{}
	}
	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil {
			return Decision{Events: []Event{warn("UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)}}
		}
	}
	if ptr.Deref(cj.Spec.Suspend, false) {
		return Decision{}
	}
	var d Decision
	if ScheduleHasTZ(cj) {
		d.Events = append(d.Events, warn("UnsupportedSchedule",
			"CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", cj.Spec.Schedule))
	}
	sched, err := ParseSchedule(cj, local)
	if err != nil {
		d.Events = append(d.Events, warn("UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err))
		return d
	}
	earliest := Earliest(cj)
	from := earliest
	if dl := cj.Spec.StartingDeadlineSeconds; dl != nil {
		// Start times older than the deadline are never started, so they are not even counted.
		if cutoff := now.Add(-time.Duration(*dl) * time.Second); cutoff.After(from) {
			from = cutoff
		}
	}
	latest, missed, err := Unmet(sched, from, now)
	if err != nil {
		d.Events = append(d.Events, warn("InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err))
		return d
	}
	d.Requeue = RequeueAfter(sched, earliest, now)
	if missed > tooManyMissed {
		d.Events = append(d.Events, warn("TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"))
	}
	if missed == 0 {
		// Nothing due within the deadline. If something was due before it, say so: that
		// start is skipped for good (upstream means to report this; its own check can never
		// fire, since it looks for late times only after dropping them).
		if from.After(earliest) {
			if late, n, _ := Unmet(sched, earliest, from); n > 0 {
				d.Events = append(d.Events, warn("MissSchedule", "Missed scheduled time to start a job: %s", late.UTC().Format(time.RFC1123Z)))
			}
		}
		return d
	}
	if inActiveByName(cj, JobName(cj, latest)) || (cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(latest)) {
		return d // already started
	}
	start, replace := Concurrency(cj.Spec.ConcurrencyPolicy, len(cj.Status.Active))
	if !start {
		d.Events = append(d.Events, Event{corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid"})
		return d
	}
	d.Start, d.ReplaceActive = &latest, replace
	return d
}

// Concurrency says whether a new job may start while active jobs run, and whether those
// must go first: Allow (and unset) runs them side by side, Forbid waits for them, Replace
// deletes them.
func Concurrency(policy batchv1.ConcurrencyPolicy, active int) (start, replace bool) {
	if active == 0 {
		return true, false
	}
	switch policy {
	case batchv1.ForbidConcurrent:
		return false, false
	case batchv1.ReplaceConcurrent:
		return true, true
	}
	return true, false
}

// ScheduleHasTZ reports a schedule carrying its own CRON_TZ= or TZ= zone: the API accepts
// it only on objects that already had one, upstream evaluates it as written (ignoring
// spec.timeZone) and warns.
func ScheduleHasTZ(cj *batchv1.CronJob) bool { return strings.Contains(cj.Spec.Schedule, "TZ") }

// ParseSchedule parses spec.schedule in the zone it runs in: its own TZ= prefix, else
// spec.timeZone, else local. A malformed TZ= prefix makes the cron parser panic; that is
// an error here.
func ParseSchedule(cj *batchv1.CronJob, local *time.Location) (s cron.Schedule, err error) {
	spec := cj.Spec.Schedule
	if !ScheduleHasTZ(cj) && cj.Spec.TimeZone != nil {
		if _, err := time.LoadLocation(*cj.Spec.TimeZone); err != nil {
			return nil, err
		}
		spec = "TZ=" + *cj.Spec.TimeZone + " " + spec
	}
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("invalid schedule format: %v", r)
		}
	}()
	s, err = cron.ParseStandard(spec)
	if err != nil {
		return nil, err
	}
	// The parser marks "no zone" with time.Local and then evaluates in whatever zone the
	// given time is in; pin it so the result does not depend on how a time was decoded.
	if ss, ok := s.(*cron.SpecSchedule); ok && ss.Location == time.Local && local != nil {
		ss.Location = local
	}
	return s, nil
}

// Earliest is the time after which start times are unmet: the last one started, else
// the CronJob's creation.
func Earliest(cj *batchv1.CronJob) time.Time {
	if cj.Status.LastScheduleTime != nil {
		return cj.Status.LastScheduleTime.Time
	}
	return cj.CreationTimestamp.Time
}

// errNeverStarts is a schedule that is well formed but names no real time (31 February).
var errNeverStarts = errors.New("the schedule has no start time in the next five years")

// Unmet returns the latest start time of sched in (after, now] and how many there are,
// counted exactly up to tooManyMissed+1 (any more are reported as that). Past that bound
// it does not walk every start time: it looks back from now over a window that doubles
// until one falls in it, stepping in whole intervals from a known start time so @every
// schedules keep their phase.
func Unmet(sched cron.Schedule, after, now time.Time) (latest time.Time, n int, err error) {
	t := sched.Next(after)
	if t.IsZero() {
		return time.Time{}, 0, errNeverStarts
	}
	for !t.IsZero() && !t.After(now) {
		latest, n = t, n+1
		t = sched.Next(t)
		if n > tooManyMissed {
			break
		}
	}
	if n <= tooManyMissed || t.IsZero() || t.After(now) {
		return latest, n, nil
	}
	floor, step := latest, t.Sub(latest)
	whole := int64(now.Sub(floor) / step)
	for back := int64(1); ; back *= 2 {
		from := floor
		if back < whole {
			from = floor.Add(time.Duration(whole-back) * step)
		}
		if c := sched.Next(from); !c.IsZero() && !c.After(now) {
			for ; !c.IsZero() && !c.After(now); c = sched.Next(c) {
				latest = c
			}
			return latest, n, nil
		}
		// Reached floor: cannot happen (Next(floor) is t, which is due), but never loop.
		if from.Equal(floor) {
			return latest, n, nil
		}
	}
}

// RequeueAfter is how long until the first start time after now (or after earliest, when
// a skewed clock put the last start in the future), padded; 0 if there is none.
func RequeueAfter(sched cron.Schedule, earliest, now time.Time) time.Duration {
	from := now
	if earliest.After(now) {
		from = earliest
	}
	next := sched.Next(from)
	if next.IsZero() {
		return 0
	}
	return next.Sub(now) + requeueDelta
}

// JobName is upstream's deterministic name for the job of a start time (minutes since the
// epoch), which makes creating it twice an AlreadyExists instead of a second run.
func JobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

func inActiveByName(cj *batchv1.CronJob, name string) bool {
	for _, r := range cj.Status.Active {
		if r.Name == name && r.Namespace == cj.Namespace {
			return true
		}
	}
	return false
}

// NewJob builds the job of a start time from the template, controlled by the CronJob. The
// scheduled-timestamp annotation is in spec.timeZone (UTC without one), as upstream.
func NewJob(cj *batchv1.CronJob, scheduled time.Time) *batchv1.Job {
	t := cj.Spec.JobTemplate.DeepCopy()
	annotations := map[string]string{}
	for k, v := range t.Annotations {
		annotations[k] = v
	}
	loc := time.UTC
	if cj.Spec.TimeZone != nil {
		if l, err := time.LoadLocation(*cj.Spec.TimeZone); err == nil {
			loc = l
		}
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            JobName(cj, scheduled),
			Namespace:       cj.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: t.Spec,
	}
}

// Finished returns the condition that ended a job: Complete or Failed, True. The
// SuccessCriteriaMet and FailureTarget conditions come first, while pods still
// terminate; the job is not finished until the job controller adds the final one.
func Finished(j *batchv1.Job) (batchv1.JobConditionType, bool) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type, true
		}
	}
	return "", false
}

// HistoryToDelete picks the finished jobs beyond the history limits, oldest first by start
// time (unstarted ones count as newest, names break ties), as upstream. Jobs already being
// deleted are not history any more: counting them would pick them again every sync.
func HistoryToDelete(cj *batchv1.CronJob, jobs []*batchv1.Job) []*batchv1.Job {
	var succeeded, failed []*batchv1.Job
	for _, j := range jobs {
		if j.DeletionTimestamp != nil {
			continue
		}
		switch c, _ := Finished(j); c {
		case batchv1.JobComplete:
			succeeded = append(succeeded, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	out := oldestBeyond(succeeded, int(ptr.Deref(cj.Spec.SuccessfulJobsHistoryLimit, defaultSuccessfulJobsHistoryLimit)))
	return append(out, oldestBeyond(failed, int(ptr.Deref(cj.Spec.FailedJobsHistoryLimit, defaultFailedJobsHistoryLimit)))...)
}

func oldestBeyond(jobs []*batchv1.Job, limit int) []*batchv1.Job {
	if len(jobs) <= limit {
		return nil
	}
	jobs = append([]*batchv1.Job(nil), jobs...)
	sort.SliceStable(jobs, func(a, b int) bool {
		sa, sb := jobs[a].Status.StartTime, jobs[b].Status.StartTime
		switch {
		case sa == nil && sb == nil:
			return jobs[a].Name < jobs[b].Name
		case sa == nil || sb == nil:
			return sb == nil
		case !sa.Equal(sb):
			return sa.Before(sb)
		}
		return jobs[a].Name < jobs[b].Name
	})
	return jobs[:len(jobs)-max(limit, 0)]
}
