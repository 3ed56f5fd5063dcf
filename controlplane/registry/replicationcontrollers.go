package registry

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

// replicationControllers serves core/v1 replicationcontrollers (+status, +scale), the
// ReplicaSets' predecessor that old manifests and the conformance suite still use.
func replicationControllers(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*corev1.ReplicationController]{
		resource: resource{gr: corev1.Resource("replicationcontrollers"), singular: "replicationcontroller",
			newObj:  func() runtime.Object { return &corev1.ReplicationController{} },
			newList: func() runtime.Object { return &corev1.ReplicationControllerList{} },
			printer: printers.ReplicationControllers, shortNames: []string{"rc"}, categories: []string{"all"},
			fields: func(obj runtime.Object) fields.Set {
				return fields.Set{"status.replicas": fmt.Sprint(obj.(*corev1.ReplicationController).Status.Replicas)}
			}},
		namespaced: true, status: true,
		validate: validation.ReplicationController,
		subresources: func(main *REST, _ *strategy) map[string]rest.Storage {
			return map[string]rest.Storage{"replicationcontrollers/scale": &ScaleREST{store: main.Store, replicas: func(obj runtime.Object) scaleOf {
				rc := obj.(*corev1.ReplicationController)
				return scaleOf{&rc.Spec.Replicas, rc.Status.Replicas, &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}}
			}}}
		},
	}))
}
