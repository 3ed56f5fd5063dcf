package validation

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Job validates a Job (its selector already generated unless manualSelector is set).
func Job(j *batchv1.Job) field.ErrorList {
	errs := ObjectMeta(&j.ObjectMeta, true, DNSSubdomain)
	// The name becomes the job-name label of its pods (and their generateName prefix).
	if len(j.Name) > 63 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), j.Name, "must be no more than 63 characters"))
	}
	return append(errs, jobSpec(&j.Spec, specPath, true)...)
}

// jobSpec validates a Job's spec, or a CronJob's job template's (where the selector is
// optional: the Job made from it gets one).
func jobSpec(s *batchv1.JobSpec, fld *field.Path, needSelector bool) field.ErrorList {
	var errs field.ErrorList
	nonNegative := func(v *int32, name string) {
		if v != nil && *v < 0 {
			errs = append(errs, field.Invalid(fld.Child(name), *v, "must be greater than or equal to 0"))
		}
	}
	nonNegative(s.Parallelism, "parallelism")
	nonNegative(s.Completions, "completions")
	nonNegative(s.BackoffLimit, "backoffLimit")
	nonNegative(s.TTLSecondsAfterFinished, "ttlSecondsAfterFinished")
	nonNegative(s.BackoffLimitPerIndex, "backoffLimitPerIndex")
	nonNegative(s.MaxFailedIndexes, "maxFailedIndexes")
	if s.ActiveDeadlineSeconds != nil && *s.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(fld.Child("activeDeadlineSeconds"), *s.ActiveDeadlineSeconds, "must be greater than 0"))
	}
	if s.Selector == nil {
		if needSelector {
			errs = append(errs, field.Required(fld.Child("selector"), ""))
		}
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, fld.Child("selector"))...)
		if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil {
			if sel.Empty() {
				errs = append(errs, field.Invalid(fld.Child("selector"), s.Selector, "empty selector is invalid for job"))
			} else if !sel.Matches(labels.Set(s.Template.Labels)) {
				errs = append(errs, field.Invalid(fld.Child("template", "metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
			}
		}
	}
	if mode := s.CompletionMode; mode != nil {
		switch *mode {
		case batchv1.NonIndexedCompletion:
			if s.BackoffLimitPerIndex != nil {
				errs = append(errs, field.Forbidden(fld.Child("backoffLimitPerIndex"), "requires indexed completion mode"))
			}
		case batchv1.IndexedCompletion:
			if s.Completions == nil {
				errs = append(errs, field.Required(fld.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
			}
			if s.Parallelism != nil && *s.Parallelism > 100000 {
				errs = append(errs, field.Invalid(fld.Child("parallelism"), *s.Parallelism, "must be less than or equal to 100000 when completion mode is Indexed"))
			}
		default:
			errs = append(errs, field.NotSupported(fld.Child("completionMode"), *mode, []string{string(batchv1.NonIndexedCompletion), string(batchv1.IndexedCompletion)}))
		}
	}
	if s.MaxFailedIndexes != nil && s.BackoffLimitPerIndex == nil {
		errs = append(errs, field.Required(fld.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
	}
	if sp := s.SuccessPolicy; sp != nil {
		errs = append(errs, successPolicy(sp, s, fld.Child("successPolicy"))...)
	}
	if p := s.PodFailurePolicy; p != nil {
		errs = append(errs, podFailurePolicy(p, s.Template.Spec.RestartPolicy, fld.Child("podFailurePolicy"))...)
	}
	if r := s.PodReplacementPolicy; r != nil {
		switch *r {
		case batchv1.TerminatingOrFailed:
			if s.PodFailurePolicy != nil {
				errs = append(errs, field.NotSupported(fld.Child("podReplacementPolicy"), *r, []string{string(batchv1.Failed)}))
			}
		case batchv1.Failed:
		default:
			errs = append(errs, field.NotSupported(fld.Child("podReplacementPolicy"), *r, []string{string(batchv1.TerminatingOrFailed), string(batchv1.Failed)}))
		}
	}
	errs = append(errs, podTemplateAnyRestart(&s.Template, fld.Child("template"))...)
	switch s.Template.Spec.RestartPolicy {
	case corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(fld.Child("template", "spec", "restartPolicy"), s.Template.Spec.RestartPolicy,
			[]string{string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	}
	return errs
}

func successPolicy(sp *batchv1.SuccessPolicy, s *batchv1.JobSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		errs = append(errs, field.Invalid(fld, sp, "requires indexed completion mode"))
	}
	rp := fld.Child("rules")
	switch {
	case len(sp.Rules) == 0:
		errs = append(errs, field.Required(rp, "at least one rules must be specified when the successPolicy is specified"))
	case len(sp.Rules) > 20:
		errs = append(errs, field.TooMany(rp, len(sp.Rules), 20))
	}
	completions := int32(0)
	if s.Completions != nil {
		completions = *s.Completions
	}
	for i, r := range sp.Rules {
		p := rp.Index(i)
		if r.SucceededIndexes == nil && r.SucceededCount == nil {
			errs = append(errs, field.Required(p, "at least one of succeededCount or succeededIndexes must be specified"))
		}
		if r.SucceededCount != nil {
			if *r.SucceededCount <= 0 {
				errs = append(errs, field.Invalid(p.Child("succeededCount"), *r.SucceededCount, "must be greater than 0"))
			} else if *r.SucceededCount > completions {
				errs = append(errs, field.Invalid(p.Child("succeededCount"), *r.SucceededCount, fmt.Sprintf("must be less than or equal to %d (the number of specified completions)", completions)))
			}
		}
		if r.SucceededIndexes != nil {
			if msg := checkIndexes(*r.SucceededIndexes, completions); msg != "" {
				errs = append(errs, field.Invalid(p.Child("succeededIndexes"), *r.SucceededIndexes, msg))
			}
		}
	}
	return errs
}

// checkIndexes validates "1,3-5,7": ordered, non-overlapping intervals within [0, completions).
func checkIndexes(s string, completions int32) string {
	prev := -1
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return fmt.Sprintf("error parsing %q: not a non-negative integer", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return fmt.Sprintf("error parsing %q: not an interval", part)
			}
		}
		if a <= prev {
			return "the intervals must be sorted and must not overlap"
		}
		if int32(b) >= completions {
			return fmt.Sprintf("too large: %d; must be less than %d (the number of specified completions)", b, completions)
		}
		prev = b
	}
	return ""
}

func podFailurePolicy(p *batchv1.PodFailurePolicy, restart corev1.RestartPolicy, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if restart != corev1.RestartPolicyNever {
		errs = append(errs, field.Invalid(fld, nil, "only allowed when template.spec.restartPolicy is Never"))
	}
	if len(p.Rules) > 20 {
		errs = append(errs, field.TooMany(fld.Child("rules"), len(p.Rules), 20))
	}
	for i, r := range p.Rules {
		rp := fld.Child("rules").Index(i)
		switch r.Action {
		case batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount:
		default:
			errs = append(errs, field.NotSupported(rp.Child("action"), r.Action, []string{"Count", "FailIndex", "FailJob", "Ignore"}))
		}
		switch {
		case r.OnExitCodes != nil && len(r.OnPodConditions) > 0:
			errs = append(errs, field.Invalid(rp, r, "specifying both OnExitCodes and OnPodConditions is not supported"))
		case r.OnExitCodes == nil && len(r.OnPodConditions) == 0:
			errs = append(errs, field.Invalid(rp, r, "specifying one of OnExitCodes and OnPodConditions is required"))
		}
		if e := r.OnExitCodes; e != nil {
			ep := rp.Child("onExitCodes")
			switch e.Operator {
			case batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn:
			default:
				errs = append(errs, field.NotSupported(ep.Child("operator"), e.Operator, []string{"In", "NotIn"}))
			}
			if len(e.Values) == 0 {
				errs = append(errs, field.Invalid(ep.Child("values"), e.Values, "at least one value is required"))
			}
			for j, v := range e.Values {
				if j > 0 && v <= e.Values[j-1] {
					errs = append(errs, field.Invalid(ep.Child("values").Index(j), v, "must be ordered"))
				}
				if v == 0 && e.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn {
					errs = append(errs, field.Invalid(ep.Child("values").Index(j), v, "must not be 0 for the In operator"))
				}
			}
		}
	}
	return errs
}

// JobUpdate keeps what upstream keeps immutable: the selector, the completion mode, the pod
// failure policy; the template unless the job is suspended and has not started (then its
// scheduling directives may change); completions, except for an elastic Indexed job whose
// completions and parallelism change together.
func JobUpdate(j, old *batchv1.Job) field.ErrorList {
	var errs field.ErrorList
	immutable := func(a, b any, fld *field.Path) {
		if !apiequality.Semantic.DeepEqual(a, b) {
			errs = append(errs, field.Invalid(fld, a, "field is immutable"))
		}
	}
	immutable(j.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))
	immutable(j.Spec.CompletionMode, old.Spec.CompletionMode, specPath.Child("completionMode"))
	immutable(j.Spec.PodFailurePolicy, old.Spec.PodFailurePolicy, specPath.Child("podFailurePolicy"))
	immutable(j.Spec.BackoffLimitPerIndex, old.Spec.BackoffLimitPerIndex, specPath.Child("backoffLimitPerIndex"))
	elastic := j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion &&
		j.Spec.Completions != nil && j.Spec.Parallelism != nil && *j.Spec.Completions == *j.Spec.Parallelism
	if !elastic {
		immutable(j.Spec.Completions, old.Spec.Completions, specPath.Child("completions"))
	}
	suspendedUnstarted := old.Spec.Suspend != nil && *old.Spec.Suspend && old.Status.StartTime == nil
	if suspendedUnstarted {
		// Only the pod's scheduling directives may change.
		a, b := j.Spec.Template.DeepCopy(), old.Spec.Template.DeepCopy()
		for _, t := range []*corev1.PodTemplateSpec{a, b} {
			t.Spec.NodeSelector, t.Spec.Affinity, t.Spec.Tolerations, t.Spec.SchedulingGates = nil, nil, nil, nil
			t.Labels, t.Annotations = nil, nil
		}
		immutable(a, b, specPath.Child("template"))
	} else {
		immutable(j.Spec.Template, old.Spec.Template, specPath.Child("template"))
	}
	return errs
}

// CronJob validates a CronJob.
func CronJob(c *batchv1.CronJob) field.ErrorList {
	errs := ObjectMeta(&c.ObjectMeta, true, DNSSubdomain)
	// Its jobs are named <name>-<11 digits>, and a job name must fit a label value.
	if len(c.Name) > 52 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), c.Name, "must be no more than 52 characters"))
	}
	errs = append(errs, CronSchedule(c.Spec.Schedule, c.Spec.TimeZone, specPath)...)
	switch c.Spec.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	default:
		errs = append(errs, field.NotSupported(specPath.Child("concurrencyPolicy"), c.Spec.ConcurrencyPolicy, []string{"Allow", "Forbid", "Replace"}))
	}
	for name, v := range map[string]*int32{"successfulJobsHistoryLimit": c.Spec.SuccessfulJobsHistoryLimit, "failedJobsHistoryLimit": c.Spec.FailedJobsHistoryLimit} {
		if v != nil && *v < 0 {
			errs = append(errs, field.Invalid(specPath.Child(name), *v, "must be greater than or equal to 0"))
		}
	}
	if d := c.Spec.StartingDeadlineSeconds; d != nil && *d < 0 {
		errs = append(errs, field.Invalid(specPath.Child("startingDeadlineSeconds"), *d, "must be greater than or equal to 0"))
	}
	tp := specPath.Child("jobTemplate")
	errs = append(errs, metadataOfTemplate(&c.Spec.JobTemplate.ObjectMeta, tp.Child("metadata"))...)
	return append(errs, jobSpec(&c.Spec.JobTemplate.Spec, tp.Child("spec"), false)...)
}

func metadataOfTemplate(m *metav1.ObjectMeta, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, metav1validation.ValidateLabels(m.Labels, fld.Child("labels"))...)
	return errs
}

// CronSchedule validates a schedule in cron format (5 fields or a @descriptor) and its time
// zone, with upstream's messages.
func CronSchedule(schedule string, tz *string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	sp := fld.Child("schedule")
	if schedule == "" {
		return field.ErrorList{field.Required(sp, "")}
	}
	if strings.Contains(schedule, "TZ") {
		if tz != nil {
			errs = append(errs, field.Invalid(sp, schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
		} else {
			errs = append(errs, field.Invalid(sp, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
		}
	}
	if err := parseCron(schedule); err != nil {
		errs = append(errs, field.Invalid(sp, schedule, err.Error()))
	}
	if tz != nil {
		tp := fld.Child("timeZone")
		if *tz == "" || strings.EqualFold(*tz, "local") {
			errs = append(errs, field.Invalid(tp, *tz, "unknown time zone "+*tz))
		} else if _, err := time.LoadLocation(*tz); err != nil {
			errs = append(errs, field.Invalid(tp, *tz, err.Error()))
		}
	}
	return errs
}

// parseCron parses a schedule as the CronJob controller does; robfig/cron panics on some
// inputs ("TZ=" alone), which are then errors like any other.
func parseCron(schedule string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unparseable schedule: %v", r)
		}
	}()
	_, err = cron.ParseStandard(schedule)
	return err
}
