package registry

import (
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

// batch serves batch/v1 Jobs and CronJobs (+status).
func batch(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*batchv1.Job]{
				resource: resource{gr: batchv1.Resource("jobs"), singular: "job",
					newObj: func() runtime.Object { return &batchv1.Job{} }, newList: func() runtime.Object { return &batchv1.JobList{} },
					printer: printers.Jobs, categories: []string{"all"},
					fields: func(obj runtime.Object) fields.Set {
						return fields.Set{"status.successful": fmt.Sprint(obj.(*batchv1.Job).Status.Succeeded)}
					}},
				namespaced: true, status: true,
				validate: func(j *batchv1.Job) field.ErrorList {
					// The UID is set by now (validation runs after the system fields), so the
					// selector can be generated here, as upstream's strategy does.
					GenerateJobSelector(j)
					return validation.Job(j)
				},
				validateUpdate: func(n, o *batchv1.Job) field.ErrorList {
					return append(validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validation.JobUpdate(n, o)...)
				},
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*batchv1.CronJob]{
				resource: resource{gr: batchv1.Resource("cronjobs"), singular: "cronjob",
					newObj: func() runtime.Object { return &batchv1.CronJob{} }, newList: func() runtime.Object { return &batchv1.CronJobList{} },
					printer: printers.CronJobs, shortNames: []string{"cj"}, categories: []string{"all"}},
				namespaced: true, status: true,
				validate: validation.CronJob,
			}))
		},
	)
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
