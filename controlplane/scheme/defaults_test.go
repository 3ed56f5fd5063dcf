package scheme

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestDefaultImagePullPolicy(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.2", corev1.PullIfNotPresent},
		{"library/nginx", corev1.PullAlways},
		{"docker.io/library/nginx:1.27-alpine", corev1.PullIfNotPresent},
		// A registry port is not a tag.
		{"reg:5000/x", corev1.PullAlways},
		{"reg:5000/x:1", corev1.PullIfNotPresent},
		{"reg:5000/team/x:latest", corev1.PullAlways},
		{"x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"reg:5000/x:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"", corev1.PullAlways},
	} {
		if got := DefaultImagePullPolicy(tc.image); got != tc.want {
			t.Errorf("DefaultImagePullPolicy(%q) = %s, want %s", tc.image, got, tc.want)
		}
	}
}

func TestDefaultPod(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.36"}},
		Containers: []corev1.Container{
			{
				Name: "web", Image: "nginx",
				Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 3, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(80)}}},
			},
			{Name: "side", Image: "reg:5000/side:1", ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
		},
		Volumes: []corev1.Volume{
			{Name: "empty"},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{DefaultMode: ptr.To[int32](0o400)}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp"}}},
			{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/tools"}}},
			{Name: "img-tagged", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/tools:1.2"}}},
		},
		Tolerations:              []corev1.Toleration{{Key: "k", Value: "v"}, {Operator: corev1.TolerationOpExists}},
		DeprecatedServiceAccount: "builder",
	}}
	DefaultPod(p)
	s := p.Spec
	if got := s.Volumes[4].Image.PullPolicy; got != corev1.PullAlways {
		t.Errorf("untagged image volume pullPolicy = %q, want Always", got)
	}
	if got := s.Volumes[5].Image.PullPolicy; got != corev1.PullIfNotPresent {
		t.Errorf("tagged image volume pullPolicy = %q, want IfNotPresent", got)
	}

	if s.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("restartPolicy = %q", s.RestartPolicy)
	}
	if s.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("dnsPolicy = %q", s.DNSPolicy)
	}
	if s.SchedulerName != "default-scheduler" {
		t.Errorf("schedulerName = %q", s.SchedulerName)
	}
	if s.TerminationGracePeriodSeconds == nil || *s.TerminationGracePeriodSeconds != 30 {
		t.Errorf("terminationGracePeriodSeconds = %v", s.TerminationGracePeriodSeconds)
	}
	if s.SecurityContext == nil {
		t.Error("securityContext not defaulted")
	}
	if s.EnableServiceLinks == nil || !*s.EnableServiceLinks {
		t.Errorf("enableServiceLinks = %v", s.EnableServiceLinks)
	}
	if s.ServiceAccountName != "builder" {
		t.Errorf("serviceAccountName = %q, want the deprecated serviceAccount", s.ServiceAccountName)
	}

	for _, c := range []struct {
		c    corev1.Container
		pull corev1.PullPolicy
	}{{s.InitContainers[0], corev1.PullIfNotPresent}, {s.Containers[0], corev1.PullAlways}, {s.Containers[1], corev1.PullNever}} {
		if c.c.ImagePullPolicy != c.pull {
			t.Errorf("%s: imagePullPolicy = %q, want %q", c.c.Name, c.c.ImagePullPolicy, c.pull)
		}
		if c.c.TerminationMessagePath != "/dev/termination-log" || c.c.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
			t.Errorf("%s: termination message %q %q", c.c.Name, c.c.TerminationMessagePath, c.c.TerminationMessagePolicy)
		}
	}

	web := s.Containers[0]
	if web.Ports[0].Protocol != corev1.ProtocolTCP || web.Ports[1].Protocol != corev1.ProtocolUDP {
		t.Errorf("port protocols = %q, %q", web.Ports[0].Protocol, web.Ports[1].Protocol)
	}
	if q := web.Resources.Requests[corev1.ResourceCPU]; q.String() != "500m" {
		t.Errorf("cpu request = %s, want the limit 500m", q.String())
	}
	if q := web.Resources.Requests[corev1.ResourceMemory]; q.String() != "64Mi" {
		t.Errorf("memory request = %s, want the explicit 64Mi", q.String())
	}
	if q := s.Containers[1].Resources.Requests[corev1.ResourceCPU]; q.String() != "1" {
		t.Errorf("side cpu request = %s, want the limit 1 (requests created from nil)", q.String())
	}
	// Defaulting requests must not alias the limits.
	lim := web.Resources.Limits[corev1.ResourceCPU]
	lim.Add(resource.MustParse("1"))
	if q := web.Resources.Requests[corev1.ResourceCPU]; q.String() != "500m" {
		t.Errorf("request aliases the limit: %s", q.String())
	}

	lp := web.LivenessProbe
	if lp.TimeoutSeconds != 1 || lp.PeriodSeconds != 10 || lp.SuccessThreshold != 1 || lp.FailureThreshold != 3 {
		t.Errorf("liveness probe = %+v", lp)
	}
	if lp.HTTPGet.Path != "/" || lp.HTTPGet.Scheme != corev1.URISchemeHTTP {
		t.Errorf("liveness httpGet = %+v", lp.HTTPGet)
	}
	if rp := web.ReadinessProbe; rp.PeriodSeconds != 3 || rp.HTTPGet.Path != "/ready" {
		t.Errorf("readiness probe overwrote explicit values: %+v", rp)
	}
	if web.StartupProbe != nil {
		t.Error("startup probe invented")
	}

	vols := s.Volumes
	if vols[0].EmptyDir == nil {
		t.Error("a volume without a source must become an emptyDir")
	}
	if m := vols[1].ConfigMap.DefaultMode; m == nil || *m != 0o644 {
		t.Errorf("configMap defaultMode = %v", m)
	}
	if m := vols[2].Secret.DefaultMode; m == nil || *m != 0o400 {
		t.Errorf("secret defaultMode = %v, want the explicit 0400", m)
	}
	if ty := vols[3].HostPath.Type; ty == nil || *ty != corev1.HostPathUnset {
		t.Errorf("hostPath type = %v", ty)
	}
	if vols[1].EmptyDir != nil || vols[3].EmptyDir != nil {
		t.Error("emptyDir added to a volume that has a source")
	}

	if s.Tolerations[0].Operator != corev1.TolerationOpEqual || s.Tolerations[1].Operator != corev1.TolerationOpExists {
		t.Errorf("toleration operators = %q, %q", s.Tolerations[0].Operator, s.Tolerations[1].Operator)
	}
}

func TestDefaultPodSpecKeepsExplicitValues(t *testing.T) {
	s := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		DNSPolicy:                     corev1.DNSDefault,
		SchedulerName:                 "custom",
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		ServiceAccountName:            "own",
		DeprecatedServiceAccount:      "old",
	}
	DefaultPodSpec(&s)
	if s.RestartPolicy != corev1.RestartPolicyNever || s.DNSPolicy != corev1.DNSDefault || s.SchedulerName != "custom" ||
		*s.TerminationGracePeriodSeconds != 0 || s.ServiceAccountName != "own" {
		t.Errorf("explicit values overwritten: %+v", s)
	}
	again := *s.DeepCopy()
	DefaultPodSpec(&again)
	if !apiequality.Semantic.DeepEqual(s, again) {
		t.Error("defaulting is not idempotent")
	}
}

func TestDefaultService(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    corev1.ServiceSpec
		check func(t *testing.T, s corev1.ServiceSpec)
	}{
		{name: "ClusterIP", in: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Port: 80}, {Port: 443, TargetPort: intstr.FromString("https")}, {Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
		}}, check: func(t *testing.T, s corev1.ServiceSpec) {
			if s.Type != corev1.ServiceTypeClusterIP || s.SessionAffinity != corev1.ServiceAffinityNone || s.SessionAffinityConfig != nil {
				t.Errorf("type %q affinity %q config %v", s.Type, s.SessionAffinity, s.SessionAffinityConfig)
			}
			want := []corev1.ServicePort{
				{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)},
				{Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("https")},
				{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
			}
			if !apiequality.Semantic.DeepEqual(s.Ports, want) {
				t.Errorf("ports = %+v, want %+v", s.Ports, want)
			}
			if p := s.InternalTrafficPolicy; p == nil || *p != corev1.ServiceInternalTrafficPolicyCluster {
				t.Errorf("internalTrafficPolicy = %v", p)
			}
			if s.ExternalTrafficPolicy != "" || s.AllocateLoadBalancerNodePorts != nil {
				t.Errorf("LB/NodePort fields set on ClusterIP: %q %v", s.ExternalTrafficPolicy, s.AllocateLoadBalancerNodePorts)
			}
		}},
		{name: "ClientIP affinity", in: corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP},
			check: func(t *testing.T, s corev1.ServiceSpec) {
				c := s.SessionAffinityConfig
				if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil || *c.ClientIP.TimeoutSeconds != 10800 {
					t.Errorf("sessionAffinityConfig = %+v", c)
				}
			}},
		{name: "NodePort", in: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort},
			check: func(t *testing.T, s corev1.ServiceSpec) {
				if s.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
					t.Errorf("externalTrafficPolicy = %q", s.ExternalTrafficPolicy)
				}
				if s.AllocateLoadBalancerNodePorts != nil {
					t.Error("allocateLoadBalancerNodePorts on NodePort")
				}
			}},
		{name: "LoadBalancer", in: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal},
			check: func(t *testing.T, s corev1.ServiceSpec) {
				if s.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
					t.Errorf("explicit externalTrafficPolicy overwritten: %q", s.ExternalTrafficPolicy)
				}
				if a := s.AllocateLoadBalancerNodePorts; a == nil || !*a {
					t.Errorf("allocateLoadBalancerNodePorts = %v", a)
				}
			}},
		{name: "ExternalName", in: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
			check: func(t *testing.T, s corev1.ServiceSpec) {
				if s.Type != corev1.ServiceTypeExternalName || s.InternalTrafficPolicy != nil || s.ExternalTrafficPolicy != "" {
					t.Errorf("ExternalName defaulted wrongly: %+v", s)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{Spec: tc.in}
			DefaultService(svc)
			tc.check(t, svc.Spec)
		})
	}
}

func TestDefaultDeployment(t *testing.T) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "nginx:1.2"}},
	}}}}
	DefaultDeployment(d)
	s := d.Spec
	if s.Replicas == nil || *s.Replicas != 1 {
		t.Errorf("replicas = %v", s.Replicas)
	}
	if s.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || s.Strategy.RollingUpdate == nil {
		t.Fatalf("strategy = %+v", s.Strategy)
	}
	ru := s.Strategy.RollingUpdate
	if *ru.MaxSurge != intstr.FromString("25%") || *ru.MaxUnavailable != intstr.FromString("25%") {
		t.Errorf("rollingUpdate = %v/%v", ru.MaxSurge, ru.MaxUnavailable)
	}
	if s.RevisionHistoryLimit == nil || *s.RevisionHistoryLimit != 10 {
		t.Errorf("revisionHistoryLimit = %v", s.RevisionHistoryLimit)
	}
	if s.ProgressDeadlineSeconds == nil || *s.ProgressDeadlineSeconds != 600 {
		t.Errorf("progressDeadlineSeconds = %v", s.ProgressDeadlineSeconds)
	}
	if ps := s.Template.Spec; ps.RestartPolicy != corev1.RestartPolicyAlways || ps.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("template not defaulted: %+v", ps)
	}
	if s.Template.Spec.EnableServiceLinks != nil {
		t.Error("enableServiceLinks is a pod default, not a template default")
	}

	t.Run("explicit values", func(t *testing.T) {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
			Replicas:             ptr.To[int32](0),
			RevisionHistoryLimit: ptr.To[int32](0),
			Strategy: appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(0)),
			}},
		}}
		DefaultDeployment(d)
		if *d.Spec.Replicas != 0 || *d.Spec.RevisionHistoryLimit != 0 {
			t.Errorf("explicit zeroes overwritten: replicas %d history %d", *d.Spec.Replicas, *d.Spec.RevisionHistoryLimit)
		}
		ru := d.Spec.Strategy.RollingUpdate
		if *ru.MaxSurge != intstr.FromInt32(0) || *ru.MaxUnavailable != intstr.FromString("25%") {
			t.Errorf("rollingUpdate = %v/%v", ru.MaxSurge, ru.MaxUnavailable)
		}
	})
	t.Run("recreate", func(t *testing.T) {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}}
		DefaultDeployment(d)
		if d.Spec.Strategy.RollingUpdate != nil {
			t.Errorf("rollingUpdate set on Recreate: %+v", d.Spec.Strategy.RollingUpdate)
		}
	})
}

func TestDefaultDaemonSet(t *testing.T) {
	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "agent"}},
	}}}}
	DefaultDaemonSet(ds)
	us := ds.Spec.UpdateStrategy
	if us.Type != appsv1.RollingUpdateDaemonSetStrategyType || us.RollingUpdate == nil {
		t.Fatalf("updateStrategy = %+v", us)
	}
	if *us.RollingUpdate.MaxUnavailable != intstr.FromInt32(1) || *us.RollingUpdate.MaxSurge != intstr.FromInt32(0) {
		t.Errorf("rollingUpdate = %v/%v", us.RollingUpdate.MaxUnavailable, us.RollingUpdate.MaxSurge)
	}
	if h := ds.Spec.RevisionHistoryLimit; h == nil || *h != 10 {
		t.Errorf("revisionHistoryLimit = %v", h)
	}
	if ps := ds.Spec.Template.Spec; ps.DNSPolicy != corev1.DNSClusterFirst || ps.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("template not defaulted: %+v", ps)
	}

	onDelete := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}
	DefaultDaemonSet(onDelete)
	if onDelete.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Error("rollingUpdate set on OnDelete")
	}
}

func TestDefaultNetworkPolicy(t *testing.T) {
	port := networkingv1.NetworkPolicyPort{Port: ptr.To(intstr.FromInt32(80))}
	for _, tc := range []struct {
		name string
		spec networkingv1.NetworkPolicySpec
		want []networkingv1.PolicyType
	}{
		{name: "nothing", want: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		{name: "ingress rules", spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}},
			want: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		{name: "egress rules", spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}},
			want: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}},
		{name: "explicit egress only", spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
			want: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := &networkingv1.NetworkPolicy{Spec: tc.spec}
			DefaultNetworkPolicy(np)
			if !apiequality.Semantic.DeepEqual(np.Spec.PolicyTypes, tc.want) {
				t.Errorf("policyTypes = %v, want %v", np.Spec.PolicyTypes, tc.want)
			}
		})
	}
	np := &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{port}}},
		Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{
			port, {Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))},
		}}},
	}}
	DefaultNetworkPolicy(np)
	for _, got := range []*corev1.Protocol{np.Spec.Ingress[0].Ports[0].Protocol, np.Spec.Egress[0].Ports[0].Protocol} {
		if got == nil || *got != corev1.ProtocolTCP {
			t.Errorf("port protocol = %v, want TCP", got)
		}
	}
	if got := np.Spec.Egress[0].Ports[1].Protocol; *got != corev1.ProtocolUDP {
		t.Errorf("explicit UDP overwritten: %v", *got)
	}
}
