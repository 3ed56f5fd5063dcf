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
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
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
	autoscalingv2.SchemeGroupVersion,
	autoscalingv1.SchemeGroupVersion,
	flowcontrolv1.SchemeGroupVersion,
	admissionregistrationv1.SchemeGroupVersion,
	metricsv1beta1.SchemeGroupVersion,
	storagemigrationv1.SchemeGroupVersion,
}

// groups pairs each group's registration with the Go package that defines its types, so the
// internal version gets only the group's own kinds (not the meta/v1 option types).
var groups = []struct {
	gv      schema.GroupVersion
	install func(*runtime.Scheme) error
	sample  any
	// only, if set, limits the internal twins to these kinds (autoscaling/v1's Scale: its
	// HorizontalPodAutoscaler is served as autoscaling/v2's).
	only []string
}{
	{gv: corev1.SchemeGroupVersion, install: corev1.AddToScheme, sample: corev1.Pod{}},
	{gv: appsv1.SchemeGroupVersion, install: appsv1.AddToScheme, sample: appsv1.Deployment{}},
	{gv: batchv1.SchemeGroupVersion, install: batchv1.AddToScheme, sample: batchv1.Job{}},
	{gv: discoveryv1.SchemeGroupVersion, install: discoveryv1.AddToScheme, sample: discoveryv1.EndpointSlice{}},
	{gv: coordinationv1.SchemeGroupVersion, install: coordinationv1.AddToScheme, sample: coordinationv1.Lease{}},
	{gv: eventsv1.SchemeGroupVersion, install: eventsv1.AddToScheme, sample: eventsv1.Event{}},
	{gv: networkingv1.SchemeGroupVersion, install: networkingv1.AddToScheme, sample: networkingv1.NetworkPolicy{}},
	{gv: policyv1.SchemeGroupVersion, install: policyv1.AddToScheme, sample: policyv1.PodDisruptionBudget{}},
	{gv: autoscalingv1.SchemeGroupVersion, install: autoscalingv1.AddToScheme, sample: autoscalingv1.Scale{}, only: []string{"Scale"}},
	{gv: authenticationv1.SchemeGroupVersion, install: authenticationv1.AddToScheme, sample: authenticationv1.TokenRequest{}},
	{gv: certificatesv1.SchemeGroupVersion, install: certificatesv1.AddToScheme, sample: certificatesv1.CertificateSigningRequest{}},
	{gv: authorizationv1.SchemeGroupVersion, install: authorizationv1.AddToScheme, sample: authorizationv1.SubjectAccessReview{}},
	{gv: rbacv1.SchemeGroupVersion, install: rbacv1.AddToScheme, sample: rbacv1.Role{}},
	{gv: storagev1.SchemeGroupVersion, install: storagev1.AddToScheme, sample: storagev1.StorageClass{}},
	{gv: nodev1.SchemeGroupVersion, install: nodev1.AddToScheme, sample: nodev1.RuntimeClass{}},
	{gv: schedulingv1.SchemeGroupVersion, install: schedulingv1.AddToScheme, sample: schedulingv1.PriorityClass{}},
	{gv: resourcev1.SchemeGroupVersion, install: resourcev1.AddToScheme, sample: resourcev1.ResourceClaim{}},
	{gv: autoscalingv2.SchemeGroupVersion, install: autoscalingv2.AddToScheme, sample: autoscalingv2.HorizontalPodAutoscaler{}},
	{gv: flowcontrolv1.SchemeGroupVersion, install: flowcontrolv1.AddToScheme, sample: flowcontrolv1.FlowSchema{}},
	{gv: admissionregistrationv1.SchemeGroupVersion, install: admissionregistrationv1.AddToScheme, sample: admissionregistrationv1.ValidatingWebhookConfiguration{}},
	{gv: metricsv1beta1.SchemeGroupVersion, install: metricsv1beta1.AddToScheme, sample: metricsv1beta1.NodeMetrics{}},
	{gv: storagemigrationv1.SchemeGroupVersion, install: storagemigrationv1.AddToScheme, sample: storagemigrationv1.StorageVersionMigration{}},
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
			if t.PkgPath() != pkg || (g.only != nil && !slices.Contains(g.only, kind)) {
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
	if err := addAutoscalingV1Conversions(s); err != nil {
		return err
	}
	// A group served in several versions prefers them in Served's order (autoscaling: v2, then v1).
	for _, versions := range GroupVersions() {
		if err := s.SetVersionPriority(versions...); err != nil {
			return err
		}
	}
	return nil
}

// GroupVersions is Served grouped by API group, in Served's order, each group's versions
// preferred first.
func GroupVersions() [][]schema.GroupVersion {
	var out [][]schema.GroupVersion
	index := map[string]int{}
	for _, gv := range Served {
		i, ok := index[gv.Group]
		if !ok {
			i = len(out)
			index[gv.Group] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], gv)
	}
	return out
}
