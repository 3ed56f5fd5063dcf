package validation

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// check runs one validator case: no errors when want is empty, else an error containing want.
func check(t *testing.T, name string, errs field.ErrorList, want string) {
	t.Helper()
	got := errs.ToAggregate()
	switch {
	case want == "" && got != nil:
		t.Errorf("%s: unexpected errors: %v", name, got)
	case want != "" && (got == nil || !strings.Contains(got.Error(), want)):
		t.Errorf("%s: errors %v, want one containing %q", name, got, want)
	}
}

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "default"} }

func statefulSet(mut ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	ss := &appsv1.StatefulSet{ObjectMeta: meta("web"), Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		ServiceName: "web", PodManagementPolicy: appsv1.OrderedReadyPodManagement,
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
				TerminationGracePeriodSeconds: ptr.To[int64](30),
				Containers: []corev1.Container{{Name: "c", Image: "i", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: claimSpec("1Gi")}},
	}}
	for _, m := range mut {
		m(ss)
	}
	return ss
}

func claimSpec(size string) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}
}

func TestStatefulSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		ss   *appsv1.StatefulSet
		want string
	}{
		{"valid, mounting its claim template", statefulSet(), ""},
		{"restart policy", statefulSet(func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever }), `spec.template.spec.restartPolicy: Unsupported value: "Never"`},
		{"pod management", statefulSet(func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = "Random" }), "must be 'OrderedReady' or 'Parallel'"},
		{"OnDelete with rollingUpdate", statefulSet(func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{}}
		}), "only allowed for updateStrategy 'RollingUpdate'"},
		{"negative partition", statefulSet(func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](-1)}
		}), "partition: Invalid value: -1"},
		{"retention policy", statefulSet(func(s *appsv1.StatefulSet) {
			s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Keep", WhenScaled: "Retain"}
		}), `whenDeleted: Unsupported value: "Keep"`},
		{"claim without size", statefulSet(func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates[0].Spec.Resources = corev1.VolumeResourceRequirements{}
		}),
			"spec.volumeClaimTemplates[0].spec.resources[storage]: Required value"},
		{"unknown mount", statefulSet(func(s *appsv1.StatefulSet) { s.Spec.VolumeClaimTemplates = nil }), `volumeMounts[0].name: Not found: "data"`},
	} {
		check(t, tc.name, StatefulSet(tc.ss), tc.want)
	}
	old := statefulSet()
	check(t, "replicas may change", StatefulSetUpdate(statefulSet(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](5) }), old), "")
	check(t, "serviceName may not", StatefulSetUpdate(statefulSet(func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other" }), old),
		"updates to statefulset spec for fields other than")
}

func TestVolumes(t *testing.T) {
	pv := func(mut func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/pv"}}}}
		if mut != nil {
			mut(v)
		}
		return v
	}
	check(t, "valid PV", PersistentVolume(pv(nil)), "")
	check(t, "no source", PersistentVolume(pv(func(v *corev1.PersistentVolume) { v.Spec.HostPath = nil })), "must specify a volume type")
	check(t, "two sources", PersistentVolume(pv(func(v *corev1.PersistentVolume) { v.Spec.NFS = &corev1.NFSVolumeSource{Server: "s", Path: "/"} })), "may not specify more than 1 volume type")
	check(t, "relative path", PersistentVolume(pv(func(v *corev1.PersistentVolume) { v.Spec.HostPath.Path = "srv" })), "must be an absolute path")
	check(t, "local without affinity", PersistentVolume(pv(func(v *corev1.PersistentVolume) {
		v.Spec.HostPath, v.Spec.Local = nil, &corev1.LocalVolumeSource{Path: "/mnt"}
	})), "Local volume requires node affinity")
	check(t, "bad mode", PersistentVolume(pv(func(v *corev1.PersistentVolume) { v.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadAll"} })), `Unsupported value: "ReadAll"`)
	check(t, "no capacity", PersistentVolume(pv(func(v *corev1.PersistentVolume) { v.Spec.Capacity = nil })), "spec.capacity: Required value")
	check(t, "source immutable", PersistentVolumeUpdate(pv(func(v *corev1.PersistentVolume) { v.Spec.HostPath.Path = "/other" }), pv(nil)), "spec.persistentvolumesource is immutable")

	claim := &corev1.PersistentVolumeClaim{ObjectMeta: meta("data"), Spec: claimSpec("1Gi")}
	claim.ResourceVersion = "1"
	check(t, "valid claim", PersistentVolumeClaim(claim), "")
	check(t, "zero size", PersistentVolumeClaim(&corev1.PersistentVolumeClaim{ObjectMeta: meta("data"), Spec: claimSpec("0")}), "must be greater than zero")
	bound := claim.DeepCopy()
	bound.Spec.VolumeName = "pv"
	check(t, "the binder sets volumeName", PersistentVolumeClaimUpdate(bound, claim), "")
	grown := bound.DeepCopy()
	grown.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	check(t, "an unbound claim does not grow", PersistentVolumeClaimUpdate(grown, bound), "spec is immutable after creation except resources.requests")
	bound.Status.Phase = corev1.ClaimBound
	check(t, "a bound claim grows", PersistentVolumeClaimUpdate(grown, bound), "")
	check(t, "nor shrinks", PersistentVolumeClaimUpdate(bound, func() *corev1.PersistentVolumeClaim {
		g := grown.DeepCopy()
		g.Status.Phase = corev1.ClaimBound
		return g
	}()),
		"field can not be less than previous value")

	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "example.com/fast", VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}
	check(t, "valid class", StorageClass(sc), "")
	changed := sc.DeepCopy()
	changed.Parameters = map[string]string{"a": "b"}
	check(t, "parameters immutable", StorageClassUpdate(changed, sc), "updates to parameters are forbidden.")
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va"}, Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: "n1"}}
	check(t, "attachment without source", VolumeAttachment(va), "must specify exactly one of inlineVolumeSpec and persistentVolumeName")
	lr := &corev1.LimitRange{ObjectMeta: meta("lr"), Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
		Min: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}
	check(t, "limit range min over max", LimitRange(lr), "min value 2 is greater than max value 1")
}

func TestClasses(t *testing.T) {
	check(t, "user priority", PriorityClass(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}), "")
	check(t, "too high", PriorityClass(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000000001}),
		"maximum allowed value of a user defined priority is 1000000000")
	check(t, "reserved prefix", PriorityClass(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-mine"}, Value: 1}), "priority class names with 'system-' prefix are reserved")
	check(t, "system class", PriorityClass(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: SystemNodeCritical}, Value: 2000001000}), "")
	old := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	check(t, "value immutable", PriorityClassUpdate(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 2000}, old), "may not be changed in an update.")

	check(t, "runtime class", RuntimeClass(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runc"}, Handler: "runc"}), "")
	check(t, "handler required", RuntimeClass(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "x"}}), "handler: Required value")
	check(t, "handler a label", RuntimeClass(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Handler: "Not_A_Label"}), "handler: Invalid value")

	prefix := networkingv1.PathTypePrefix
	ing := func(paths ...networkingv1.HTTPIngressPath) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: meta("web"), Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}}}
	}
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}
	check(t, "ingress", Ingress(ing(networkingv1.HTTPIngressPath{Path: "/", PathType: &prefix, Backend: backend})), "")
	check(t, "no pathType", Ingress(ing(networkingv1.HTTPIngressPath{Path: "/", Backend: backend})), "pathType must be specified")
	check(t, "relative path", Ingress(ing(networkingv1.HTTPIngressPath{Path: "x", PathType: &prefix, Backend: backend})), "must be an absolute path")
	check(t, "no backend", Ingress(ing(networkingv1.HTTPIngressPath{Path: "/", PathType: &prefix})), "resource or service backend is required")
	check(t, "ingress class", IngressClass(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: networkingv1.IngressClassSpec{Controller: "nginx"}}),
		"must be a domain-prefixed path")

	claim := &resourcev1.ResourceClaim{ObjectMeta: meta("gpu"), Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{{Name: "req-0", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu"}}}}}}
	check(t, "claim", ResourceClaim(claim), "")
	bad := claim.DeepCopy()
	bad.Spec.Devices.Requests[0].Exactly = nil
	check(t, "request without exactly", ResourceClaim(bad), "exactly one of `exactly` or `firstAvailable` is required")
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourcev1.ResourceSliceSpec{Driver: "dra.example.com",
		Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1}}}
	check(t, "slice without a node scope", ResourceSlice(slice), "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required")
	slice.Spec.NodeName = ptr.To("n1")
	check(t, "slice", ResourceSlice(slice), "")
	check(t, "taint effect", DeviceTaintRule(&resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "t"},
		Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "k", Effect: "Evict"}}}), `Unsupported value: "Evict"`)

	h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta("web"), Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web"}, MinReplicas: ptr.To[int32](3), MaxReplicas: 2}}
	check(t, "hpa max below min", HorizontalPodAutoscaler(h), "must be greater than or equal to `minReplicas`")
}

func TestFlowControl(t *testing.T) {
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "f"}, Spec: flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: 20000,
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "p"}}}
	check(t, "precedence", FlowSchema(fs), "must be between 1 and 10000 inclusively")
	plc := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
				Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 4, HandSize: 8, QueueLengthLimit: 10}}}}}
	check(t, "hand size", PriorityLevelConfiguration(plc), "should not be greater than queues")
	plc.Spec.Limited.LimitResponse.Queuing.HandSize = 2
	check(t, "valid level", PriorityLevelConfiguration(plc), "")
	plc.Spec.Limited = nil
	check(t, "limited without limits", PriorityLevelConfiguration(plc), "must not be empty when type is Limited")
}

func TestWebhookConfigurations(t *testing.T) {
	hook := admissionregistrationv1.ValidatingWebhook{Name: "deny.example.com", SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"}, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/v")}}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{hook}}
	check(t, "valid", ValidatingWebhookConfiguration(cfg), "")
	bad := cfg.DeepCopy()
	bad.Webhooks[0].ClientConfig.URL = ptr.To("http://127.0.0.1/v")
	check(t, "plain http", ValidatingWebhookConfiguration(bad), "'https' is the only allowed URL scheme")
	bad = cfg.DeepCopy()
	bad.Webhooks[0].SideEffects = nil
	check(t, "no sideEffects", ValidatingWebhookConfiguration(bad), "sideEffects: Required value")
	bad = cfg.DeepCopy()
	bad.Webhooks = append(bad.Webhooks, hook)
	check(t, "duplicate", ValidatingWebhookConfiguration(bad), "Duplicate value")
	bad = cfg.DeepCopy()
	bad.Webhooks[0].Name = "short"
	check(t, "unqualified name", ValidatingWebhookConfiguration(bad), "webhooks[0].name")
}
