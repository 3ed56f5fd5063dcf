package validation

import (
	"fmt"
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultServiceCIDR is the name of the ServiceCIDR the API server keeps for its
// --service-cidr, as upstream names it.
const DefaultServiceCIDR = "kubernetes"

// ServiceCIDR validates a ServiceCIDR: one or two prefixes in canonical form (no host bits),
// at most one per IP family. skiff allocates ClusterIPs from --service-cidr alone, so only
// the default ServiceCIDR, which mirrors it, may exist; another is refused with that reason
// rather than accepted and ignored.
func ServiceCIDR(sc *networkingv1.ServiceCIDR) field.ErrorList {
	errs := ObjectMeta(&sc.ObjectMeta, false, DNSSubdomain)
	if sc.Name != DefaultServiceCIDR {
		errs = append(errs, field.Forbidden(metaPath.Child("name"), fmt.Sprintf(
			"skiff allocates ClusterIPs from its --service-cidr only, which the %q ServiceCIDR shows; more ServiceCIDRs are not supported", DefaultServiceCIDR)))
	}
	fld := specPath.Child("cidrs")
	if n := len(sc.Spec.CIDRs); n == 0 || n > 2 {
		return append(errs, field.Invalid(fld, sc.Spec.CIDRs, "must hold one or two CIDRs (one per IP family)"))
	}
	families := map[bool]bool{}
	for i, c := range sc.Spec.CIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			errs = append(errs, field.Invalid(fld.Index(i), c, "must be a CIDR such as 10.96.0.0/12"))
			continue
		}
		if p.Masked() != p {
			errs = append(errs, field.Invalid(fld.Index(i), c, fmt.Sprintf("must have no host bits set (%s)", p.Masked())))
		}
		if families[p.Addr().Is4()] {
			errs = append(errs, field.Invalid(fld.Index(i), c, "may hold one CIDR per IP family"))
		}
		families[p.Addr().Is4()] = true
	}
	return errs
}

// ServiceCIDRUpdate validates an update: the prefixes never change.
func ServiceCIDRUpdate(sc, old *networkingv1.ServiceCIDR) field.ErrorList {
	errs := ObjectMetaUpdate(&sc.ObjectMeta, &old.ObjectMeta)
	if fmt.Sprint(sc.Spec.CIDRs) != fmt.Sprint(old.Spec.CIDRs) {
		errs = append(errs, field.Invalid(specPath.Child("cidrs"), sc.Spec.CIDRs, "field is immutable"))
	}
	return errs
}

// IPAddressName accepts an IPAddress's name: an IP address in canonical form ("10.96.0.1",
// "2001:db8::1"), as upstream.
func IPAddressName(name string, _ bool) []string {
	var msgs []string
	for _, e := range utilvalidation.IsValidIP(&field.Path{}, name) {
		msgs = append(msgs, e.Detail)
	}
	return msgs
}

// IPAddress validates an IPAddress as upstream: its name is an IP address, and spec.parentRef
// names the object that holds it (resource and name required; the group may be empty, the
// core group's Services are).
func IPAddress(ip *networkingv1.IPAddress) field.ErrorList {
	errs := ObjectMeta(&ip.ObjectMeta, false, IPAddressName)
	fld := specPath.Child("parentRef")
	ref := ip.Spec.ParentRef
	if ref == nil {
		return append(errs, field.Required(fld, ""))
	}
	if ref.Group != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(ref.Group) {
			errs = append(errs, field.Invalid(fld.Child("group"), ref.Group, msg))
		}
	}
	for _, f := range []struct {
		name, value string
		required    bool
	}{{"resource", ref.Resource, true}, {"name", ref.Name, true}, {"namespace", ref.Namespace, false}} {
		if f.value == "" {
			if f.required {
				errs = append(errs, field.Required(fld.Child(f.name), ""))
			}
			continue
		}
		for _, msg := range path.IsValidPathSegmentName(f.value) {
			errs = append(errs, field.Invalid(fld.Child(f.name), f.value, msg))
		}
	}
	return errs
}

// IPAddressUpdate validates an update: spec.parentRef never changes.
func IPAddressUpdate(ip, old *networkingv1.IPAddress) field.ErrorList {
	errs := ObjectMetaUpdate(&ip.ObjectMeta, &old.ObjectMeta)
	n, o := ip.Spec.ParentRef, old.Spec.ParentRef
	if (n == nil) != (o == nil) || (n != nil && *n != *o) {
		errs = append(errs, field.Invalid(specPath.Child("parentRef"), ip.Spec.ParentRef, "field is immutable"))
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
