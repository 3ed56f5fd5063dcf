package podautoscaler

import (
	"context"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
)

// scaleClient adapts client-go's polymorphic scale client, which reaches the scale
// subresource of any kind discovery knows (custom resources too).
type scaleClient struct{ c scale.ScalesGetter }

func (s scaleClient) Get(ctx context.Context, ns string, gr schema.GroupResource, name string) (*autoscalingv1.Scale, error) {
	return s.c.Scales(ns).Get(ctx, gr, name, metav1.GetOptions{})
}

func (s scaleClient) Update(ctx context.Context, ns string, gr schema.GroupResource, sc *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
	return s.c.Scales(ns).Update(ctx, gr, sc, metav1.UpdateOptions{})
}

// NewForConfig builds the controller's scale client and kind-to-resource mapping from
// discovery, as kube-controller-manager does.
func NewForConfig(cfg *rest.Config, client kubernetes.Interface) (Scales, func(kind, apiVersion string) (schema.GroupResource, error), error) {
	cached := memory.NewMemCacheClient(client.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	sc, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return nil, nil, err
	}
	mapping := func(kind, apiVersion string) (schema.GroupResource, error) {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return schema.GroupResource{}, err
		}
		m, err := mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
		if err != nil {
			mapper.Reset() // a kind served since the last discovery
			return schema.GroupResource{}, err
		}
		return m.Resource.GroupResource(), nil
	}
	return scaleClient{sc}, mapping, nil
}
