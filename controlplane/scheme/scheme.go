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

// API is one group version skiff's API server serves: one row of the table that the scheme,
// discovery, the aggregator's APIServices, storage (registry.Storage) and the OpenAPI
// generation (openapi/generate.go) all read, so adding a group is adding a row here; the
// tests of registry and openapi fail when a row has no stores or no definitions.
type API struct {
	schema.GroupVersion
	// install registers the version's types; sample is one of them (the Go package whose
	// kinds get internal twins, not the meta/v1 option types it also registers).
	install func(*runtime.Scheme) error
	sample  any
	// only, if set, limits the internal twins to these kinds (autoscaling/v1's Scale: its
	// HorizontalPodAutoscaler is served as autoscaling/v2's).
	only []string
	// GroupPriorityMinimum and VersionPriority are its APIService's, upstream's (the
	// kube-apiserver's table), so discovery lists groups in upstream's order and kubectl
	// resolves a short resource name ("events") to the same group.
	GroupPriorityMinimum, VersionPriority int32
}

// Sample is one of the version's types; TypesPackage the Go package defining them (where
// their OpenAPI definitions come from).
func (a API) Sample() reflect.Type { return reflect.TypeOf(a.sample) }
func (a API) TypesPackage() string { return a.Sample().PkgPath() }

// APIs is every group version skiff serves, in discovery order; a group served in several
// versions prefers them in this order (autoscaling: v2, then v1).
var APIs = []API{
	{GroupVersion: corev1.SchemeGroupVersion, install: corev1.AddToScheme, sample: corev1.Pod{}, GroupPriorityMinimum: 18000, VersionPriority: 1},
	{GroupVersion: appsv1.SchemeGroupVersion, install: appsv1.AddToScheme, sample: appsv1.Deployment{}, GroupPriorityMinimum: 17800, VersionPriority: 15},
	{GroupVersion: batchv1.SchemeGroupVersion, install: batchv1.AddToScheme, sample: batchv1.Job{}, GroupPriorityMinimum: 17400, VersionPriority: 15},
	{GroupVersion: discoveryv1.SchemeGroupVersion, install: discoveryv1.AddToScheme, sample: discoveryv1.EndpointSlice{}, GroupPriorityMinimum: 16200, VersionPriority: 15},
	{GroupVersion: coordinationv1.SchemeGroupVersion, install: coordinationv1.AddToScheme, sample: coordinationv1.Lease{}, GroupPriorityMinimum: 16500, VersionPriority: 15},
	{GroupVersion: eventsv1.SchemeGroupVersion, install: eventsv1.AddToScheme, sample: eventsv1.Event{}, GroupPriorityMinimum: 17750, VersionPriority: 15},
	{GroupVersion: networkingv1.SchemeGroupVersion, install: networkingv1.AddToScheme, sample: networkingv1.NetworkPolicy{}, GroupPriorityMinimum: 17200, VersionPriority: 15},
	{GroupVersion: policyv1.SchemeGroupVersion, install: policyv1.AddToScheme, sample: policyv1.PodDisruptionBudget{}, GroupPriorityMinimum: 17100, VersionPriority: 15},
	{GroupVersion: authenticationv1.SchemeGroupVersion, install: authenticationv1.AddToScheme, sample: authenticationv1.TokenRequest{}, GroupPriorityMinimum: 17700, VersionPriority: 15},
	{GroupVersion: authorizationv1.SchemeGroupVersion, install: authorizationv1.AddToScheme, sample: authorizationv1.SubjectAccessReview{}, GroupPriorityMinimum: 17600, VersionPriority: 15},
	{GroupVersion: rbacv1.SchemeGroupVersion, install: rbacv1.AddToScheme, sample: rbacv1.Role{}, GroupPriorityMinimum: 17000, VersionPriority: 15},
	{GroupVersion: certificatesv1.SchemeGroupVersion, install: certificatesv1.AddToScheme, sample: certificatesv1.CertificateSigningRequest{}, GroupPriorityMinimum: 17300, VersionPriority: 15},
	{GroupVersion: storagev1.SchemeGroupVersion, install: storagev1.AddToScheme, sample: storagev1.StorageClass{}, GroupPriorityMinimum: 16800, VersionPriority: 15},
	{GroupVersion: nodev1.SchemeGroupVersion, install: nodev1.AddToScheme, sample: nodev1.RuntimeClass{}, GroupPriorityMinimum: 16300, VersionPriority: 15},
	{GroupVersion: schedulingv1.SchemeGroupVersion, install: schedulingv1.AddToScheme, sample: schedulingv1.PriorityClass{}, GroupPriorityMinimum: 16600, VersionPriority: 15},
	{GroupVersion: resourcev1.SchemeGroupVersion, install: resourcev1.AddToScheme, sample: resourcev1.ResourceClaim{}, GroupPriorityMinimum: 16200, VersionPriority: 21},
	{GroupVersion: autoscalingv2.SchemeGroupVersion, install: autoscalingv2.AddToScheme, sample: autoscalingv2.HorizontalPodAutoscaler{}, GroupPriorityMinimum: 17500, VersionPriority: 30},
	{GroupVersion: autoscalingv1.SchemeGroupVersion, install: autoscalingv1.AddToScheme, sample: autoscalingv1.Scale{}, only: []string{"Scale"}, GroupPriorityMinimum: 17500, VersionPriority: 15},
	{GroupVersion: flowcontrolv1.SchemeGroupVersion, install: flowcontrolv1.AddToScheme, sample: flowcontrolv1.FlowSchema{}, GroupPriorityMinimum: 16100, VersionPriority: 21},
	{GroupVersion: admissionregistrationv1.SchemeGroupVersion, install: admissionregistrationv1.AddToScheme, sample: admissionregistrationv1.ValidatingWebhookConfiguration{}, GroupPriorityMinimum: 16700, VersionPriority: 15},
	{GroupVersion: metricsv1beta1.SchemeGroupVersion, install: metricsv1beta1.AddToScheme, sample: metricsv1beta1.NodeMetrics{}, GroupPriorityMinimum: 100, VersionPriority: 100},
	{GroupVersion: storagemigrationv1.SchemeGroupVersion, install: storagemigrationv1.AddToScheme, sample: storagemigrationv1.StorageVersionMigration{}, GroupPriorityMinimum: 15800, VersionPriority: 15},
}

// Served lists every group version skiff's API server installs, in discovery order (APIs').
var Served = func() []schema.GroupVersion {
	out := make([]schema.GroupVersion, len(APIs))
	for i, a := range APIs {
		out[i] = a.GroupVersion
	}
	return out
}()

func init() {
	utilruntime.Must(AddToScheme(Scheme))
}

// AddToScheme registers skiff's served types, their internal twins, defaults and field labels.
func AddToScheme(s *runtime.Scheme) error {
	for _, g := range APIs {
		if err := g.install(s); err != nil {
			return err
		}
		pkg := g.TypesPackage()
		internal := schema.GroupVersion{Group: g.Group, Version: runtime.APIVersionInternal}
		for kind, t := range s.KnownTypes(g.GroupVersion) {
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
