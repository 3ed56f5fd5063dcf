package validation

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// fe is the part of a field.Error a test pins down: its type and its path.
type fe struct {
	typ  field.ErrorType
	path string
}

func (e fe) String() string { return fmt.Sprintf("%s %s", e.path, e.typ) }

func summarize(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, fe{e.Type, e.Field}.String())
	}
	sort.Strings(out)
	return out
}

// expectErrors fails unless errs holds exactly the wanted (path, type) pairs, in any order.
func expectErrors(t *testing.T, errs field.ErrorList, want ...fe) {
	t.Helper()
	w := make([]string, 0, len(want))
	for _, e := range want {
		w = append(w, e.String())
	}
	sort.Strings(w)
	got := summarize(errs)
	if strings.Join(got, "\n") != strings.Join(w, "\n") {
		t.Errorf("errors mismatch\n got: %q\nwant: %q\nfull: %v", got, w, errs)
	}
}

func required(p string) fe     { return fe{field.ErrorTypeRequired, p} }
func invalid(p string) fe      { return fe{field.ErrorTypeInvalid, p} }
func notSupported(p string) fe { return fe{field.ErrorTypeNotSupported, p} }
func duplicate(p string) fe    { return fe{field.ErrorTypeDuplicate, p} }
func notFound(p string) fe     { return fe{field.ErrorTypeNotFound, p} }
func forbidden(p string) fe    { return fe{field.ErrorTypeForbidden, p} }
func tooMany(p string) fe      { return fe{field.ErrorTypeTooMany, p} }

func validPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "1"},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{
				Name:  "nginx",
				Image: "nginx:1.27",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "data", MountPath: "/data"},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
				},
				Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
			}},
			RestartPolicy: corev1.RestartPolicyAlways,
			DNSPolicy:     corev1.DNSClusterFirst,
		},
	}
}

func TestPod(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(p *corev1.Pod)
		want   []fe
	}{
		{name: "valid", mutate: func(*corev1.Pod) {}},
		{name: "dotted name is a valid subdomain", mutate: func(p *corev1.Pod) { p.Name = "web.v1" }},
		// The registry turns generateName into a name before validation runs.
		{name: "generateName without name", mutate: func(p *corev1.Pod) { p.Name, p.GenerateName = "", "web-" },
			want: []fe{required("metadata.name")}},
		{name: "bad generateName", mutate: func(p *corev1.Pod) { p.GenerateName = "Web-" },
			want: []fe{invalid("metadata.generateName")}},
		{name: "missing name", mutate: func(p *corev1.Pod) { p.Name = "" }, want: []fe{required("metadata.name")}},
		{name: "upper-case name", mutate: func(p *corev1.Pod) { p.Name = "Web" }, want: []fe{invalid("metadata.name")}},
		{name: "underscore name", mutate: func(p *corev1.Pod) { p.Name = "web_1" }, want: []fe{invalid("metadata.name")}},
		{name: "missing namespace", mutate: func(p *corev1.Pod) { p.Namespace = "" }, want: []fe{required("metadata.namespace")}},
		{name: "bad label", mutate: func(p *corev1.Pod) { p.Labels = map[string]string{"app": "not valid!"} },
			want: []fe{invalid("metadata.labels")}},
		{name: "no containers", mutate: func(p *corev1.Pod) {
			p.Spec.Containers = nil
			p.Spec.Volumes = nil
		}, want: []fe{required("spec.containers")}},
		{name: "missing image", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" },
			want: []fe{required("spec.containers[0].image")}},
		{name: "missing init container image", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init"}}
		}, want: []fe{required("spec.initContainers[0].image")}},
		{name: "missing container name", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Name = "" },
			want: []fe{required("spec.containers[0].name")}},
		{name: "invalid container name", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Name = "Nginx" },
			want: []fe{invalid("spec.containers[0].name")}},
		{name: "duplicate container names", mutate: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "nginx", Image: "busybox"})
		}, want: []fe{duplicate("spec.containers[1].name")}},
		{name: "container named like an init container", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "nginx", Image: "busybox"}}
		}, want: []fe{duplicate("spec.containers[0].name")}},
		{name: "bad pull policy", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" },
			want: []fe{notSupported("spec.containers[0].imagePullPolicy")}},
		{name: "image volume", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "img", VolumeSource: corev1.VolumeSource{
				Image: &corev1.ImageVolumeSource{Reference: "registry.k8s.io/e2e-test-images/kitten:1.7", PullPolicy: corev1.PullAlways}}})
		}},
		{name: "image volume without reference or pull policy", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "img", VolumeSource: corev1.VolumeSource{
				Image: &corev1.ImageVolumeSource{}}})
		}, want: []fe{required("spec.volumes[1].image.reference"), required("spec.volumes[1].image.pullPolicy")}},
		{name: "image volume bad pull policy", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "img", VolumeSource: corev1.VolumeSource{
				Image: &corev1.ImageVolumeSource{Reference: "kitten", PullPolicy: "Sometimes"}}})
		}, want: []fe{notSupported("spec.volumes[1].image.pullPolicy")}},
		{name: "container port 0", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 0 },
			want: []fe{invalid("spec.containers[0].ports[0].containerPort")}},
		{name: "container port too big", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 65536 },
			want: []fe{invalid("spec.containers[0].ports[0].containerPort")}},
		{name: "host port too big", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = 70000 },
			want: []fe{invalid("spec.containers[0].ports[0].hostPort")}},
		{name: "valid host port", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = 8080 }},
		{name: "bad protocol", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "HTTP" },
			want: []fe{notSupported("spec.containers[0].ports[0].protocol")}},
		{name: "empty protocol (not defaulted)", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "" },
			want: []fe{notSupported("spec.containers[0].ports[0].protocol")}},
		{name: "UDP and SCTP are valid", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports,
				corev1.ContainerPort{ContainerPort: 53, Protocol: corev1.ProtocolUDP},
				corev1.ContainerPort{ContainerPort: 9, Protocol: corev1.ProtocolSCTP})
		}},
		{name: "bad port name", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Name = "-http" },
			want: []fe{invalid("spec.containers[0].ports[0].name")}},
		{name: "duplicate port name", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports,
				corev1.ContainerPort{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP})
		}, want: []fe{duplicate("spec.containers[0].ports[1].name")}},
		{name: "same port name in two containers is fine", mutate: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: "x",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 81, Protocol: corev1.ProtocolTCP}}})
		}},
		{name: "mount of a missing volume", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "nope" },
			want: []fe{notFound("spec.containers[0].volumeMounts[0].name")}},
		{name: "init container mount of a missing volume", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "x",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d"}, {Name: "gone", MountPath: "/g"}}}}
		}, want: []fe{notFound("spec.initContainers[0].volumeMounts[1].name")}},
		{name: "mount without path", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "" },
			want: []fe{required("spec.containers[0].volumeMounts[0].mountPath")}},
		{name: "volume without name", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{})
		}, want: []fe{required("spec.volumes[1].name")}},
		{name: "duplicate volume", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data"})
		}, want: []fe{duplicate("spec.volumes[1].name")}},
		{name: "invalid volume name", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes[0].Name = "Data"
			p.Spec.Containers[0].VolumeMounts[0].Name = "Data"
		}, want: []fe{invalid("spec.volumes[0].name")}},
		{name: "requests above limits", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
		}, want: []fe{invalid("spec.containers[0].resources.requests[cpu]")}},
		{name: "requests equal to limits", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.2")
		}},
		{name: "request without a limit", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
		}},
		{name: "negative request", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("-1Mi")
		}, want: []fe{invalid("spec.containers[0].resources.requests[memory]")}},
		{name: "env without name", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Value: "x"})
		}, want: []fe{required("spec.containers[0].env[1].name")}},
		{name: "bad restart policy", mutate: func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
			want: []fe{notSupported("spec.restartPolicy")}},
		{name: "restart policy Never", mutate: func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }},
		{name: "bad dns policy", mutate: func(p *corev1.Pod) { p.Spec.DNSPolicy = "Google" },
			want: []fe{notSupported("spec.dnsPolicy")}},
		{name: "bad node name", mutate: func(p *corev1.Pod) { p.Spec.NodeName = "Node_1" },
			want: []fe{invalid("spec.nodeName")}},
		{name: "good node name", mutate: func(p *corev1.Pod) { p.Spec.NodeName = "node-1.example.com" }},
		{name: "bad service account name", mutate: func(p *corev1.Pod) { p.Spec.ServiceAccountName = "My SA" },
			want: []fe{invalid("spec.serviceAccountName")}},
		{name: "bad node selector", mutate: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"a b": "c"} },
			want: []fe{invalid("spec.nodeSelector")}},
		{name: "negative grace period", mutate: func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](-1) },
			want: []fe{invalid("spec.terminationGracePeriodSeconds")}},
		{name: "zero grace period", mutate: func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := validPod()
			tc.mutate(p)
			expectErrors(t, Pod(p), tc.want...)
		})
	}
}

func TestPodTolerations(t *testing.T) {
	for _, tc := range []struct {
		name string
		tol  corev1.Toleration
		want []fe
	}{
		{name: "exists everything", tol: corev1.Toleration{Operator: corev1.TolerationOpExists}},
		{name: "equal with value", tol: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		{name: "operator defaults later", tol: corev1.Toleration{Key: "dedicated", Value: "gpu"}},
		{name: "prefixed key", tol: corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}},
		{name: "bad key", tol: corev1.Toleration{Key: "bad key", Operator: corev1.TolerationOpExists},
			want: []fe{invalid("spec.tolerations[0].key")}},
		{name: "bad operator", tol: corev1.Toleration{Key: "k", Operator: "In"},
			want: []fe{notSupported("spec.tolerations[0].operator")}},
		{name: "exists with value", tol: corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"},
			want: []fe{invalid("spec.tolerations[0].operator")}},
		{name: "bad effect", tol: corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: "Evict"},
			want: []fe{notSupported("spec.tolerations[0].effect")}},
		{name: "seconds without NoExecute", tol: corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](10)},
			want: []fe{invalid("spec.tolerations[0].effect")}},
		{name: "seconds without effect", tol: corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists,
			TolerationSeconds: ptr.To[int64](10)},
			want: []fe{invalid("spec.tolerations[0].effect")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := validPod()
			p.Spec.Tolerations = []corev1.Toleration{tc.tol}
			expectErrors(t, Pod(p), tc.want...)
		})
	}
	t.Run("index of the second toleration", func(t *testing.T) {
		p := validPod()
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}, {Key: "k", Operator: "Bogus"}}
		expectErrors(t, Pod(p), notSupported("spec.tolerations[1].operator"))
	})
}

func TestPodErrorDetails(t *testing.T) {
	p := validPod()
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
	errs := Pod(p)
	if len(errs) != 1 {
		t.Fatalf("errors = %v", errs)
	}
	if errs[0].BadValue != "1" || !strings.Contains(errs[0].Detail, "cpu limit of 200m") {
		t.Errorf("error = %+v, want bad value 1 and the limit in the detail", errs[0])
	}
}

func TestPodTemplateRestartPolicy(t *testing.T) {
	base := func() *corev1.PodTemplateSpec {
		p := validPod()
		return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: p.Spec}
	}
	for _, tc := range []struct {
		policy corev1.RestartPolicy
		want   []fe
	}{
		{corev1.RestartPolicyAlways, nil},
		{corev1.RestartPolicyNever, []fe{notSupported("tmpl.spec.restartPolicy")}},
		{corev1.RestartPolicyOnFailure, []fe{notSupported("tmpl.spec.restartPolicy")}},
		// Not defaulted: PodSpec accepts "" but a template must say Always.
		{"", []fe{notSupported("tmpl.spec.restartPolicy")}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			tmpl := base()
			tmpl.Spec.RestartPolicy = tc.policy
			expectErrors(t, PodTemplate(tmpl, field.NewPath("tmpl")), tc.want...)
		})
	}
	t.Run("bad template annotations", func(t *testing.T) {
		tmpl := base()
		tmpl.Annotations = map[string]string{"bad key!": "v"}
		expectErrors(t, PodTemplate(tmpl, field.NewPath("tmpl")), invalid("tmpl.metadata.annotations"))
	})
}

func TestPodUpdate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(p *corev1.Pod)
		want   []fe
	}{
		{name: "no change", mutate: func(*corev1.Pod) {}},
		{name: "image change", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.28" }},
		{name: "init image change", mutate: func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "busybox:2" }},
		{name: "active deadline", mutate: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) }},
		{name: "added toleration", mutate: func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists})
		}},
		{name: "grace period", mutate: func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1) }},
		{name: "scheduling gates removed", mutate: func(p *corev1.Pod) { p.Spec.SchedulingGates = nil }},
		{name: "labels may change", mutate: func(p *corev1.Pod) { p.Labels = map[string]string{"x": "y"} }},
		{name: "env change", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Value = "c" },
			want: []fe{forbidden("spec")}},
		{name: "added container", mutate: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: "x"})
		}, want: []fe{forbidden("spec")}},
		{name: "container name change", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Name = "other" },
			want: []fe{forbidden("spec")}},
		{name: "restart policy change", mutate: func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever },
			want: []fe{forbidden("spec")}},
		{name: "node name change", mutate: func(p *corev1.Pod) { p.Spec.NodeName = "node-b" },
			want: []fe{forbidden("spec"), invalid("spec.nodeName")}},
		{name: "node name cleared", mutate: func(p *corev1.Pod) { p.Spec.NodeName = "" },
			want: []fe{forbidden("spec"), invalid("spec.nodeName")}},
		{name: "name change", mutate: func(p *corev1.Pod) { p.Name = "other" },
			want: []fe{invalid("metadata.name")}},
		{name: "namespace change", mutate: func(p *corev1.Pod) { p.Namespace = "other" },
			want: []fe{invalid("metadata.namespace")}},
		{name: "missing resourceVersion", mutate: func(p *corev1.Pod) { p.ResourceVersion = "" },
			want: []fe{invalid("metadata.resourceVersion")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := validPod()
			old.Spec.NodeName = "node-a"
			old.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1"}}
			old.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}}
			p := old.DeepCopy()
			tc.mutate(p)
			expectErrors(t, PodUpdate(p, old), tc.want...)
		})
	}
	t.Run("binding an unscheduled pod through update is forbidden", func(t *testing.T) {
		old := validPod()
		p := old.DeepCopy()
		p.Spec.NodeName = "node-a"
		// Only the spec-wide error: nodeName is not immutable while unset.
		expectErrors(t, PodUpdate(p, old), forbidden("spec"))
	})
}

// syncClusterIPs sets clusterIPs from clusterIP, as the API server does before validating.
func syncClusterIPs(s *corev1.Service) {
	if s.Spec.ClusterIP != "" && len(s.Spec.ClusterIPs) == 0 {
		s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	}
}

func validService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

func TestService(t *testing.T) {
	twoPorts := func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
			{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP},
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(s *corev1.Service)
		want   []fe
	}{
		{name: "valid", mutate: func(*corev1.Service) {}},
		{name: "NodePort", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 30080
		}},
		{name: "LoadBalancer", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.Ports[0].NodePort = 30080
		}},
		{name: "ExternalName", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
			s.Spec.Ports = nil
		}},
		{name: "ExternalName without name", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.Ports = nil
		}, want: []fe{required("spec.externalName")}},
		{name: "unknown type", mutate: func(s *corev1.Service) { s.Spec.Type = "Internal" },
			want: []fe{notSupported("spec.type")}},
		{name: "empty type (not defaulted)", mutate: func(s *corev1.Service) { s.Spec.Type = "" },
			want: []fe{notSupported("spec.type")}},
		{name: "dotted name is not a DNS-1035 label", mutate: func(s *corev1.Service) { s.Name = "web.v1" },
			want: []fe{invalid("metadata.name")}},
		{name: "name starting with a digit (RelaxedServiceNameValidation, GA in 1.37)", mutate: func(s *corev1.Service) { s.Name = "1web" }},
		{name: "name with a dot", mutate: func(s *corev1.Service) { s.Name = "web.x" },
			want: []fe{invalid("metadata.name")}},
		{name: "no ports", mutate: func(s *corev1.Service) { s.Spec.Ports = nil },
			want: []fe{required("spec.ports")}},
		{name: "headless without ports", mutate: func(s *corev1.Service) {
			s.Spec.Ports = nil
			s.Spec.ClusterIP = corev1.ClusterIPNone
		}},
		{name: "two named ports", mutate: twoPorts},
		{name: "second port unnamed", mutate: func(s *corev1.Service) {
			twoPorts(s)
			s.Spec.Ports[1].Name = ""
		}, want: []fe{required("spec.ports[1].name")}},
		{name: "both ports unnamed", mutate: func(s *corev1.Service) {
			twoPorts(s)
			s.Spec.Ports[0].Name, s.Spec.Ports[1].Name = "", ""
		}, want: []fe{required("spec.ports[0].name"), required("spec.ports[1].name")}},
		{name: "duplicate port names", mutate: func(s *corev1.Service) {
			twoPorts(s)
			s.Spec.Ports[1].Name = "http"
		}, want: []fe{duplicate("spec.ports[1].name")}},
		{name: "invalid port name", mutate: func(s *corev1.Service) { s.Spec.Ports[0].Name = "HTTP" },
			want: []fe{invalid("spec.ports[0].name")}},
		{name: "duplicate port and protocol", mutate: func(s *corev1.Service) {
			twoPorts(s)
			s.Spec.Ports[1].Port = 80
		}, want: []fe{duplicate("spec.ports[1]")}},
		{name: "same port, other protocol", mutate: func(s *corev1.Service) {
			twoPorts(s)
			s.Spec.Ports[1].Port = 80
			s.Spec.Ports[1].Protocol = corev1.ProtocolUDP
		}},
		{name: "port 0", mutate: func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 },
			want: []fe{invalid("spec.ports[0].port")}},
		{name: "port too big", mutate: func(s *corev1.Service) { s.Spec.Ports[0].Port = 65536 },
			want: []fe{invalid("spec.ports[0].port")}},
		{name: "bad protocol", mutate: func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "ICMP" },
			want: []fe{notSupported("spec.ports[0].protocol")}},
		{name: "nodePort on ClusterIP", mutate: func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 },
			want: []fe{forbidden("spec.ports[0].nodePort")}},
		{name: "nodePort on ExternalName", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
			s.Spec.Ports[0].NodePort = 30080
		}, want: []fe{forbidden("spec.ports[0].nodePort")}},
		{name: "nodePort out of range", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 70000
		}, want: []fe{invalid("spec.ports[0].nodePort")}},
		{name: "targetPort out of range", mutate: func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(70000) },
			want: []fe{invalid("spec.ports[0].targetPort")}},
		{name: "named targetPort", mutate: func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http") }},
		{name: "bad named targetPort", mutate: func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("no way") },
			want: []fe{invalid("spec.ports[0].targetPort")}},
		{name: "unset targetPort", mutate: func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.IntOrString{} }},
		{name: "IPv4 clusterIP", mutate: func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.10" }},
		{name: "IPv6 clusterIP", mutate: func(s *corev1.Service) { s.Spec.ClusterIP = "fd00::10" }},
		{name: "bad clusterIP", mutate: func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.300" },
			want: []fe{invalid("spec.clusterIPs[0]")}},
		{name: "CIDR as clusterIP", mutate: func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.0/12" },
			want: []fe{invalid("spec.clusterIPs[0]")}},
		{name: "bad selector", mutate: func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "a b"} },
			want: []fe{invalid("spec.selector")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := validService()
			tc.mutate(s)
			syncClusterIPs(s)
			expectErrors(t, Service(s), tc.want...)
		})
	}
}

func TestServiceUpdate(t *testing.T) {
	for _, tc := range []struct {
		name            string
		oldIP, newIP    string
		oldType, newTyp corev1.ServiceType
		mutate          func(s *corev1.Service)
		want            []fe
	}{
		{name: "same IP", oldIP: "10.96.0.10", newIP: "10.96.0.10"},
		{name: "IP changed", oldIP: "10.96.0.10", newIP: "10.96.0.11", want: []fe{invalid("spec.clusterIPs[0]")}},
		{name: "IP dropped", oldIP: "10.96.0.10", newIP: "", want: []fe{invalid("spec.clusterIPs[0]")}},
		{name: "headless to IP", oldIP: corev1.ClusterIPNone, newIP: "10.96.0.11", want: []fe{invalid("spec.clusterIPs[0]")}},
		{name: "IP set for the first time", oldIP: "", newIP: "10.96.0.11"},
		{name: "to ExternalName", oldIP: "10.96.0.10", newIP: "", newTyp: corev1.ServiceTypeExternalName},
		{name: "from ExternalName", oldIP: "", newIP: "10.96.0.12", oldType: corev1.ServiceTypeExternalName},
		{name: "name changed", oldIP: "10.96.0.10", newIP: "10.96.0.10",
			mutate: func(s *corev1.Service) { s.Name = "other" }, want: []fe{invalid("metadata.name")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := validService()
			old.Spec.ClusterIP = tc.oldIP
			if tc.oldType != "" {
				old.Spec.Type = tc.oldType
			}
			syncClusterIPs(old)
			s := old.DeepCopy()
			s.Spec.ClusterIP, s.Spec.ClusterIPs = tc.newIP, nil
			if tc.newTyp != "" {
				s.Spec.Type = tc.newTyp
			}
			if tc.mutate != nil {
				tc.mutate(s)
			}
			syncClusterIPs(s)
			expectErrors(t, ServiceUpdate(s, old), tc.want...)
		})
	}
}

func TestNamespace(t *testing.T) {
	for _, tc := range []struct {
		name, namespace string
		want            []fe
	}{
		{name: "kube-system"},
		{name: "a"},
		{name: strings.Repeat("a", 63)},
		{name: strings.Repeat("a", 64), want: []fe{invalid("metadata.name")}},
		{name: "team.one", want: []fe{invalid("metadata.name")}},
		{name: "Team", want: []fe{invalid("metadata.name")}},
		{name: "-team", want: []fe{invalid("metadata.name")}},
		{name: "", want: []fe{required("metadata.name")}},
		{name: "ok", namespace: "default", want: []fe{forbidden("metadata.namespace")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectErrors(t, Namespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: tc.namespace}}), tc.want...)
		})
	}
}

func TestNode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(n *corev1.Node)
		want   []fe
	}{
		{name: "valid", mutate: func(*corev1.Node) {}},
		{name: "dual stack", mutate: func(n *corev1.Node) {
			n.Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00:1::/64"}
		}},
		{name: "bad name", mutate: func(n *corev1.Node) { n.Name = "Node_1" }, want: []fe{invalid("metadata.name")}},
		{name: "namespaced", mutate: func(n *corev1.Node) { n.Namespace = "default" }, want: []fe{forbidden("metadata.namespace")}},
		{name: "bad podCIDR", mutate: func(n *corev1.Node) {
			n.Spec.PodCIDR = ""
			n.Spec.PodCIDRs = []string{"10.244.1.0/24", "10.244.2.0"}
		}, want: []fe{invalid("spec.podCIDRs[1]")}},
		{name: "first podCIDR differs from podCIDR", mutate: func(n *corev1.Node) {
			n.Spec.PodCIDRs = []string{"10.244.2.0/24"}
		}, want: []fe{invalid("spec.podCIDRs")}},
		{name: "bad taint key", mutate: func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "bad key", Effect: corev1.TaintEffectNoSchedule}}
		}, want: []fe{invalid("spec.taints[0].key")}},
		{name: "missing taint effect", mutate: func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane"}}
		}, want: []fe{notSupported("spec.taints[0].effect")}},
		{name: "valid taint", mutate: func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
				Spec:       corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
			}
			tc.mutate(n)
			expectErrors(t, Node(n), tc.want...)
		})
	}
}

func TestNodeUpdate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new string
		want     []fe
	}{
		{name: "unset to set", old: "", new: "10.244.1.0/24"},
		{name: "unchanged", old: "10.244.1.0/24", new: "10.244.1.0/24"},
		{name: "changed", old: "10.244.1.0/24", new: "10.244.2.0/24", want: []fe{forbidden("spec.podCIDR")}},
		{name: "cleared", old: "10.244.1.0/24", new: "", want: []fe{forbidden("spec.podCIDR")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", ResourceVersion: "3"}, Spec: corev1.NodeSpec{PodCIDR: tc.old}}
			n := old.DeepCopy()
			n.Spec.PodCIDR = tc.new
			expectErrors(t, NodeUpdate(n, old), tc.want...)
		})
	}
}

func TestConfigMap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   map[string]string
		binary map[string][]byte
		want   []fe
	}{
		{name: "valid", data: map[string]string{"app.conf": "x", "KEY_1": "y", "-a.b": "z"}, binary: map[string][]byte{"logo.png": {1}}},
		{name: "slash in key", data: map[string]string{"a/b": "x"}, want: []fe{invalid("data[a/b]")}},
		{name: "space in key", data: map[string]string{"a b": "x"}, want: []fe{invalid("data[a b]")}},
		{name: "dot only", data: map[string]string{".": "x"}, want: []fe{invalid("data[.]")}},
		{name: "bad binary key", binary: map[string][]byte{"..": {1}}, want: []fe{invalid("binaryData[..]")}},
		{name: "key in both", data: map[string]string{"k": "x"}, binary: map[string][]byte{"k": {1}}, want: []fe{invalid("binaryData[k]")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: tc.data, BinaryData: tc.binary}
			expectErrors(t, ConfigMap(cm), tc.want...)
		})
	}
	t.Run("missing namespace", func(t *testing.T) {
		expectErrors(t, ConfigMap(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}), required("metadata.namespace"))
	})
}

func TestSecret(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string][]byte
		want []fe
	}{
		{name: "valid", data: map[string][]byte{"tls.crt": {1}, "token": {2}}},
		{name: "slash in key", data: map[string][]byte{"a/b": {1}}, want: []fe{invalid("data[a/b]")}},
		{name: "two bad keys", data: map[string][]byte{"a/b": {1}, "c d": {1}}, want: []fe{invalid("data[a/b]"), invalid("data[c d]")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Data: tc.data}
			expectErrors(t, Secret(s), tc.want...)
		})
	}
	t.Run("bad name", func(t *testing.T) {
		expectErrors(t, Secret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "S!", Namespace: "default"}}), invalid("metadata.name"))
	})
}

func TestImmutable(t *testing.T) {
	for _, tc := range []struct {
		old, updated *bool
		changed      bool
		want         []fe
	}{
		{nil, nil, true, nil},
		{ptr.To(false), ptr.To(false), true, nil},
		{nil, ptr.To(true), true, nil}, // becoming immutable may change the data once more
		{ptr.To(true), ptr.To(true), false, nil},
		{ptr.To(true), ptr.To(true), true, []fe{forbidden("data")}},
		{ptr.To(true), ptr.To(false), false, []fe{forbidden("immutable")}},
		{ptr.To(true), nil, false, []fe{forbidden("immutable")}},
		{ptr.To(true), nil, true, []fe{forbidden("data"), forbidden("immutable")}},
	} {
		expectErrors(t, Immutable(tc.old, tc.updated, tc.changed), tc.want...)
	}
}

func TestSysctls(t *testing.T) {
	spec := func(hostNet bool, names ...string) *corev1.PodSpec {
		s := &corev1.PodSpec{HostNetwork: hostNet, SecurityContext: &corev1.PodSecurityContext{}}
		for _, n := range names {
			s.SecurityContext.Sysctls = append(s.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
		}
		return s
	}
	fld := field.NewPath("spec", "securityContext", "sysctls")
	// upstream's e2e: "foo-" and "bar.." are invalid, "kernel.shmmax" and "safe-and-unsafe" are not.
	expectErrors(t, sysctls(spec(false, "foo-", "kernel.shmmax", "safe-and-unsafe", "bar.."), fld),
		invalid("spec.securityContext.sysctls[0].name"), invalid("spec.securityContext.sysctls[3].name"))
	expectErrors(t, sysctls(spec(false, "kernel.shm_rmid_forced", "kernel/shm_rmid_forced2", "net.ipv4.conf.eno2/100.rp_filter"), fld))
	expectErrors(t, sysctls(spec(false, "", "a.b", "a.b", strings.Repeat("a", 254)), fld),
		required("spec.securityContext.sysctls[0].name"), fe{field.ErrorTypeDuplicate, "spec.securityContext.sysctls[2].name"},
		invalid("spec.securityContext.sysctls[3].name"))
	expectErrors(t, sysctls(spec(true, "net.ipv4.ip_local_port_range", "kernel.shm_rmid_forced"), fld), invalid("spec.securityContext.sysctls[0].name"))
	if errs := PodSpec(spec(false, "foo-"), field.NewPath("spec")); !strings.Contains(errs.ToAggregate().Error(), `spec.securityContext.sysctls[0].name: Invalid value: "foo-"`) {
		t.Errorf("PodSpec does not validate sysctls: %v", errs)
	}
}

func TestEphemeralContainersUpdate(t *testing.T) {
	old := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x"}}}}
	debugger := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}}
	with := func(ecs ...corev1.EphemeralContainer) *corev1.Pod {
		p := old.DeepCopy()
		p.Spec.EphemeralContainers = ecs
		return p
	}
	expectErrors(t, EphemeralContainersUpdate(with(debugger), old))
	changed := debugger
	changed.Image = "other"
	expectErrors(t, EphemeralContainersUpdate(with(changed), with(debugger)), forbidden("spec.ephemeralContainers[0]"))
	expectErrors(t, EphemeralContainersUpdate(with(), with(debugger)), forbidden("spec.ephemeralContainers"))
	clash := debugger
	clash.Name = "app"
	expectErrors(t, EphemeralContainersUpdate(with(clash), old), fe{field.ErrorTypeDuplicate, "spec.ephemeralContainers[0].name"})
	bad := debugger
	bad.Image = ""
	bad.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
	bad.ReadinessProbe = &corev1.Probe{}
	expectErrors(t, EphemeralContainersUpdate(with(bad), old), required("spec.ephemeralContainers[0].image"),
		forbidden("spec.ephemeralContainers[0].ports"), forbidden("spec.ephemeralContainers[0].readinessProbe"))
	// Checked as any container: a mount names one of the pod's volumes.
	mounts := debugger
	mounts.VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}
	if errs := EphemeralContainersUpdate(with(mounts), old); len(errs) != 1 || !strings.Contains(errs[0].Field, "volumeMounts[0].name") {
		t.Errorf("a mount of no volume: %v", errs)
	}
}
