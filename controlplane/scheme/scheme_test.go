package scheme

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func internal(group, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: group, Version: runtime.APIVersionInternal, Kind: kind}
}

func TestSchemeRecognizes(t *testing.T) {
	for _, tc := range []struct {
		gvk  schema.GroupVersionKind
		want bool
	}{
		{corev1.SchemeGroupVersion.WithKind("Pod"), true},
		{internal("", "Pod"), true},
		{internal("", "PodList"), true},
		{corev1.SchemeGroupVersion.WithKind("Service"), true},
		{appsv1.SchemeGroupVersion.WithKind("Deployment"), true},
		{internal("apps", "Deployment"), true},
		{internal("discovery.k8s.io", "EndpointSlice"), true},
		{internal("coordination.k8s.io", "Lease"), true},
		{internal("events.k8s.io", "Event"), true},
		{internal("networking.k8s.io", "NetworkPolicy"), true},
		{internal("autoscaling", "Scale"), true},
		{internal("authentication.k8s.io", "TokenRequest"), true},
		{schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "Event"}, true},
		// Only a group's own kinds get an internal twin, not meta/v1's option types.
		{internal("", "ListOptions"), false},
		{internal("apps", "DeleteOptions"), false},
		{schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, true},
		{internal("batch", "CronJob"), true},
		{schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Bogus"}, false},
		{schema.GroupVersionKind{Version: "v1", Kind: "Bogus"}, false},
	} {
		if got := Scheme.Recognizes(tc.gvk); got != tc.want {
			t.Errorf("Recognizes(%s) = %v, want %v", tc.gvk, got, tc.want)
		}
	}
}

func TestInternalTwinIsTheSameType(t *testing.T) {
	obj, err := Scheme.New(internal("", "Pod"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := obj.(*corev1.Pod); !ok {
		t.Fatalf("internal Pod is %T, want *v1.Pod", obj)
	}
	kinds, _, err := Scheme.ObjectKinds(&corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kinds, corev1.SchemeGroupVersion.WithKind("Pod")) || !slices.Contains(kinds, internal("", "Pod")) {
		t.Errorf("kinds of *v1.Pod = %v, want v1 and internal", kinds)
	}

	in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	out, err := Scheme.ConvertToVersion(in, schema.GroupVersion{Version: runtime.APIVersionInternal})
	if err != nil {
		t.Fatal(err)
	}
	pod, ok := out.(*corev1.Pod)
	if !ok || pod.Name != "p" || pod.Spec.NodeName != "n1" {
		t.Fatalf("converted to internal: %T %+v", out, out)
	}
	back, err := Scheme.ConvertToVersion(pod, corev1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	if gvk := back.GetObjectKind().GroupVersionKind(); gvk != corev1.SchemeGroupVersion.WithKind("Pod") {
		t.Errorf("converted back kind = %s", gvk)
	}
}

func TestVersionPriority(t *testing.T) {
	for _, versions := range GroupVersions() {
		got := Scheme.PrioritizedVersionsForGroup(versions[0].Group)
		if !slices.Equal(got, versions) {
			t.Errorf("PrioritizedVersionsForGroup(%q) = %v, want %v", versions[0].Group, got, versions)
		}
	}
}

// autoscaling/v1 and v2 serve the same HPAs: what v1 cannot say survives a round trip.
func TestHPAv1RoundTrip(t *testing.T) {
	v2 := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "h", Annotations: map[string]string{"keep": "me"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 5, MinReplicas: ptr.To[int32](2),
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "d", APIVersion: "apps/v1"},
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](70)}}},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}},
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](30)}}},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 3, DesiredReplicas: 4,
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "R"}}}}
	DefaultHPA(v2)
	obj, err := Scheme.ConvertToVersion(v2.DeepCopy(), autoscalingv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	v1 := obj.(*autoscalingv1.HorizontalPodAutoscaler)
	if *v1.Spec.TargetCPUUtilizationPercentage != 70 || v1.Status.DesiredReplicas != 4 || v1.Annotations["keep"] != "me" ||
		v1.Annotations[AnnotationV2Metrics] == "" || v1.Annotations[AnnotationV2Behavior] == "" || v1.Annotations[AnnotationConditions] == "" {
		t.Fatalf("v1 view: %+v %v", v1.Spec, v1.Annotations)
	}
	back := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := Scheme.Convert(v1, back, nil); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(back.Spec, v2.Spec) || !apiequality.Semantic.DeepEqual(back.Status, v2.Status) ||
		!apiequality.Semantic.DeepEqual(back.Annotations, v2.Annotations) {
		t.Errorf("round trip lost something:\n%+v\n%+v\nannotations %v", back.Spec, v2.Spec, back.Annotations)
	}
}

func TestSchemeDefault(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:latest",
		Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}
	Scheme.Default(pod)
	if pod.Spec.RestartPolicy != corev1.RestartPolicyAlways || pod.Spec.SchedulerName != corev1.DefaultSchedulerName ||
		pod.Spec.EnableServiceLinks == nil || pod.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways ||
		pod.Spec.Containers[0].Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("Scheme.Default did not apply DefaultPod: %+v", pod.Spec)
	}

	svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}}
	Scheme.Default(svc)
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Ports[0].TargetPort.IntVal != 8080 {
		t.Errorf("service not defaulted: %+v", svc.Spec)
	}

	sec := &corev1.Secret{}
	Scheme.Default(sec)
	if sec.Type != corev1.SecretTypeOpaque {
		t.Errorf("secret type = %q", sec.Type)
	}
	tls := &corev1.Secret{Type: corev1.SecretTypeTLS}
	Scheme.Default(tls)
	if tls.Type != corev1.SecretTypeTLS {
		t.Errorf("explicit secret type overwritten: %q", tls.Type)
	}

	ns := &corev1.Namespace{}
	Scheme.Default(ns)
	if ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("namespace phase = %q", ns.Status.Phase)
	}

	node := &corev1.Node{Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}}}
	Scheme.Default(node)
	if q := node.Status.Allocatable[corev1.ResourcePods]; q.String() != "110" {
		t.Errorf("allocatable = %v, want capacity", node.Status.Allocatable)
	}

	rs := &appsv1.ReplicaSet{}
	Scheme.Default(rs)
	if rs.Spec.Replicas == nil || *rs.Spec.Replicas != 1 || rs.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("replicaset not defaulted: %+v", rs.Spec)
	}

	dep := &appsv1.Deployment{}
	Scheme.Default(dep)
	if dep.Spec.ProgressDeadlineSeconds == nil || *dep.Spec.ProgressDeadlineSeconds != 600 {
		t.Errorf("deployment not defaulted: %+v", dep.Spec)
	}

	es := &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{}}}
	Scheme.Default(es)
	if p := es.Ports[0].Protocol; p == nil || *p != corev1.ProtocolTCP {
		t.Errorf("endpointslice port protocol = %v", p)
	}

	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}}}}}
	Scheme.Default(ep)
	if p := ep.Subsets[0].Ports[0].Protocol; p != corev1.ProtocolTCP {
		t.Errorf("endpoints port protocol = %q", p)
	}
}

func TestSchemeDecodeDefaults(t *testing.T) {
	body := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},` +
		`"spec":{"containers":[{"name":"c","image":"nginx:1.2"}]}}`)
	obj, gvk, err := Codecs.UniversalDecoder(corev1.SchemeGroupVersion).Decode(body, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		t.Fatalf("decoded %T (%v)", obj, gvk)
	}
	if pod.Name != "p" || pod.Spec.DNSPolicy != corev1.DNSClusterFirst || pod.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("decoded pod not defaulted: %+v", pod)
	}
}

func TestFieldLabelConversion(t *testing.T) {
	pod := corev1.SchemeGroupVersion.WithKind("Pod")
	for _, tc := range []struct {
		gvk   schema.GroupVersionKind
		label string
		ok    bool
	}{
		{pod, "spec.nodeName", true},
		{pod, "status.phase", true},
		{pod, "metadata.name", true},
		{pod, "metadata.namespace", true},
		{pod, "spec.bogus", false},
		{pod, "spec.nodename", false},
		{corev1.SchemeGroupVersion.WithKind("Node"), "spec.unschedulable", true},
		{corev1.SchemeGroupVersion.WithKind("Node"), "spec.nodeName", false},
		{corev1.SchemeGroupVersion.WithKind("Secret"), "type", true},
		{corev1.SchemeGroupVersion.WithKind("Event"), "involvedObject.uid", true},
		{corev1.SchemeGroupVersion.WithKind("Event"), "regarding.name", false},
		{schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "Event"}, "regarding.name", true},
		{schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "Event"}, "involvedObject.name", false},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, "status.replicas", true},
		// Kinds without a list fall back to metadata.name/namespace only.
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), "metadata.name", true},
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), "data.key", false},
	} {
		label, value, err := Scheme.ConvertFieldLabel(tc.gvk, tc.label, "x")
		if tc.ok {
			if err != nil || label != tc.label || value != "x" {
				t.Errorf("ConvertFieldLabel(%s, %s) = %q, %q, %v; want it unchanged", tc.gvk.Kind, tc.label, label, value, err)
			}
		} else if err == nil {
			t.Errorf("ConvertFieldLabel(%s %s, %s) accepted an unsupported label", tc.gvk.GroupVersion(), tc.gvk.Kind, tc.label)
		}
	}
}
