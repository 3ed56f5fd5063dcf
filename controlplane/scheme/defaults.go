package scheme

import (
	"maps"
	"math"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The defaulting below mirrors upstream's SetDefaults_* for the fields that users and
// components rely on. The API server applies it to every decoded request body.
func addDefaultingFuncs(s *runtime.Scheme) error {
	s.AddTypeDefaultingFunc(&corev1.Pod{}, func(o any) { DefaultPod(o.(*corev1.Pod)) })
	s.AddTypeDefaultingFunc(&corev1.Service{}, func(o any) { DefaultService(o.(*corev1.Service)) })
	s.AddTypeDefaultingFunc(&corev1.Secret{}, func(o any) {
		if sec := o.(*corev1.Secret); sec.Type == "" {
			sec.Type = corev1.SecretTypeOpaque
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Namespace{}, func(o any) {
		if ns := o.(*corev1.Namespace); ns.Status.Phase == "" {
			ns.Status.Phase = corev1.NamespaceActive
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Node{}, func(o any) {
		if n := o.(*corev1.Node); n.Status.Phase == "" {
			// Upstream leaves phase empty; nothing to default beyond allocatable.
			if n.Status.Allocatable == nil && n.Status.Capacity != nil {
				n.Status.Allocatable = n.Status.Capacity.DeepCopy()
			}
		}
	})
	s.AddTypeDefaultingFunc(&certificatesv1.CertificateSigningRequest{}, func(o any) {
		// A condition's status defaults to True, as upstream's v1 defaulting does.
		csr := o.(*certificatesv1.CertificateSigningRequest)
		for i := range csr.Status.Conditions {
			if csr.Status.Conditions[i].Status == "" {
				csr.Status.Conditions[i].Status = corev1.ConditionTrue
			}
		}
	})
	// A pod certificate request that names no lifetime asks for 24 hours, as upstream's
	// v1 defaulting.
	s.AddTypeDefaultingFunc(&certificatesv1.PodCertificateRequest{}, func(o any) {
		r := o.(*certificatesv1.PodCertificateRequest)
		if r.Spec.MaxExpirationSeconds == nil {
			r.Spec.MaxExpirationSeconds = ptr.To[int32](24 * 60 * 60)
		}
	})
	// RBAC: a binding's roleRef and its User and Group subjects are in the RBAC API group.
	s.AddTypeDefaultingFunc(&rbacv1.RoleBinding{}, func(o any) {
		b := o.(*rbacv1.RoleBinding)
		defaultRBACRefs(&b.RoleRef, b.Subjects)
	})
	s.AddTypeDefaultingFunc(&rbacv1.ClusterRoleBinding{}, func(o any) {
		b := o.(*rbacv1.ClusterRoleBinding)
		defaultRBACRefs(&b.RoleRef, b.Subjects)
	})
	s.AddTypeDefaultingFunc(&appsv1.Deployment{}, func(o any) { DefaultDeployment(o.(*appsv1.Deployment)) })
	s.AddTypeDefaultingFunc(&appsv1.ReplicaSet{}, func(o any) {
		rs := o.(*appsv1.ReplicaSet)
		if rs.Spec.Replicas == nil {
			rs.Spec.Replicas = ptr.To[int32](1)
		}
		DefaultPodSpec(&rs.Spec.Template.Spec)
	})
	s.AddTypeDefaultingFunc(&appsv1.DaemonSet{}, func(o any) { DefaultDaemonSet(o.(*appsv1.DaemonSet)) })
	s.AddTypeDefaultingFunc(&corev1.ReplicationController{}, func(o any) {
		// As upstream's v1 defaults: the selector and the labels default to the template's.
		rc := o.(*corev1.ReplicationController)
		if rc.Spec.Template != nil {
			if len(rc.Spec.Selector) == 0 {
				rc.Spec.Selector = maps.Clone(rc.Spec.Template.Labels)
			}
			if len(rc.Labels) == 0 {
				rc.Labels = maps.Clone(rc.Spec.Template.Labels)
			}
			DefaultPodSpec(&rc.Spec.Template.Spec)
		}
		if rc.Spec.Replicas == nil {
			rc.Spec.Replicas = ptr.To[int32](1)
		}
	})
	s.AddTypeDefaultingFunc(&batchv1.Job{}, func(o any) { DefaultJob(o.(*batchv1.Job)) })
	s.AddTypeDefaultingFunc(&batchv1.CronJob{}, func(o any) { DefaultCronJob(o.(*batchv1.CronJob)) })
	s.AddTypeDefaultingFunc(&discoveryv1.EndpointSlice{}, func(o any) {
		es := o.(*discoveryv1.EndpointSlice)
		for i := range es.Ports {
			if es.Ports[i].Protocol == nil {
				es.Ports[i].Protocol = ptr.To(corev1.ProtocolTCP)
			}
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Endpoints{}, func(o any) {
		ep := o.(*corev1.Endpoints)
		for i := range ep.Subsets {
			for j := range ep.Subsets[i].Ports {
				if ep.Subsets[i].Ports[j].Protocol == "" {
					ep.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
				}
			}
		}
	})
	s.AddTypeDefaultingFunc(&networkingv1.NetworkPolicy{}, func(o any) { DefaultNetworkPolicy(o.(*networkingv1.NetworkPolicy)) })
	addMoreDefaultingFuncs(s)
	return nil
}

// DefaultPod applies upstream's pod defaults.
func DefaultPod(p *corev1.Pod) {
	DefaultPodSpec(&p.Spec)
	if p.Spec.EnableServiceLinks == nil {
		p.Spec.EnableServiceLinks = ptr.To(true)
	}
}

// DefaultPodSpec applies the defaults shared by pods and pod templates.
func DefaultPodSpec(s *corev1.PodSpec) {
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.ServiceAccountName == "" && s.DeprecatedServiceAccount != "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
	for i := range s.Tolerations {
		if s.Tolerations[i].Operator == "" {
			s.Tolerations[i].Operator = corev1.TolerationOpEqual
		}
	}
}

func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = DefaultImagePullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	// Requests default to limits, as upstream: a container that only states limits is
	// scheduled on what it may use.
	for name, q := range c.Resources.Limits {
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		if _, ok := c.Resources.Requests[name]; !ok {
			c.Resources.Requests[name] = q.DeepCopy()
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if h := p.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = "/"
		}
		if h.Scheme == "" {
			h.Scheme = corev1.URISchemeHTTP
		}
	}
}

func defaultVolume(v *corev1.Volume) {
	mode := ptr.To[int32](corev1.SecretVolumeSourceDefaultMode)
	switch {
	case v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil:
		v.ConfigMap.DefaultMode = mode
	case v.Secret != nil && v.Secret.DefaultMode == nil:
		v.Secret.DefaultMode = mode
	case v.Projected != nil && v.Projected.DefaultMode == nil:
		v.Projected.DefaultMode = mode
	case v.DownwardAPI != nil && v.DownwardAPI.DefaultMode == nil:
		v.DownwardAPI.DefaultMode = mode
	case v.HostPath != nil && v.HostPath.Type == nil:
		v.HostPath.Type = ptr.To(corev1.HostPathUnset)
	case v.Image != nil && v.Image.PullPolicy == "":
		// As a container's image: Always for untagged or :latest references.
		v.Image.PullPolicy = DefaultImagePullPolicy(v.Image.Reference)
	case v.EmptyDir == nil && v.VolumeSource == (corev1.VolumeSource{}):
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
}

// DefaultImagePullPolicy is Always for untagged or :latest images, IfNotPresent otherwise.
func DefaultImagePullPolicy(image string) corev1.PullPolicy {
	if strings.Contains(image, "@") {
		return corev1.PullIfNotPresent
	}
	name := image
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	i := strings.LastIndex(name, ":")
	if i < 0 || name[i+1:] == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// DefaultService applies upstream's Service defaults (the ClusterIP itself is allocated by
// the Service registry, not here).
func DefaultService(s *corev1.Service) {
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && s.Spec.SessionAffinityConfig == nil {
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
			ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](corev1.DefaultClientIPServiceAffinitySeconds)},
		}
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if s.Spec.Type != corev1.ServiceTypeExternalName {
		if s.Spec.InternalTrafficPolicy == nil {
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
		}
	}
	if (s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer) &&
		s.Spec.ExternalTrafficPolicy == "" {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.AllocateLoadBalancerNodePorts == nil {
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(true)
	}
}

// DefaultDeployment applies upstream's apps/v1 Deployment defaults.
func DefaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To[int32](1)
	}
	if d.Spec.Strategy.Type == "" {
		d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if d.Spec.Strategy.RollingUpdate == nil {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		ru := d.Spec.Strategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = ptr.To(intstr.FromString("25%"))
		}
		if ru.MaxSurge == nil {
			ru.MaxSurge = ptr.To(intstr.FromString("25%"))
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	}
	DefaultPodSpec(&d.Spec.Template.Spec)
}

// DefaultJob applies upstream's batch/v1 Job defaults: one pod at a time, six retries,
// completions 1 when parallelism is unset too, NonIndexed, pods replaced once terminating
// or failed (Failed with a podFailurePolicy, as upstream requires).
func DefaultJob(j *batchv1.Job) {
	defaultJobSpec(&j.Spec)
}

func defaultJobSpec(s *batchv1.JobSpec) {
	if s.Completions == nil && s.Parallelism == nil {
		s.Completions = ptr.To[int32](1)
		s.Parallelism = ptr.To[int32](1)
	}
	if s.Parallelism == nil {
		s.Parallelism = ptr.To[int32](1)
	}
	if s.BackoffLimit == nil {
		if s.BackoffLimitPerIndex != nil {
			s.BackoffLimit = ptr.To[int32](math.MaxInt32)
		} else {
			s.BackoffLimit = ptr.To[int32](6)
		}
	}
	if s.CompletionMode == nil {
		s.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	if s.Suspend == nil {
		s.Suspend = ptr.To(false)
	}
	if s.ManualSelector == nil {
		s.ManualSelector = ptr.To(false)
	}
	if s.PodReplacementPolicy == nil {
		if s.PodFailurePolicy != nil {
			s.PodReplacementPolicy = ptr.To(batchv1.Failed)
		} else {
			s.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
		}
	}
	if s.PodFailurePolicy != nil {
		for i := range s.PodFailurePolicy.Rules {
			for j := range s.PodFailurePolicy.Rules[i].OnPodConditions {
				if s.PodFailurePolicy.Rules[i].OnPodConditions[j].Status == "" {
					s.PodFailurePolicy.Rules[i].OnPodConditions[j].Status = corev1.ConditionTrue
				}
			}
		}
	}
	DefaultPodSpec(&s.Template.Spec)
}

// DefaultCronJob applies upstream's batch/v1 CronJob defaults.
func DefaultCronJob(c *batchv1.CronJob) {
	if c.Spec.ConcurrencyPolicy == "" {
		c.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if c.Spec.Suspend == nil {
		c.Spec.Suspend = ptr.To(false)
	}
	if c.Spec.SuccessfulJobsHistoryLimit == nil {
		c.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](3)
	}
	if c.Spec.FailedJobsHistoryLimit == nil {
		c.Spec.FailedJobsHistoryLimit = ptr.To[int32](1)
	}
	defaultJobSpec(&c.Spec.JobTemplate.Spec)
}

// DefaultDaemonSet applies upstream's apps/v1 DaemonSet defaults.
func DefaultDaemonSet(d *appsv1.DaemonSet) {
	if d.Spec.UpdateStrategy.Type == "" {
		d.Spec.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if d.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if d.Spec.UpdateStrategy.RollingUpdate == nil {
			d.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		ru := d.Spec.UpdateStrategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		}
		if ru.MaxSurge == nil {
			ru.MaxSurge = ptr.To(intstr.FromInt32(0))
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	DefaultPodSpec(&d.Spec.Template.Spec)
}

// DefaultNetworkPolicy fills policyTypes and port protocols as upstream does.
func DefaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	for i := range np.Spec.Ingress {
		defaultPolicyPorts(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		defaultPolicyPorts(np.Spec.Egress[i].Ports)
	}
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) > 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
}

func defaultPolicyPorts(ports []networkingv1.NetworkPolicyPort) {
	for i := range ports {
		if ports[i].Protocol == nil {
			ports[i].Protocol = ptr.To(corev1.ProtocolTCP)
		}
	}
}

func defaultRBACRefs(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		if subjects[i].APIGroup == "" && (subjects[i].Kind == rbacv1.UserKind || subjects[i].Kind == rbacv1.GroupKind) {
			subjects[i].APIGroup = rbacv1.GroupName
		}
	}
}
