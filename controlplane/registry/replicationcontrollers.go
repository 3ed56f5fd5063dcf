package registry

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

// replicationControllers serves core/v1 replicationcontrollers (+status, +scale), the
// ReplicaSets' predecessor that old manifests and the conformance suite still use.
func replicationControllers(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	s := newStrategy(true, true)
	s.validate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validation.ReplicationController(obj.(*corev1.ReplicationController))
	}
	s.validateUpdate = func(obj, old runtime.Object) field.ErrorList {
		n, o := obj.(*corev1.ReplicationController), old.(*corev1.ReplicationController)
		return validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	}
	rcs, err := newREST(opts, resource{
		gr: corev1.Resource("replicationcontrollers"), singular: "replicationcontroller",
		newObj:   func() runtime.Object { return &corev1.ReplicationController{} },
		newList:  func() runtime.Object { return &corev1.ReplicationControllerList{} },
		strategy: s, printer: printers.ReplicationControllers, shortNames: []string{"rc"}, categories: []string{"all"},
		fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.replicas": fmt.Sprint(obj.(*corev1.ReplicationController).Status.Replicas)}
		},
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{
		"replicationcontrollers":        rcs,
		"replicationcontrollers/status": newStatusREST(rcs, statusStrategy{strategy: s}),
		"replicationcontrollers/scale": &ScaleREST{store: rcs.Store, replicas: func(obj runtime.Object) scaleOf {
			rc := obj.(*corev1.ReplicationController)
			return scaleOf{&rc.Spec.Replicas, rc.Status.Replicas, &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}}
		}},
	}, nil
}
