package validation

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/api/validation/path"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"

	networkingv1 "k8s.io/api/networking/v1"
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
