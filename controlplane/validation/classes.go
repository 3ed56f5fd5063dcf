package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Priorities upstream reserves: user classes stay at or below HighestUserDefinablePriority;
// the two system classes sit above it.
const (
	HighestUserDefinablePriority = int32(1000000000)
	SystemClusterCritical        = "system-cluster-critical"
	SystemNodeCritical           = "system-node-critical"
	SystemCriticalPriority       = 2 * HighestUserDefinablePriority
)

// SystemPriorityClasses are the classes the API server creates at start, as upstream.
var SystemPriorityClasses = map[string]int32{
	SystemClusterCritical: SystemCriticalPriority,
	SystemNodeCritical:    SystemCriticalPriority + 1000,
}

var preemptionPolicies = []string{string(corev1.PreemptLowerPriority), string(corev1.PreemptNever)}

// PriorityClass validates a PriorityClass: system- names are reserved for the system
// classes, and user values stay at or below one billion.
func PriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	errs := ObjectMeta(&pc.ObjectMeta, false, DNSSubdomain)
	if v, system := SystemPriorityClasses[pc.Name]; system {
		if pc.Value != v {
			errs = append(errs, field.Forbidden(field.NewPath("value"), "value of system priority class "+pc.Name+" is reserved"))
		}
	} else {
		if strings.HasPrefix(pc.Name, "system-") {
			errs = append(errs, field.Forbidden(metaPath.Child("name"), "priority class names with 'system-' prefix are reserved"))
		}
		if pc.Value > HighestUserDefinablePriority {
			errs = append(errs, field.Forbidden(field.NewPath("value"), "maximum allowed value of a user defined priority is 1000000000"))
		}
	}
	if p := pc.PreemptionPolicy; p != nil && !contains(preemptionPolicies, string(*p)) {
		errs = append(errs, field.NotSupported(field.NewPath("preemptionPolicy"), *p, preemptionPolicies))
	}
	return errs
}

// PriorityClassUpdate keeps the value and the preemption policy immutable.
func PriorityClassUpdate(pc, old *schedulingv1.PriorityClass) field.ErrorList {
	errs := ObjectMetaUpdate(&pc.ObjectMeta, &old.ObjectMeta)
	if pc.Value != old.Value {
		errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	if !apiequality.Semantic.DeepEqual(pc.PreemptionPolicy, old.PreemptionPolicy) {
		errs = append(errs, field.Invalid(field.NewPath("preemptionPolicy"), pc.PreemptionPolicy, "field is immutable"))
	}
	return errs
}

// RuntimeClass validates a RuntimeClass: a DNS-label handler, non-negative overhead and a
// valid scheduling constraint.
func RuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	errs := ObjectMeta(&rc.ObjectMeta, false, DNSSubdomain)
	h := field.NewPath("handler")
	if rc.Handler == "" {
		errs = append(errs, field.Required(h, ""))
	}
	for _, msg := range validation.IsDNS1123Label(rc.Handler) {
		if rc.Handler != "" {
			errs = append(errs, field.Invalid(h, rc.Handler, msg))
		}
	}
	if rc.Overhead != nil {
		for k, q := range rc.Overhead.PodFixed {
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(field.NewPath("overhead", "podFixed").Key(string(k)), q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	if s := rc.Scheduling; s != nil {
		errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, field.NewPath("scheduling", "nodeSelector"))...)
		for i, t := range s.Tolerations {
			errs = append(errs, toleration(t, field.NewPath("scheduling", "tolerations").Index(i))...)
		}
	}
	return errs
}

// RuntimeClassUpdate keeps the handler immutable.
func RuntimeClassUpdate(rc, old *nodev1.RuntimeClass) field.ErrorList {
	errs := ObjectMetaUpdate(&rc.ObjectMeta, &old.ObjectMeta)
	if rc.Handler != old.Handler {
		errs = append(errs, field.Invalid(field.NewPath("handler"), rc.Handler, "field is immutable"))
	}
	return errs
}

var pathTypes = []string{string(networkingv1.PathTypeExact), string(networkingv1.PathTypePrefix), string(networkingv1.PathTypeImplementationSpecific)}

func ingressBackend(b *networkingv1.IngressBackend, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case b.Service != nil && b.Resource != nil:
		return field.ErrorList{field.Invalid(fld, "", "cannot set both resource and service backends")}
	case b.Service == nil && b.Resource == nil:
		return field.ErrorList{field.Invalid(fld, "", "resource or service backend is required")}
	case b.Service != nil:
		sp := fld.Child("service")
		for _, msg := range validation.IsDNS1035Label(b.Service.Name) {
			errs = append(errs, field.Invalid(sp.Child("name"), b.Service.Name, msg))
		}
		p := b.Service.Port
		switch {
		case p.Name != "" && p.Number != 0:
			errs = append(errs, field.Invalid(sp.Child("port"), p, "cannot set both port name & port number"))
		case p.Name != "":
			for _, msg := range validation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(sp.Child("port", "name"), p.Name, msg))
			}
		case p.Number != 0:
			for _, msg := range validation.IsValidPortNum(int(p.Number)) {
				errs = append(errs, field.Invalid(sp.Child("port", "number"), p.Number, msg))
			}
		default:
			errs = append(errs, field.Required(sp.Child("port"), "port name or number is required"))
		}
	case b.Resource != nil:
		if b.Resource.Kind == "" {
			errs = append(errs, field.Required(fld.Child("resource", "kind"), ""))
		}
		if b.Resource.Name == "" {
			errs = append(errs, field.Required(fld.Child("resource", "name"), ""))
		}
	}
	return errs
}

func ingressHost(host string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.Contains(host, "*") {
		for _, msg := range validation.IsWildcardDNS1123Subdomain(host) {
			errs = append(errs, field.Invalid(fld, host, msg))
		}
		return errs
	}
	for _, msg := range validation.IsDNS1123Subdomain(host) {
		errs = append(errs, field.Invalid(fld, host, msg))
	}
	return errs
}

// Ingress validates an Ingress with upstream's messages.
func Ingress(ing *networkingv1.Ingress) field.ErrorList {
	errs := ObjectMeta(&ing.ObjectMeta, true, DNSSubdomain)
	s := &ing.Spec
	if s.DefaultBackend == nil && len(s.Rules) == 0 {
		errs = append(errs, field.Invalid(specPath, s.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if s.DefaultBackend != nil {
		errs = append(errs, ingressBackend(s.DefaultBackend, specPath.Child("defaultBackend"))...)
	}
	if s.IngressClassName != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*s.IngressClassName) {
			errs = append(errs, field.Invalid(specPath.Child("ingressClassName"), *s.IngressClassName, msg))
		}
	}
	for i, r := range s.Rules {
		fld := specPath.Child("rules").Index(i)
		if r.Host != "" {
			errs = append(errs, ingressHost(r.Host, fld.Child("host"))...)
		}
		if r.HTTP == nil {
			continue
		}
		if len(r.HTTP.Paths) == 0 {
			errs = append(errs, field.Required(fld.Child("http", "paths"), ""))
		}
		for j, p := range r.HTTP.Paths {
			pf := fld.Child("http", "paths").Index(j)
			if p.PathType == nil {
				errs = append(errs, field.Required(pf.Child("pathType"), "pathType must be specified"))
			} else if !contains(pathTypes, string(*p.PathType)) {
				errs = append(errs, field.NotSupported(pf.Child("pathType"), *p.PathType, pathTypes))
			} else if *p.PathType != networkingv1.PathTypeImplementationSpecific {
				if !strings.HasPrefix(p.Path, "/") {
					errs = append(errs, field.Invalid(pf.Child("path"), p.Path, "must be an absolute path"))
				}
				if strings.Contains(p.Path, "//") {
					errs = append(errs, field.Invalid(pf.Child("path"), p.Path, "must not contain '//'"))
				}
			} else if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
				errs = append(errs, field.Invalid(pf.Child("path"), p.Path, "must be an absolute path"))
			}
			errs = append(errs, ingressBackend(&p.Backend, pf.Child("backend"))...)
		}
	}
	for i, t := range s.TLS {
		for j, h := range t.Hosts {
			errs = append(errs, ingressHost(h, specPath.Child("tls").Index(i).Child("hosts").Index(j))...)
		}
	}
	return errs
}

// IngressClass validates an IngressClass: a domain-prefixed controller name.
func IngressClass(ic *networkingv1.IngressClass) field.ErrorList {
	errs := ObjectMeta(&ic.ObjectMeta, false, DNSSubdomain)
	c := specPath.Child("controller")
	switch {
	case ic.Spec.Controller == "":
		errs = append(errs, field.Required(c, ""))
	case len(ic.Spec.Controller) > 250:
		errs = append(errs, field.TooLong(c, ic.Spec.Controller, 250))
	default:
		errs = append(errs, validation.IsDomainPrefixedPath(c, ic.Spec.Controller)...)
	}
	if p := ic.Spec.Parameters; p != nil {
		pf := specPath.Child("parameters")
		if p.Kind == "" {
			errs = append(errs, field.Required(pf.Child("kind"), ""))
		}
		if p.Name == "" {
			errs = append(errs, field.Required(pf.Child("name"), ""))
		}
		if p.Scope != nil && *p.Scope != networkingv1.IngressClassParametersReferenceScopeCluster && *p.Scope != networkingv1.IngressClassParametersReferenceScopeNamespace {
			errs = append(errs, field.NotSupported(pf.Child("scope"), *p.Scope, []string{"Cluster", "Namespace"}))
		}
	}
	return errs
}

// IngressClassUpdate keeps the controller immutable.
func IngressClassUpdate(ic, old *networkingv1.IngressClass) field.ErrorList {
	errs := ObjectMetaUpdate(&ic.ObjectMeta, &old.ObjectMeta)
	if ic.Spec.Controller != old.Spec.Controller {
		errs = append(errs, field.Invalid(specPath.Child("controller"), ic.Spec.Controller, "field is immutable"))
	}
	return errs
}

func deviceRequests(reqs []resourcev1.DeviceRequest, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, r := range reqs {
		rf := fld.Index(i)
		for _, msg := range validation.IsDNS1123Label(r.Name) {
			errs = append(errs, field.Invalid(rf.Child("name"), r.Name, msg))
		}
		if seen.Has(r.Name) {
			errs = append(errs, field.Duplicate(rf.Child("name"), r.Name))
		}
		seen.Insert(r.Name)
		switch {
		case r.Exactly == nil && len(r.FirstAvailable) == 0:
			errs = append(errs, field.Required(rf, "exactly one of `exactly` or `firstAvailable` is required"))
		case r.Exactly != nil && len(r.FirstAvailable) > 0:
			errs = append(errs, field.Invalid(rf, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
		case r.Exactly != nil && r.Exactly.DeviceClassName == "":
			errs = append(errs, field.Required(rf.Child("exactly", "deviceClassName"), ""))
		}
	}
	return errs
}

// DeviceClass validates a DeviceClass.
func DeviceClass(c *resourcev1.DeviceClass) field.ErrorList {
	errs := ObjectMeta(&c.ObjectMeta, false, DNSSubdomain)
	for i, s := range c.Spec.Selectors {
		if s.CEL == nil || s.CEL.Expression == "" {
			errs = append(errs, field.Required(specPath.Child("selectors").Index(i).Child("cel"), ""))
		}
	}
	return errs
}

// ResourceClaim validates a ResourceClaim.
func ResourceClaim(c *resourcev1.ResourceClaim) field.ErrorList {
	errs := ObjectMeta(&c.ObjectMeta, true, DNSSubdomain)
	return append(errs, deviceRequests(c.Spec.Devices.Requests, specPath.Child("devices", "requests"))...)
}

// ImmutableSpec refuses any change of spec (ResourceClaims and their templates, as upstream).
func ImmutableSpec(spec, old any) field.ErrorList {
	if !apiequality.Semantic.DeepEqual(spec, old) {
		return field.ErrorList{field.Invalid(specPath, "", "field is immutable")}
	}
	return nil
}

// ResourceClaimTemplate validates a ResourceClaimTemplate.
func ResourceClaimTemplate(t *resourcev1.ResourceClaimTemplate) field.ErrorList {
	errs := ObjectMeta(&t.ObjectMeta, true, DNSSubdomain)
	return append(errs, deviceRequests(t.Spec.Spec.Devices.Requests, specPath.Child("spec", "devices", "requests"))...)
}

// ResourceSlice validates a ResourceSlice: a driver, a pool, and exactly one node scope.
func ResourceSlice(s *resourcev1.ResourceSlice) field.ErrorList {
	errs := ObjectMeta(&s.ObjectMeta, false, DNSSubdomain)
	errs = append(errs, qualifiedProvisioner(s.Spec.Driver, specPath.Child("driver"))...)
	if s.Spec.Pool.Name == "" {
		errs = append(errs, field.Required(specPath.Child("pool", "name"), ""))
	}
	if s.Spec.Pool.ResourceSliceCount <= 0 {
		errs = append(errs, field.Invalid(specPath.Child("pool", "resourceSliceCount"), s.Spec.Pool.ResourceSliceCount, "must be greater than zero"))
	}
	scopes := 0
	if s.Spec.NodeName != nil {
		scopes++
	}
	if s.Spec.NodeSelector != nil {
		scopes++
	}
	if s.Spec.AllNodes != nil && *s.Spec.AllNodes {
		scopes++
	}
	if s.Spec.PerDeviceNodeSelection != nil && *s.Spec.PerDeviceNodeSelection {
		scopes++
	}
	if scopes != 1 {
		errs = append(errs, field.Invalid(specPath, "", "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"))
	}
	seen := sets.New[string]()
	for i, d := range s.Spec.Devices {
		df := specPath.Child("devices").Index(i).Child("name")
		for _, msg := range validation.IsDNS1123Label(d.Name) {
			errs = append(errs, field.Invalid(df, d.Name, msg))
		}
		if seen.Has(d.Name) {
			errs = append(errs, field.Duplicate(df, d.Name))
		}
		seen.Insert(d.Name)
	}
	return errs
}

var deviceTaintEffects = []string{string(resourcev1.DeviceTaintEffectNone), string(resourcev1.DeviceTaintEffectNoSchedule), string(resourcev1.DeviceTaintEffectNoExecute)}

// DeviceTaintRule validates a DeviceTaintRule's taint.
func DeviceTaintRule(r *resourcev1.DeviceTaintRule) field.ErrorList {
	errs := ObjectMeta(&r.ObjectMeta, false, DNSSubdomain)
	t := r.Spec.Taint
	tf := specPath.Child("taint")
	errs = append(errs, metav1validation.ValidateLabelName(t.Key, tf.Child("key"))...)
	if t.Value != "" {
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(tf.Child("value"), t.Value, msg))
		}
	}
	if !contains(deviceTaintEffects, string(t.Effect)) {
		errs = append(errs, field.NotSupported(tf.Child("effect"), t.Effect, deviceTaintEffects))
	}
	return errs
}
