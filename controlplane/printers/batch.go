package printers

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Jobs prints NAME STATUS COMPLETIONS DURATION AGE, wide: CONTAINERS IMAGES SELECTOR, as
// upstream's kubectl get jobs.
var Jobs = New(func(o runtime.Object) []any {
	j := o.(*batchv1.Job)
	completions := fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, ptrOr(j.Spec.Parallelism, 1))
	if j.Spec.Completions != nil {
		completions = fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	}
	var dur string
	switch {
	case j.Status.StartTime == nil:
	case j.Status.CompletionTime == nil:
		dur = duration.HumanDuration(time.Since(j.Status.StartTime.Time))
	default:
		dur = duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
	}
	c, i := containersAndImages(j.Spec.Template.Spec)
	return []any{JobStatus(j), completions, dur, Age(j.CreationTimestamp), c, i, selector(j.Spec.Selector)}
},
	Column{Name: "Status", Description: "Status of the job."},
	Column{Name: "Completions", Description: "The desired number of successfully finished pods the job should be run with."},
	Column{Name: "Duration", Description: "Time required to complete the job."},
	AgeColumn,
	Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."},
	Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."},
	Column{Name: "Selector", Wide: true, Description: "Label selector for pods."},
)

// JobStatus is the STATUS column: the job's state from its conditions, as upstream prints it.
func JobStatus(j *batchv1.Job) string {
	has := func(t batchv1.JobConditionType) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}
	switch {
	case has(batchv1.JobFailed):
		return "Failed"
	case has(batchv1.JobComplete):
		return "Complete"
	case has(batchv1.JobSuspended):
		return "Suspended"
	case has(batchv1.JobFailureTarget):
		return "FailureTarget"
	case has(batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	}
	return "Running"
}

// CronJobs prints NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE, wide: CONTAINERS
// IMAGES SELECTOR.
var CronJobs = New(func(o runtime.Object) []any {
	c := o.(*batchv1.CronJob)
	last := "<none>"
	if c.Status.LastScheduleTime != nil {
		last = duration.HumanDuration(time.Since(c.Status.LastScheduleTime.Time))
	}
	tz := "<none>"
	if c.Spec.TimeZone != nil {
		tz = *c.Spec.TimeZone
	}
	suspend := "False"
	if c.Spec.Suspend != nil && *c.Spec.Suspend {
		suspend = "True"
	}
	cs, is := containersAndImages(c.Spec.JobTemplate.Spec.Template.Spec)
	return []any{c.Spec.Schedule, tz, suspend, int64(len(c.Status.Active)), last, Age(c.CreationTimestamp), cs, is, selector(c.Spec.JobTemplate.Spec.Selector)}
},
	Column{Name: "Schedule", Description: "The schedule in Cron format."},
	Column{Name: "Timezone", Description: "The time zone name for the given schedule."},
	Column{Name: "Suspend", Type: "boolean", Description: "Whether subsequent executions are suspended."},
	Column{Name: "Active", Type: "integer", Description: "The number of currently running jobs."},
	Column{Name: "Last Schedule", Description: "When the job was last successfully scheduled."},
	AgeColumn,
	Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."},
	Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."},
	Column{Name: "Selector", Wide: true, Description: "Label selector for pods."},
)

func ptrOr(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}
