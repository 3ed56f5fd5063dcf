package validation

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/controlplane/servicefamily"
)

var (
	metaPath = field.NewPath("metadata")
	specPath = field.NewPath("spec")
)

// Name validators by upstream's rule for each resource.
var (
	// DNSSubdomain is the rule for most names (pods, nodes, configmaps, deployments...).
	DNSSubdomain = apivalidation.NameIsDNSSubdomain
	// DNSLabel is the rule for namespaces.
	DNSLabel = apivalidation.NameIsDNSLabel
	// DNS1035Label is the rule for names that must begin with a letter (endpoints here).
	DNS1035Label = apivalidation.NameIsDNS1035Label
)

// ObjectMeta validates name, namespace, labels, annotations, owners and finalizers.
func ObjectMeta(m *metav1.ObjectMeta, namespaced bool, name apivalidation.ValidateNameFunc) field.ErrorList {
	return apivalidation.ValidateObjectMeta(m, namespaced, name, metaPath)
}

// ObjectMetaUpdate also checks the fields that never change (name, namespace, uid, creation time).
func ObjectMetaUpdate(m, old *metav1.ObjectMeta) field.ErrorList {
	return apivalidation.ValidateObjectMetaUpdate(m, old, metaPath)
}

var (
	restartPolicies = sets.New(corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)
	dnsPolicies     = sets.New(corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone)
	pullPolicies    = sets.New(corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)
	protocols       = sets.New(corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)
	tolerationOps   = sets.New(corev1.TolerationOpEqual, corev1.TolerationOpExists)
	taintEffects    = sets.New(corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute)
)

// Pod validates a pod.
func Pod(p *corev1.Pod) field.ErrorList {
	errs := ObjectMeta(&p.ObjectMeta, true, DNSSubdomain)
	return append(errs, PodSpec(&p.Spec, specPath)...)
}

// PodUpdate validates what a pod update may change: upstream allows only images, the active
// deadline, added tolerations, the grace period and scheduling gates.
func PodUpdate(p, old *corev1.Pod) field.ErrorList {
	errs := ObjectMetaUpdate(&p.ObjectMeta, &old.ObjectMeta)
	mutable := old.Spec.DeepCopy()
	for i := range mutable.Containers {
		if i < len(p.Spec.Containers) {
			mutable.Containers[i].Image = p.Spec.Containers[i].Image
		}
	}
	for i := range mutable.InitContainers {
		if i < len(p.Spec.InitContainers) {
			mutable.InitContainers[i].Image = p.Spec.InitContainers[i].Image
		}
	}
	mutable.ActiveDeadlineSeconds = p.Spec.ActiveDeadlineSeconds
	mutable.Tolerations = p.Spec.Tolerations
	mutable.TerminationGracePeriodSeconds = p.Spec.TerminationGracePeriodSeconds
	mutable.SchedulingGates = p.Spec.SchedulingGates
	if !apiequality.Semantic.DeepEqual(mutable, &p.Spec) {
		errs = append(errs, field.Forbidden(specPath, "pod updates may not change fields other than "+
			"`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"+
			"`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "+
			"(allow it to be set to 1 if it was previously negative)"))
	}
	if old.Spec.NodeName != "" && p.Spec.NodeName != old.Spec.NodeName {
		errs = append(errs, field.Invalid(specPath.Child("nodeName"), p.Spec.NodeName, "field is immutable"))
	}
	return errs
}

// PodTemplate validates the pod template of a workload; restartPolicy must be Always unless
// allowedRestart says otherwise.
func PodTemplate(t *corev1.PodTemplateSpec, fld *field.Path) field.ErrorList {
	errs := podTemplateAnyRestart(t, fld)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(fld.Child("spec", "restartPolicy"), t.Spec.RestartPolicy,
			[]string{string(corev1.RestartPolicyAlways)}))
	}
	return errs
}

// podTemplateAnyRestart is PodTemplate without its restartPolicy rule (Jobs have their own).
func podTemplateAnyRestart(t *corev1.PodTemplateSpec, fld *field.Path) field.ErrorList {
	errs := apivalidation.ValidateAnnotations(t.Annotations, fld.Child("metadata", "annotations"))
	errs = append(errs, metav1validation.ValidateLabels(t.Labels, fld.Child("metadata", "labels"))...)
	return append(errs, PodSpec(&t.Spec, fld.Child("spec"))...)
}

// PodTemplateObject validates a core/v1 PodTemplate: its metadata and its template, whose
// restartPolicy may be any (unlike a workload's).
func PodTemplateObject(t *corev1.PodTemplate) field.ErrorList {
	errs := ObjectMeta(&t.ObjectMeta, true, DNSSubdomain)
	tmpl := field.NewPath("template")
	errs = append(errs, apivalidation.ValidateAnnotations(t.Template.Annotations, tmpl.Child("metadata", "annotations"))...)
	errs = append(errs, metav1validation.ValidateLabels(t.Template.Labels, tmpl.Child("metadata", "labels"))...)
	return append(errs, PodSpec(&t.Template.Spec, tmpl.Child("spec"))...)
}

// imageVolume checks an image volume as upstream: a reference, and a known pull policy.
func imageVolume(v *corev1.ImageVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.Reference == "" {
		errs = append(errs, field.Required(p.Child("reference"), ""))
	}
	if v.PullPolicy == "" {
		errs = append(errs, field.Required(p.Child("pullPolicy"), ""))
	} else if !pullPolicies.Has(v.PullPolicy) {
		errs = append(errs, field.NotSupported(p.Child("pullPolicy"), v.PullPolicy, sets.List(pullPolicies)))
	}
	return errs
}

// PodSpec validates the rules shared by pods and templates.
func PodSpec(s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := sets.New[string]()
	for i, v := range s.Volumes {
		vp := fld.Child("volumes").Index(i)
		if v.Name == "" {
			errs = append(errs, field.Required(vp.Child("name"), ""))
		} else if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		} else {
			for _, msg := range validation.IsDNS1123Label(v.Name) {
				errs = append(errs, field.Invalid(vp.Child("name"), v.Name, msg))
			}
		}
		volumes.Insert(v.Name)
		if v.Projected != nil {
			errs = append(errs, projectedVolume(v.Projected, vp.Child("projected"))...)
		}
		if v.Image != nil {
			errs = append(errs, imageVolume(v.Image, vp.Child("image"))...)
		}
	}
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(fld.Child("containers"), ""))
	}
	names := sets.New[string]()
	errs = append(errs, containers(s.InitContainers, fld.Child("initContainers"), names, volumes)...)
	errs = append(errs, containers(s.Containers, fld.Child("containers"), names, volumes)...)
	if s.RestartPolicy != "" && !restartPolicies.Has(s.RestartPolicy) {
		errs = append(errs, field.NotSupported(fld.Child("restartPolicy"), s.RestartPolicy, sets.List(restartPolicies)))
	}
	if s.DNSPolicy != "" && !dnsPolicies.Has(s.DNSPolicy) {
		errs = append(errs, field.NotSupported(fld.Child("dnsPolicy"), s.DNSPolicy, sets.List(dnsPolicies)))
	}
	if s.NodeName != "" {
		for _, msg := range DNSSubdomain(s.NodeName, false) {
			errs = append(errs, field.Invalid(fld.Child("nodeName"), s.NodeName, msg))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, fld.Child("nodeSelector"))...)
	if s.ServiceAccountName != "" {
		for _, msg := range DNSSubdomain(s.ServiceAccountName, false) {
			errs = append(errs, field.Invalid(fld.Child("serviceAccountName"), s.ServiceAccountName, msg))
		}
	}
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(fld.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	for i, t := range s.Tolerations {
		errs = append(errs, toleration(t, fld.Child("tolerations").Index(i))...)
	}
	if s.SecurityContext != nil {
		errs = append(errs, sysctls(s, fld.Child("securityContext", "sysctls"))...)
	}
	return errs
}

// EphemeralContainersUpdate validates an update through pods/ephemeralcontainers: existing
// ephemeral containers stay as they were, new ones have a unique name and an image, and none
// declares what an ephemeral container cannot have (ports, probes, lifecycle, resources).
func EphemeralContainersUpdate(p, old *corev1.Pod) field.ErrorList {
	fld := field.NewPath("spec", "ephemeralContainers")
	var errs field.ErrorList
	if len(p.Spec.EphemeralContainers) < len(old.Spec.EphemeralContainers) {
		return field.ErrorList{field.Forbidden(fld, "existing ephemeral containers may not be removed")}
	}
	for i, oc := range old.Spec.EphemeralContainers {
		if !apiequality.Semantic.DeepEqual(p.Spec.EphemeralContainers[i], oc) {
			errs = append(errs, field.Forbidden(fld.Index(i), "existing ephemeral containers may not be changed"))
		}
	}
	names := sets.New[string]()
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		names.Insert(c.Name)
	}
	// As any container (names unique across the pod, an image, mounts of its volumes), and
	// without what an ephemeral container cannot have.
	volumes := sets.New[string]()
	for _, v := range p.Spec.Volumes {
		volumes.Insert(v.Name)
	}
	common := make([]corev1.Container, len(p.Spec.EphemeralContainers))
	for i, ec := range p.Spec.EphemeralContainers {
		common[i] = corev1.Container(ec.EphemeralContainerCommon)
	}
	errs = append(errs, containers(common, fld, names, volumes)...)
	for i, ec := range p.Spec.EphemeralContainers {
		ep := fld.Index(i)
		if len(ec.Ports) > 0 {
			errs = append(errs, field.Forbidden(ep.Child("ports"), "cannot be set for an Ephemeral Container"))
		}
		for name, set := range map[string]bool{"livenessProbe": ec.LivenessProbe != nil, "readinessProbe": ec.ReadinessProbe != nil,
			"startupProbe": ec.StartupProbe != nil, "lifecycle": ec.Lifecycle != nil} {
			if set {
				errs = append(errs, field.Forbidden(ep.Child(name), "cannot be set for an Ephemeral Container"))
			}
		}
		if len(ec.Resources.Limits) > 0 || len(ec.Resources.Requests) > 0 {
			errs = append(errs, field.Forbidden(ep.Child("resources"), "cannot be set for an Ephemeral Container"))
		}
	}
	return errs
}

// sysctlName is upstream's: dot- or slash-separated segments of lower-case letters, digits,
// '-' and '_', at most 253 characters.
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

const sysctlMaxLength = 253

// sysctls validates the pod's sysctls as upstream: well-formed unique names, and no network
// sysctl on a pod in the host's network namespace (nor an IPC one in the host's IPC).
func sysctls(s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, sc := range s.SecurityContext.Sysctls {
		p := fld.Index(i).Child("name")
		switch {
		case sc.Name == "":
			errs = append(errs, field.Required(p, ""))
		case len(sc.Name) > sysctlMaxLength || !sysctlName.MatchString(sc.Name):
			errs = append(errs, field.Invalid(p, sc.Name, fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlName)))
		case seen.Has(sc.Name):
			errs = append(errs, field.Duplicate(p, sc.Name))
		}
		seen.Insert(sc.Name)
		dotted := strings.ReplaceAll(sc.Name, "/", ".")
		switch {
		case s.HostNetwork && strings.HasPrefix(dotted, "net."):
			errs = append(errs, field.Invalid(p, sc.Name, "may not be specified when 'hostNetwork' is true"))
		case s.HostIPC && (strings.HasPrefix(dotted, "kernel.shm") || strings.HasPrefix(dotted, "kernel.msg") || strings.HasPrefix(dotted, "kernel.sem") || strings.HasPrefix(dotted, "fs.mqueue.")):
			errs = append(errs, field.Invalid(p, sc.Name, "may not be specified when 'hostIPC' is true"))
		}
	}
	return errs
}

func containers(cs []corev1.Container, fld *field.Path, names, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for i, c := range cs {
		cp := fld.Index(i)
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(cp.Child("name"), ""))
		case names.Has(c.Name):
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		default:
			for _, msg := range validation.IsDNS1123Label(c.Name) {
				errs = append(errs, field.Invalid(cp.Child("name"), c.Name, msg))
			}
		}
		names.Insert(c.Name)
		if c.Image == "" {
			errs = append(errs, field.Required(cp.Child("image"), ""))
		}
		if c.ImagePullPolicy != "" && !pullPolicies.Has(c.ImagePullPolicy) {
			errs = append(errs, field.NotSupported(cp.Child("imagePullPolicy"), c.ImagePullPolicy, sets.List(pullPolicies)))
		}
		portNames := sets.New[string]()
		for j, p := range c.Ports {
			pp := cp.Child("ports").Index(j)
			errs = append(errs, port(p.ContainerPort, pp.Child("containerPort"))...)
			if p.HostPort != 0 {
				errs = append(errs, port(p.HostPort, pp.Child("hostPort"))...)
			}
			if !protocols.Has(p.Protocol) {
				errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, sets.List(protocols)))
			}
			if p.Name != "" {
				for _, msg := range validation.IsValidPortName(p.Name) {
					errs = append(errs, field.Invalid(pp.Child("name"), p.Name, msg))
				}
				if portNames.Has(p.Name) {
					errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
				}
				portNames.Insert(p.Name)
			}
		}
		for j, m := range c.VolumeMounts {
			mp := cp.Child("volumeMounts").Index(j)
			if !volumes.Has(m.Name) {
				errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
			}
			if m.MountPath == "" {
				errs = append(errs, field.Required(mp.Child("mountPath"), ""))
			}
		}
		for name, q := range c.Resources.Requests {
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(cp.Child("resources", "requests").Key(string(name)), q.String(), "must be greater than or equal to 0"))
			}
			if l, ok := c.Resources.Limits[name]; ok && q.Cmp(l) > 0 {
				errs = append(errs, field.Invalid(cp.Child("resources", "requests").Key(string(name)), q.String(),
					fmt.Sprintf("must be less than or equal to %s limit of %s", name, l.String())))
			}
		}
		for j, e := range c.Env {
			if e.Name == "" {
				errs = append(errs, field.Required(cp.Child("env").Index(j).Child("name"), ""))
			}
		}
	}
	return errs
}

func toleration(t corev1.Toleration, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(fld.Child("key"), t.Key, msg))
		}
	}
	if t.Operator != "" && !tolerationOps.Has(t.Operator) {
		errs = append(errs, field.NotSupported(fld.Child("operator"), t.Operator, sets.List(tolerationOps)))
	}
	if t.Operator == corev1.TolerationOpExists && t.Value != "" {
		errs = append(errs, field.Invalid(fld.Child("operator"), t.Operator, "value must be empty when `operator` is 'Exists'"))
	}
	if t.Effect != "" && !taintEffects.Has(t.Effect) {
		errs = append(errs, field.NotSupported(fld.Child("effect"), t.Effect, sets.List(taintEffects)))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(fld.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
	}
	return errs
}

func port(p int32, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(int(p)) {
		errs = append(errs, field.Invalid(fld, p, msg))
	}
	return errs
}

var serviceTypes = sets.New(corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort,
	corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName)

// Service validates a Service. The ClusterIP is checked for syntax here; whether it lies in the
// service CIDR and is free is the allocator's job.
func Service(s *corev1.Service) field.ErrorList {
	// A DNS label, a leading digit allowed: RelaxedServiceNameValidation is GA (locked on)
	// in 1.37 (KEP-5311).
	errs := ObjectMeta(&s.ObjectMeta, true, DNSLabel)
	if !serviceTypes.Has(s.Spec.Type) {
		errs = append(errs, field.NotSupported(specPath.Child("type"), s.Spec.Type, sets.List(serviceTypes)))
	}
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		if s.Spec.ExternalName == "" {
			errs = append(errs, field.Required(specPath.Child("externalName"), ""))
		}
	} else if len(s.Spec.Ports) == 0 && s.Spec.ClusterIP != corev1.ClusterIPNone {
		errs = append(errs, field.Required(specPath.Child("ports"), ""))
	}
	names := sets.New[string]()
	type portKey struct {
		port  int32
		proto corev1.Protocol
	}
	seen := map[portKey]bool{}
	for i, p := range s.Spec.Ports {
		pp := specPath.Child("ports").Index(i)
		if len(s.Spec.Ports) > 1 && p.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), ""))
		} else if p.Name != "" {
			for _, msg := range validation.IsDNS1123Label(p.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), p.Name, msg))
			}
			if names.Has(p.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
			}
			names.Insert(p.Name)
		}
		errs = append(errs, port(p.Port, pp.Child("port"))...)
		if !protocols.Has(p.Protocol) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, sets.List(protocols)))
		}
		k := portKey{p.Port, p.Protocol}
		if seen[k] {
			errs = append(errs, field.Duplicate(pp, fmt.Sprintf("%d/%s", p.Port, p.Protocol)))
		}
		seen[k] = true
		if p.NodePort != 0 {
			if s.Spec.Type != corev1.ServiceTypeNodePort && s.Spec.Type != corev1.ServiceTypeLoadBalancer {
				errs = append(errs, field.Forbidden(pp.Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
			errs = append(errs, port(p.NodePort, pp.Child("nodePort"))...)
		}
		if p.TargetPort.IntVal != 0 || p.TargetPort.StrVal != "" {
			if p.TargetPort.StrVal != "" {
				for _, msg := range validation.IsValidPortName(p.TargetPort.StrVal) {
					errs = append(errs, field.Invalid(pp.Child("targetPort"), p.TargetPort.StrVal, msg))
				}
			} else {
				errs = append(errs, port(p.TargetPort.IntVal, pp.Child("targetPort"))...)
			}
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(s.Spec.Selector, specPath.Child("selector"))...)
	return append(errs, servicefamily.Validate(s)...)
}

// ServiceUpdate adds what an update may not change: the primary cluster IP and IP family
// once allocated, the secondary ones released only with ipFamilyPolicy SingleStack.
func ServiceUpdate(s, old *corev1.Service) field.ErrorList {
	errs := ObjectMetaUpdate(&s.ObjectMeta, &old.ObjectMeta)
	return append(errs, servicefamily.ValidateUpdate(s, old)...)
}

// Namespace validates a namespace name.
func Namespace(ns *corev1.Namespace) field.ErrorList {
	return ObjectMeta(&ns.ObjectMeta, false, DNSLabel)
}

// Node validates a node.
func Node(n *corev1.Node) field.ErrorList {
	errs := ObjectMeta(&n.ObjectMeta, false, DNSSubdomain)
	for i, cidr := range n.Spec.PodCIDRs {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("podCIDRs").Index(i), cidr, "must be a valid CIDR"))
		}
	}
	if n.Spec.PodCIDR != "" && len(n.Spec.PodCIDRs) > 0 && n.Spec.PodCIDR != n.Spec.PodCIDRs[0] {
		errs = append(errs, field.Invalid(specPath.Child("podCIDRs"), n.Spec.PodCIDRs, "first entry must match spec.podCIDR"))
	}
	for i, t := range n.Spec.Taints {
		tp := specPath.Child("taints").Index(i)
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
		}
		if !taintEffects.Has(t.Effect) {
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, sets.List(taintEffects)))
		}
	}
	return errs
}

// NodeUpdate keeps podCIDR immutable once set, as upstream.
func NodeUpdate(n, old *corev1.Node) field.ErrorList {
	errs := ObjectMetaUpdate(&n.ObjectMeta, &old.ObjectMeta)
	if old.Spec.PodCIDR != "" && n.Spec.PodCIDR != old.Spec.PodCIDR {
		errs = append(errs, field.Forbidden(specPath.Child("podCIDR"), "node updates may not change podCIDR except from \"\" to valid"))
	}
	return errs
}

// ConfigMap validates keys of data and binaryData.
func ConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	errs := ObjectMeta(&cm.ObjectMeta, true, DNSSubdomain)
	for k := range cm.Data {
		errs = append(errs, dataKey(k, field.NewPath("data").Key(k))...)
	}
	for k := range cm.BinaryData {
		if _, dup := cm.Data[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, "duplicate of key present in data"))
		}
		errs = append(errs, dataKey(k, field.NewPath("binaryData").Key(k))...)
	}
	return errs
}

// Secret validates keys of data.
func Secret(s *corev1.Secret) field.ErrorList {
	errs := ObjectMeta(&s.ObjectMeta, true, DNSSubdomain)
	for k := range s.Data {
		errs = append(errs, dataKey(k, field.NewPath("data").Key(k))...)
	}
	return errs
}

func dataKey(k string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsConfigMapKey(k) {
		errs = append(errs, field.Invalid(fld, k, msg))
	}
	return errs
}

// Immutable returns the Forbidden errors of an update to a ConfigMap or Secret that was
// immutable (old): its data may not change, nor may it become mutable again.
func Immutable(old, updated *bool, changed bool) field.ErrorList {
	if old == nil || !*old {
		return nil
	}
	var errs field.ErrorList
	if updated == nil || !*updated {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
	}
	if changed {
		errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
	}
	return errs
}

// ReplicationController validates a core/v1 ReplicationController: a non-empty selector
// that selects its template's labels, and a valid template with restartPolicy Always.
func ReplicationController(rc *corev1.ReplicationController) field.ErrorList {
	errs := ObjectMeta(&rc.ObjectMeta, true, DNSSubdomain)
	if rc.Spec.Replicas != nil && *rc.Spec.Replicas < 0 {
		errs = append(errs, field.Invalid(specPath.Child("replicas"), *rc.Spec.Replicas, "must be greater than or equal to 0"))
	}
	if len(rc.Spec.Selector) == 0 {
		errs = append(errs, field.Required(specPath.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabels(rc.Spec.Selector, specPath.Child("selector"))...)
	}
	if rc.Spec.Template == nil {
		return append(errs, field.Required(specPath.Child("template"), ""))
	}
	if len(rc.Spec.Selector) > 0 && !labels.SelectorFromSet(rc.Spec.Selector).Matches(labels.Set(rc.Spec.Template.Labels)) {
		errs = append(errs, field.Invalid(specPath.Child("template", "metadata", "labels"), rc.Spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	return append(errs, PodTemplate(rc.Spec.Template, specPath.Child("template"))...)
}
