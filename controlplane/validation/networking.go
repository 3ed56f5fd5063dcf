package validation

import (
	"fmt"
	"net/netip"

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
