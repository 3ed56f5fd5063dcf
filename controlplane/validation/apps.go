package validation

import (
	"net/netip"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// workload validates what Deployments, ReplicaSets and DaemonSets share: a non-empty selector
// that selects the template's labels, and a valid template.
func workload(selector *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, replicas *int32) field.ErrorList {
	var errs field.ErrorList
	if replicas != nil && *replicas < 0 {
		errs = append(errs, field.Invalid(specPath.Child("replicas"), *replicas, "must be greater than or equal to 0"))
	}
	if selector == nil {
		errs = append(errs, field.Required(specPath.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(selector, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))...)
		if len(selector.MatchLabels)+len(selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(specPath.Child("selector"), selector, "empty selector is invalid for deployment"))
		}
		if sel, err := metav1.LabelSelectorAsSelector(selector); err == nil && !sel.Matches(labels.Set(tmpl.Labels)) {
			errs = append(errs, field.Invalid(specPath.Child("template", "metadata", "labels"), tmpl.Labels,
				"`selector` does not match template `labels`"))
		}
	}
	return append(errs, PodTemplate(tmpl, specPath.Child("template"))...)
}

// Deployment validates a Deployment.
func Deployment(d *appsv1.Deployment) field.ErrorList {
	errs := ObjectMeta(&d.ObjectMeta, true, DNSSubdomain)
	errs = append(errs, workload(d.Spec.Selector, &d.Spec.Template, d.Spec.Replicas)...)
	sp := specPath.Child("strategy")
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if d.Spec.Strategy.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(sp.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
			errs = append(errs, intOrPercent(ru.MaxSurge, sp.Child("rollingUpdate", "maxSurge"))...)
			errs = append(errs, intOrPercent(ru.MaxUnavailable, sp.Child("rollingUpdate", "maxUnavailable"))...)
			if isZero(ru.MaxSurge) && isZero(ru.MaxUnavailable) {
				errs = append(errs, field.Invalid(sp.Child("rollingUpdate", "maxUnavailable"), ru.MaxUnavailable,
					"may not be 0 when `maxSurge` is 0"))
			}
		}
	default:
		errs = append(errs, field.NotSupported(sp.Child("type"), d.Spec.Strategy.Type,
			[]string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)}))
	}
	return errs
}

// SelectorUpdate keeps apps/v1 selectors immutable.
func SelectorUpdate(sel, old *metav1.LabelSelector) field.ErrorList {
	if !apiequality.Semantic.DeepEqual(sel, old) {
		return field.ErrorList{field.Invalid(specPath.Child("selector"), sel, "field is immutable")}
	}
	return nil
}

// ReplicaSet validates a ReplicaSet.
func ReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	errs := ObjectMeta(&rs.ObjectMeta, true, DNSSubdomain)
	return append(errs, workload(rs.Spec.Selector, &rs.Spec.Template, rs.Spec.Replicas)...)
}

// DaemonSet validates a DaemonSet.
func DaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	errs := ObjectMeta(&ds.ObjectMeta, true, DNSSubdomain)
	errs = append(errs, workload(ds.Spec.Selector, &ds.Spec.Template, nil)...)
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		errs = append(errs, intOrPercent(ru.MaxUnavailable, specPath.Child("updateStrategy", "rollingUpdate", "maxUnavailable"))...)
	}
	return errs
}

func intOrPercent(v *intstr.IntOrString, fld *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int && v.IntVal < 0 {
		return field.ErrorList{field.Invalid(fld, v.IntVal, "must be greater than or equal to 0")}
	}
	if v.Type == intstr.String {
		if len(validation.IsValidPercent(v.StrVal)) > 0 {
			return field.ErrorList{field.Invalid(fld, v.StrVal, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")}
		}
	}
	return nil
}

func isZero(v *intstr.IntOrString) bool {
	if v == nil {
		return false
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, 100, true)
	return err == nil && n == 0
}

var addressTypes = sets.New(discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN)

// EndpointSlice validates an EndpointSlice.
func EndpointSlice(es *discoveryv1.EndpointSlice) field.ErrorList {
	errs := ObjectMeta(&es.ObjectMeta, true, DNSSubdomain)
	if !addressTypes.Has(es.AddressType) {
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), es.AddressType, sets.List(addressTypes)))
	}
	if len(es.Endpoints) > 1000 {
		errs = append(errs, field.TooMany(field.NewPath("endpoints"), len(es.Endpoints), 1000))
	}
	for i, ep := range es.Endpoints {
		if len(ep.Addresses) == 0 || len(ep.Addresses) > 100 {
			errs = append(errs, field.Invalid(field.NewPath("endpoints").Index(i).Child("addresses"), ep.Addresses, "must contain at least 1 and at most 100 addresses"))
		}
	}
	for i, p := range es.Ports {
		if p.Port != nil {
			errs = append(errs, port(*p.Port, field.NewPath("ports").Index(i).Child("port"))...)
		}
		if p.Protocol != nil && !protocols.Has(*p.Protocol) {
			errs = append(errs, field.NotSupported(field.NewPath("ports").Index(i).Child("protocol"), *p.Protocol, sets.List(protocols)))
		}
	}
	return errs
}

// Lease validates a Lease.
func Lease(l *coordinationv1.Lease) field.ErrorList {
	errs := ObjectMeta(&l.ObjectMeta, true, DNSSubdomain)
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	return errs
}

// ipBlock validates an ipBlock: a CIDR, and excepts strictly inside it.
func ipBlock(b *networkingv1.IPBlock, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return field.ErrorList{field.Invalid(fld.Child("cidr"), b.CIDR, "must be a valid CIDR, such as 10.0.0.0/16")}
	}
	for i, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(fld.Child("except").Index(i), e, "must be a valid CIDR, such as 10.0.0.0/24"))
		case ex.Addr().Is4() != cidr.Addr().Is4() || ex.Bits() <= cidr.Bits() || !cidr.Contains(ex.Addr()):
			errs = append(errs, field.Invalid(fld.Child("except").Index(i), e, "must be a strict subset of `cidr`"))
		}
	}
	return errs
}

// NetworkPolicy validates a NetworkPolicy's selectors, ports and policy types.
func NetworkPolicy(np *networkingv1.NetworkPolicy) field.ErrorList {
	errs := ObjectMeta(&np.ObjectMeta, true, DNSSubdomain)
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs = append(errs, metav1validation.ValidateLabelSelector(&np.Spec.PodSelector, opts, specPath.Child("podSelector"))...)
	peers := func(ps []networkingv1.NetworkPolicyPeer, fld *field.Path) {
		for i, p := range ps {
			pp := fld.Index(i)
			if p.PodSelector != nil {
				errs = append(errs, metav1validation.ValidateLabelSelector(p.PodSelector, opts, pp.Child("podSelector"))...)
			}
			if p.NamespaceSelector != nil {
				errs = append(errs, metav1validation.ValidateLabelSelector(p.NamespaceSelector, opts, pp.Child("namespaceSelector"))...)
			}
			if p.IPBlock != nil && (p.PodSelector != nil || p.NamespaceSelector != nil) {
				errs = append(errs, field.Forbidden(pp, "may not specify more than 1 peer type"))
			}
			if p.IPBlock == nil && p.PodSelector == nil && p.NamespaceSelector == nil {
				errs = append(errs, field.Required(pp, "must specify a peer"))
			}
			if p.IPBlock != nil {
				errs = append(errs, ipBlock(p.IPBlock, pp.Child("ipBlock"))...)
			}
		}
	}
	ports := func(ps []networkingv1.NetworkPolicyPort, fld *field.Path) {
		for i, p := range ps {
			if p.Protocol != nil && !protocols.Has(*p.Protocol) {
				errs = append(errs, field.NotSupported(fld.Index(i).Child("protocol"), *p.Protocol, sets.List(protocols)))
			}
			pf := fld.Index(i)
			if p.Port != nil && p.Port.Type == intstr.Int {
				errs = append(errs, port(p.Port.IntVal, pf.Child("port"))...)
			}
			if p.Port != nil && p.Port.Type == intstr.String {
				for _, msg := range validation.IsValidPortName(p.Port.StrVal) {
					errs = append(errs, field.Invalid(pf.Child("port"), p.Port.StrVal, msg))
				}
			}
			if p.EndPort != nil {
				switch {
				case p.Port == nil:
					errs = append(errs, field.Required(pf.Child("port"), "must be specified when endPort is specified"))
				case p.Port.Type == intstr.String:
					errs = append(errs, field.Invalid(pf.Child("endPort"), *p.EndPort, "may not be specified when `port` is non-numeric"))
				case *p.EndPort < p.Port.IntVal:
					errs = append(errs, field.Invalid(pf.Child("endPort"), *p.EndPort, "must be greater than or equal to `port`"))
				default:
					errs = append(errs, port(*p.EndPort, pf.Child("endPort"))...)
				}
			}
		}
	}
	for i, r := range np.Spec.Ingress {
		peers(r.From, specPath.Child("ingress").Index(i).Child("from"))
		ports(r.Ports, specPath.Child("ingress").Index(i).Child("ports"))
	}
	for i, r := range np.Spec.Egress {
		peers(r.To, specPath.Child("egress").Index(i).Child("to"))
		ports(r.Ports, specPath.Child("egress").Index(i).Child("ports"))
	}
	valid := sets.New(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)
	for i, t := range np.Spec.PolicyTypes {
		if !valid.Has(t) {
			errs = append(errs, field.NotSupported(specPath.Child("policyTypes").Index(i), t, sets.List(valid)))
		}
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

// StatefulSet validates a StatefulSet with upstream's rules and messages: a template with
// restartPolicy Always, a known pod management policy and update strategy, claim templates
// and a retention policy of Retain or Delete.
func StatefulSet(ss *appsv1.StatefulSet) field.ErrorList {
	errs := ObjectMeta(&ss.ObjectMeta, true, DNSSubdomain)
	// The claim templates are volumes of every pod, as the controller makes them: the
	// template is validated with them, so containers may mount them (as upstream).
	tmpl := ss.Spec.Template.DeepCopy()
	for _, t := range ss.Spec.VolumeClaimTemplates {
		have := false
		for _, v := range tmpl.Spec.Volumes {
			have = have || v.Name == t.Name
		}
		if !have {
			tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: t.Name}}})
		}
	}
	errs = append(errs, workload(ss.Spec.Selector, tmpl, ss.Spec.Replicas)...)
	s := &ss.Spec
	switch s.PodManagementPolicy {
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	case "":
		errs = append(errs, field.Required(specPath.Child("podManagementPolicy"), ""))
	default:
		errs = append(errs, field.Invalid(specPath.Child("podManagementPolicy"), s.PodManagementPolicy,
			"must be 'OrderedReady' or 'Parallel'"))
	}
	us := specPath.Child("updateStrategy")
	switch s.UpdateStrategy.Type {
	case "":
		errs = append(errs, field.Required(us, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.UpdateStrategy.RollingUpdate != nil {
			errs = append(errs, field.Invalid(us.Child("rollingUpdate"), s.UpdateStrategy.RollingUpdate,
				"only allowed for updateStrategy 'RollingUpdate'"))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := s.UpdateStrategy.RollingUpdate; ru != nil {
			if ru.Partition != nil && *ru.Partition < 0 {
				errs = append(errs, field.Invalid(us.Child("rollingUpdate", "partition"), *ru.Partition, "must be greater than or equal to 0"))
			}
			if ru.MaxUnavailable != nil {
				mu := us.Child("rollingUpdate", "maxUnavailable")
				errs = append(errs, intOrPercent(ru.MaxUnavailable, mu)...)
				if isZero(ru.MaxUnavailable) {
					errs = append(errs, field.Invalid(mu, ru.MaxUnavailable.String(), "must be greater than 0"))
				}
			}
		}
	default:
		errs = append(errs, field.Invalid(us, s.UpdateStrategy, "must be 'RollingUpdate' or 'OnDelete'"))
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p != nil {
		rp := specPath.Child("persistentVolumeClaimRetentionPolicy")
		for name, v := range map[string]appsv1.PersistentVolumeClaimRetentionPolicyType{"whenDeleted": p.WhenDeleted, "whenScaled": p.WhenScaled} {
			if v != appsv1.RetainPersistentVolumeClaimRetentionPolicyType && v != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
				errs = append(errs, field.NotSupported(rp.Child(name), v, []string{string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)}))
			}
		}
	}
	if s.Ordinals != nil && s.Ordinals.Start < 0 {
		errs = append(errs, field.Invalid(specPath.Child("ordinals", "start"), s.Ordinals.Start, "must be greater than or equal to 0"))
	}
	if s.MinReadySeconds < 0 {
		errs = append(errs, field.Invalid(specPath.Child("minReadySeconds"), s.MinReadySeconds, "must be greater than or equal to 0"))
	}
	if s.ServiceName != "" {
		for _, msg := range validation.IsDNS1123Label(s.ServiceName) {
			errs = append(errs, field.Invalid(specPath.Child("serviceName"), s.ServiceName, msg))
		}
	}
	tp := specPath.Child("template", "spec")
	if rp := s.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tp.Child("restartPolicy"), rp, []string{string(corev1.RestartPolicyAlways)}))
	}
	if s.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tp.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in StatefulSet is not Supported"))
	}
	seen := sets.New[string]()
	for i := range s.VolumeClaimTemplates {
		t := &s.VolumeClaimTemplates[i]
		fld := specPath.Child("volumeClaimTemplates").Index(i)
		if seen.Has(t.Name) {
			errs = append(errs, field.Duplicate(fld.Child("metadata", "name"), t.Name))
		}
		seen.Insert(t.Name)
		for _, msg := range validation.IsDNS1123Subdomain(t.Name) {
			errs = append(errs, field.Invalid(fld.Child("metadata", "name"), t.Name, msg))
		}
		errs = append(errs, pvcSpec(&t.Spec, fld.Child("spec"))...)
	}
	return errs
}

// StatefulSetUpdate allows upstream's mutable spec fields only.
func StatefulSetUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	a, b := ss.Spec.DeepCopy(), old.Spec.DeepCopy()
	for _, s := range []*appsv1.StatefulSetSpec{a, b} {
		s.Replicas, s.Ordinals, s.Template, s.UpdateStrategy = nil, nil, corev1.PodTemplateSpec{}, appsv1.StatefulSetUpdateStrategy{}
		s.RevisionHistoryLimit, s.PersistentVolumeClaimRetentionPolicy, s.MinReadySeconds = nil, nil, 0
	}
	if !apiequality.Semantic.DeepEqual(a, b) {
		return field.ErrorList{field.Forbidden(specPath, "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")}
	}
	return nil
}
