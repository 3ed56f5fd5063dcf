package validation

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func validJob() *batchv1.Job {
	nonIndexed := batchv1.NonIndexedCompletion
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns"}, Spec: batchv1.JobSpec{
		CompletionMode: &nonIndexed,
		Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "i", ImagePullPolicy: corev1.PullIfNotPresent,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile}}, DNSPolicy: corev1.DNSClusterFirst}}}}
}

func TestJobValidation(t *testing.T) {
	if errs := Job(validJob()); len(errs) > 0 {
		t.Fatalf("valid job: %v", errs)
	}
	for _, tc := range []struct {
		name string
		mut  func(*batchv1.Job)
		want string
	}{
		{"restartPolicy Always", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways },
			`spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"`},
		{"negative parallelism", func(j *batchv1.Job) { v := int32(-1); j.Spec.Parallelism = &v }, "spec.parallelism: Invalid value: -1: must be greater than or equal to 0"},
		{"zero deadline", func(j *batchv1.Job) { v := int64(0); j.Spec.ActiveDeadlineSeconds = &v }, "spec.activeDeadlineSeconds: Invalid value: 0: must be greater than 0"},
		{"selector mismatch", func(j *batchv1.Job) { j.Spec.Template.Labels = map[string]string{"a": "c"} }, "`selector` does not match template `labels`"},
		{"indexed without completions", func(j *batchv1.Job) { m := batchv1.IndexedCompletion; j.Spec.CompletionMode = &m },
			"spec.completions: Required value: when completion mode is Indexed"},
		{"long name", func(j *batchv1.Job) { j.Name = strings.Repeat("a", 64) }, "must be no more than 63 characters"},
	} {
		j := validJob()
		tc.mut(j)
		errs := Job(j)
		if !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, errs, tc.want)
		}
	}
}

func TestJobUpdate(t *testing.T) {
	old := validJob()
	n := old.DeepCopy()
	n.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}
	if errs := JobUpdate(n, old); !strings.Contains(errs.ToAggregate().Error(), "spec.selector: Invalid value") {
		t.Errorf("selector change: %v", errs)
	}
	n = old.DeepCopy()
	n.Spec.Template.Spec.Containers[0].Image = "other"
	if errs := JobUpdate(n, old); !strings.Contains(errs.ToAggregate().Error(), "spec.template: Invalid value") {
		t.Errorf("template change of a started job: %v", errs)
	}
	// A suspended job that never started may change its scheduling directives only.
	suspended := old.DeepCopy()
	yes := true
	suspended.Spec.Suspend = &yes
	n = suspended.DeepCopy()
	n.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"}
	if errs := JobUpdate(n, suspended); len(errs) > 0 {
		t.Errorf("scheduling directive of a suspended job: %v", errs)
	}
	n.Spec.Template.Spec.Containers[0].Image = "other"
	if errs := JobUpdate(n, suspended); len(errs) == 0 {
		t.Error("image change of a suspended job accepted")
	}
}

func TestCronJobValidation(t *testing.T) {
	valid := func() *batchv1.CronJob {
		j := validJob()
		return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: batchv1.CronJobSpec{
			Schedule: "*/5 * * * *", ConcurrencyPolicy: batchv1.AllowConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: j.Spec.Template, CompletionMode: j.Spec.CompletionMode}}}}
	}
	if errs := CronJob(valid()); len(errs) > 0 {
		t.Fatalf("valid: %v", errs)
	}
	paris, bogus := "Europe/Paris", "Mars/Olympus"
	for _, tc := range []struct {
		name string
		mut  func(*batchv1.CronJob)
		want string
	}{
		{"bad schedule", func(c *batchv1.CronJob) { c.Spec.Schedule = "61 * * * *" }, "spec.schedule: Invalid value"},
		{"TZ in schedule", func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=UTC * * * * *" }, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"},
		{"TZ and timeZone", func(c *batchv1.CronJob) { c.Spec.Schedule = "CRON_TZ=UTC * * * * *"; c.Spec.TimeZone = &paris }, "cannot use both timeZone field and TZ or CRON_TZ in schedule"},
		{"bare TZ= (robfig panics)", func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=" }, "spec.schedule: Invalid value"},
		{"unknown zone", func(c *batchv1.CronJob) { c.Spec.TimeZone = &bogus }, "spec.timeZone: Invalid value"},
		{"policy", func(c *batchv1.CronJob) { c.Spec.ConcurrencyPolicy = "Sometimes" }, `spec.concurrencyPolicy: Unsupported value: "Sometimes"`},
		{"long name", func(c *batchv1.CronJob) { c.Name = strings.Repeat("c", 53) }, "must be no more than 52 characters"},
	} {
		c := valid()
		tc.mut(c)
		if errs := CronJob(c); !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, errs, tc.want)
		}
	}
	c := valid()
	c.Spec.TimeZone = &paris
	if errs := CronJob(c); len(errs) > 0 {
		t.Errorf("Europe/Paris: %v", errs)
	}
}

func TestReplicationControllerAndBudgetValidation(t *testing.T) {
	j := validJob()
	tmpl := j.Spec.Template.DeepCopy()
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"},
		Spec: corev1.ReplicationControllerSpec{Selector: map[string]string{"a": "b"}, Template: tmpl}}
	if errs := ReplicationController(rc); len(errs) > 0 {
		t.Fatalf("valid rc: %v", errs)
	}
	rc.Spec.Selector = map[string]string{"a": "c"}
	if errs := ReplicationController(rc); !strings.Contains(errs.ToAggregate().Error(), "`selector` does not match template `labels`") {
		t.Errorf("mismatched selector: %v", errs)
	}
	rc.Spec.Template = nil
	if errs := ReplicationController(rc); !strings.Contains(errs.ToAggregate().Error(), "spec.template: Required value") {
		t.Errorf("no template: %v", errs)
	}
}

func TestSuccessPolicyValidation(t *testing.T) {
	j := validJob()
	three, ten := int32(3), int32(10)
	indexed := batchv1.IndexedCompletion
	j.Spec.CompletionMode, j.Spec.Completions = &indexed, &three
	good, overlapping, large := "0,2", "0-1,1", "0-3"
	for _, tc := range []struct {
		rules []batchv1.SuccessPolicyRule
		want  string
	}{
		{[]batchv1.SuccessPolicyRule{{SucceededIndexes: &good}}, ""},
		{nil, "at least one rules must be specified"},
		{[]batchv1.SuccessPolicyRule{{}}, "at least one of succeededCount or succeededIndexes must be specified"},
		{[]batchv1.SuccessPolicyRule{{SucceededCount: &ten}}, "must be less than or equal to 3 (the number of specified completions)"},
		{[]batchv1.SuccessPolicyRule{{SucceededIndexes: &overlapping}}, "must be sorted and must not overlap"},
		{[]batchv1.SuccessPolicyRule{{SucceededIndexes: &large}}, "too large: 3"},
	} {
		c := j.DeepCopy()
		c.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: tc.rules}
		got := Job(c).ToAggregate()
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("rules %+v: %v", tc.rules, got)
		case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
			t.Errorf("rules %+v: %v, want %q", tc.rules, got, tc.want)
		}
	}
}
