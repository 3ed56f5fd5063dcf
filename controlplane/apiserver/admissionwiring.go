package apiserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	resourcequotaapi "k8s.io/apiserver/pkg/admission/plugin/resourcequota/apis/resourcequota"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	quotageneric "k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/controlplane/apiserver/admission"
	skiffquota "github.com/skiff-sh/skiff/controlplane/quota"
)

// admissionClasses reads priority, runtime and storage classes from their stores for the
// admission plugins that resolve them.
func admissionClasses(stores map[schema.GroupVersion]map[string]rest.Storage) admission.Classes {
	getter := func(gv schema.GroupVersion, resource string) func(ctx context.Context, name string) (runtime.Object, error) {
		g := stores[gv][resource].(rest.Getter)
		return func(ctx context.Context, name string) (runtime.Object, error) {
			obj, err := g.Get(ctx, name, &metav1.GetOptions{ResourceVersion: "0"})
			if apierrors.IsNotFound(err) {
				obj, err = g.Get(ctx, name, &metav1.GetOptions{})
			}
			return obj, err
		}
	}
	lister := func(gv schema.GroupVersion, resource string) func(ctx context.Context) (runtime.Object, error) {
		l := stores[gv][resource].(rest.Lister)
		return func(ctx context.Context) (runtime.Object, error) {
			return l.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
		}
	}
	getPC, listPC := getter(schedulingv1.SchemeGroupVersion, "priorityclasses"), lister(schedulingv1.SchemeGroupVersion, "priorityclasses")
	getRC, listSC := getter(nodev1.SchemeGroupVersion, "runtimeclasses"), lister(storagev1.SchemeGroupVersion, "storageclasses")
	return admission.Classes{
		PriorityClass: func(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
			obj, err := getPC(ctx, name)
			if err != nil {
				return nil, err
			}
			return obj.(*schedulingv1.PriorityClass), nil
		},
		PriorityClasses: func(ctx context.Context) ([]*schedulingv1.PriorityClass, error) {
			obj, err := listPC(ctx)
			if err != nil {
				return nil, err
			}
			var out []*schedulingv1.PriorityClass
			for i := range obj.(*schedulingv1.PriorityClassList).Items {
				out = append(out, &obj.(*schedulingv1.PriorityClassList).Items[i])
			}
			return out, nil
		},
		RuntimeClass: func(ctx context.Context, name string) (*nodev1.RuntimeClass, error) {
			obj, err := getRC(ctx, name)
			if err != nil {
				return nil, err
			}
			return obj.(*nodev1.RuntimeClass), nil
		},
		StorageClasses: func(ctx context.Context) ([]*storagev1.StorageClass, error) {
			obj, err := listSC(ctx)
			if err != nil {
				return nil, err
			}
			var out []*storagev1.StorageClass
			for i := range obj.(*storagev1.StorageClassList).Items {
				out = append(out, &obj.(*storagev1.StorageClassList).Items[i])
			}
			return out, nil
		},
	}
}

// newQuotaAdmission builds the ResourceQuota admission plugin over the loopback client and
// its informer factory, which is started once the server serves.
func newQuotaAdmission(client kubernetes.Interface, factory informers.SharedInformerFactory, stop <-chan struct{}) (*resourcequota.QuotaAdmission, error) {
	plugin, err := resourcequota.NewResourceQuota(&resourcequotaapi.Configuration{}, 5)
	if err != nil {
		return nil, err
	}
	plugin.SetDrainedNotification(stop)
	plugin.SetExternalKubeClientSet(client)
	plugin.SetExternalKubeInformerFactory(factory)
	plugin.SetQuotaConfiguration(quotageneric.NewConfiguration(skiffquota.Evaluators(nil, clock.RealClock{}), nil))
	if err := plugin.ValidateInitialization(); err != nil {
		return nil, fmt.Errorf("resource quota admission: %w", err)
	}
	return plugin, nil
}

// limitRanges lists a namespace's LimitRanges from their store, for LimitRanger.
func limitRanges(l rest.Lister) func(ctx context.Context, namespace string) ([]*corev1.LimitRange, error) {
	return func(ctx context.Context, namespace string) ([]*corev1.LimitRange, error) {
		obj, err := l.List(genericapirequest.WithNamespace(ctx, namespace), &metainternalversion.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, err
		}
		items := obj.(*corev1.LimitRangeList).Items
		out := make([]*corev1.LimitRange, len(items))
		for i := range items {
			out[i] = &items[i]
		}
		return out, nil
	}
}

// podsIn lists a namespace's pods from their store, for PodSecurity's namespace checks.
func podsIn(l rest.Lister) func(ctx context.Context, namespace string) ([]*corev1.Pod, error) {
	return func(ctx context.Context, namespace string) ([]*corev1.Pod, error) {
		obj, err := l.List(genericapirequest.WithNamespace(ctx, namespace), &metainternalversion.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, err
		}
		items := obj.(*corev1.PodList).Items
		out := make([]*corev1.Pod, len(items))
		for i := range items {
			out[i] = &items[i]
		}
		return out, nil
	}
}
