package registry

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

// Labels upstream puts on a Job's pod template, and selects its pods by, unless the Job's
// selector is manual.
const (
	LabelControllerUID       = "batch.kubernetes.io/controller-uid"
	LabelJobName             = "batch.kubernetes.io/job-name"
	legacyLabelControllerUID = "controller-uid"
	legacyLabelJobName       = "job-name"
)

func batch(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	out := map[string]rest.Storage{}

	js := newStrategy(true, true)
	js.prepareForCreate = func(obj runtime.Object) { obj.(*batchv1.Job).Status = batchv1.JobStatus{} }
	js.validate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		j := obj.(*batchv1.Job)
		// The UID is set by now (validation runs after the system fields), so the selector
		// can be generated here, as upstream's strategy does.
		GenerateJobSelector(j)
		return validation.Job(j)
	}
	js.validateUpdate = func(obj, old runtime.Object) field.ErrorList {
		n, o := obj.(*batchv1.Job), old.(*batchv1.Job)
		return append(validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validation.JobUpdate(n, o)...)
	}
	jobs, err := newREST(opts, resource{
		gr: batchv1.Resource("jobs"), singular: "job",
		newObj: func() runtime.Object { return &batchv1.Job{} }, newList: func() runtime.Object { return &batchv1.JobList{} },
		strategy: js, printer: printers.Jobs, categories: []string{"all"},
		fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.successful": fmt.Sprint(obj.(*batchv1.Job).Status.Succeeded)}
		},
	})
	if err != nil {
		return nil, err
	}
	out["jobs"] = jobs
	out["jobs/status"] = newStatusREST(jobs, statusStrategy{strategy: js})

	cs := newStrategy(true, true)
	cs.prepareForCreate = func(obj runtime.Object) { obj.(*batchv1.CronJob).Status = batchv1.CronJobStatus{} }
	cs.validate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validation.CronJob(obj.(*batchv1.CronJob))
	}
	cs.validateUpdate = func(obj, old runtime.Object) field.ErrorList {
		n, o := obj.(*batchv1.CronJob), old.(*batchv1.CronJob)
		return validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	}
	cronjobs, err := newREST(opts, resource{
		gr: batchv1.Resource("cronjobs"), singular: "cronjob",
		newObj: func() runtime.Object { return &batchv1.CronJob{} }, newList: func() runtime.Object { return &batchv1.CronJobList{} },
		strategy: cs, printer: printers.CronJobs, shortNames: []string{"cj"}, categories: []string{"all"},
	})
	if err != nil {
		return nil, err
	}
	out["cronjobs"] = cronjobs
	out["cronjobs/status"] = newStatusREST(cronjobs, statusStrategy{strategy: cs})
	return out, nil
}

// GenerateJobSelector gives a Job without a manual selector upstream's: its UID, on the
// selector and the template's labels, with the job's name beside it.
func GenerateJobSelector(j *batchv1.Job) {
	if j.Spec.ManualSelector != nil && *j.Spec.ManualSelector {
		return
	}
	uid := string(j.UID)
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	for k, v := range map[string]string{LabelControllerUID: uid, legacyLabelControllerUID: uid, LabelJobName: j.Name, legacyLabelJobName: j.Name} {
		if _, set := j.Spec.Template.Labels[k]; !set {
			j.Spec.Template.Labels[k] = v
		}
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{LabelControllerUID: uid}}
	}
}
