// Package scheme owns the runtime.Scheme that skiff's API server serves: the k8s.io/api types of
// every group skiff installs, registered both under their external version and as the group's
// internal (hub) version, plus the defaulting functions and field-label conversions that
// upstream keeps in k8s.io/kubernetes.
//
// skiff does not keep a separate internal type system: the versioned k8s.io/api structs are the
// in-memory form, so "conversion" between the internal and the served version is a copy. This
// is what keeps the API server compact.
package scheme

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Scheme is the scheme every API server component of skiff uses. It is built once, in init,
// because runtime.Scheme is not safe to mutate once requests are being served.
var Scheme = runtime.NewScheme()

// Codecs serializes the Scheme's types as JSON, YAML and protobuf.
var Codecs = serializer.NewCodecFactory(Scheme)

// ParameterCodec decodes query parameters into option structs.
var ParameterCodec = runtime.NewParameterCodec(Scheme)

// Served lists every group version skiff's API server installs, in discovery order.
var Served = []schema.GroupVersion{
	corev1.SchemeGroupVersion,
	appsv1.SchemeGroupVersion,
	batchv1.SchemeGroupVersion,
	discoveryv1.SchemeGroupVersion,
	coordinationv1.SchemeGroupVersion,
	eventsv1.SchemeGroupVersion,
	networkingv1.SchemeGroupVersion,
	policyv1.SchemeGroupVersion,
	authenticationv1.SchemeGroupVersion,
	authorizationv1.SchemeGroupVersion,
	rbacv1.SchemeGroupVersion,
	certificatesv1.SchemeGroupVersion,
	storagev1.SchemeGroupVersion,
	nodev1.SchemeGroupVersion,
	schedulingv1.SchemeGroupVersion,
	resourcev1.SchemeGroupVersion,
}

// groups pairs each group's registration with the Go package that defines its types, so the
// internal version gets only the group's own kinds (not the meta/v1 option types).
var groups = []struct {
	gv      schema.GroupVersion
	install func(*runtime.Scheme) error
	sample  any
}{
	{corev1.SchemeGroupVersion, corev1.AddToScheme, corev1.Pod{}},
	{appsv1.SchemeGroupVersion, appsv1.AddToScheme, appsv1.Deployment{}},
	{batchv1.SchemeGroupVersion, batchv1.AddToScheme, batchv1.Job{}},
	{discoveryv1.SchemeGroupVersion, discoveryv1.AddToScheme, discoveryv1.EndpointSlice{}},
	{coordinationv1.SchemeGroupVersion, coordinationv1.AddToScheme, coordinationv1.Lease{}},
	{eventsv1.SchemeGroupVersion, eventsv1.AddToScheme, eventsv1.Event{}},
	{networkingv1.SchemeGroupVersion, networkingv1.AddToScheme, networkingv1.NetworkPolicy{}},
	{policyv1.SchemeGroupVersion, policyv1.AddToScheme, policyv1.PodDisruptionBudget{}},
	{autoscalingv1.SchemeGroupVersion, autoscalingv1.AddToScheme, autoscalingv1.Scale{}},
	{authenticationv1.SchemeGroupVersion, authenticationv1.AddToScheme, authenticationv1.TokenRequest{}},
	{certificatesv1.SchemeGroupVersion, certificatesv1.AddToScheme, certificatesv1.CertificateSigningRequest{}},
	{authorizationv1.SchemeGroupVersion, authorizationv1.AddToScheme, authorizationv1.SubjectAccessReview{}},
	{rbacv1.SchemeGroupVersion, rbacv1.AddToScheme, rbacv1.Role{}},
	{storagev1.SchemeGroupVersion, storagev1.AddToScheme, storagev1.StorageClass{}},
	{nodev1.SchemeGroupVersion, nodev1.AddToScheme, nodev1.RuntimeClass{}},
	{schedulingv1.SchemeGroupVersion, schedulingv1.AddToScheme, schedulingv1.PriorityClass{}},
	{resourcev1.SchemeGroupVersion, resourcev1.AddToScheme, resourcev1.ResourceClaim{}},
}

func init() {
	utilruntime.Must(AddToScheme(Scheme))
}

// AddToScheme registers skiff's served types, their internal twins, defaults and field labels.
func AddToScheme(s *runtime.Scheme) error {
	for _, g := range groups {
		if err := g.install(s); err != nil {
			return err
		}
		pkg := reflect.TypeOf(g.sample).PkgPath()
		internal := schema.GroupVersion{Group: g.gv.Group, Version: runtime.APIVersionInternal}
		for kind, t := range s.KnownTypes(g.gv) {
			if t.PkgPath() != pkg {
				continue
			}
			s.AddKnownTypeWithName(internal.WithKind(kind), reflect.New(t).Interface().(runtime.Object))
		}
	}
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	s.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	if err := addDefaultingFuncs(s); err != nil {
		return err
	}
	if err := addFieldLabelConversions(s); err != nil {
		return err
	}
	if err := addParameterConversions(s); err != nil {
		return err
	}
	for _, gv := range Served {
		if err := s.SetVersionPriority(gv); err != nil {
			return err
		}
	}
	return nil
}
