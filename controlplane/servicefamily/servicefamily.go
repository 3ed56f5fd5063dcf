// Package servicefamily decides which IP families a Service gets and which cluster IPs are
// still to be allocated, as upstream's API server does before it allocates: from the
// Service's ipFamilyPolicy, ipFamilies and clusterIPs, the stored Service on an update, and
// the families the cluster serves (its --service-cidr ranges, primary first). It does no I/O
// and allocates nothing; the Service registry asks it, then reserves the addresses.
//
// The rules are upstream's, with its messages:
//   - no ipFamilyPolicy means SingleStack on create (RequireDualStack for a headless Service
//     without a selector), and the stored policy on an update;
//   - ipFamilies follow clusterIPs where those are given, and otherwise start with the
//     cluster's primary family; PreferDualStack and RequireDualStack add the other family
//     when the cluster serves two, and RequireDualStack fails when it serves one;
//   - a PreferDualStack Service is never upgraded or downgraded because the cluster changed:
//     only an explicit change of policy adds or releases a secondary family;
//   - releasing the secondary cluster IP or family takes ipFamilyPolicy SingleStack, and the
//     primary ones never change.
package servicefamily

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Cluster is the families the cluster allocates ClusterIPs in, its primary family first:
// one entry for a single-stack cluster, two for dual-stack.
type Cluster []corev1.IPFamily

// ClusterOf is the cluster serving the families of cidrs, in their order (the flag's).
func ClusterOf(cidrs []netip.Prefix) Cluster {
	var c Cluster
	for _, p := range cidrs {
		if f := familyOfAddr(p.Addr()); !slices.Contains(c, f) {
			c = append(c, f)
		}
	}
	return c
}

// Primary is the family a Service gets when it asks for none.
func (c Cluster) Primary() corev1.IPFamily {
	if len(c) == 0 {
		return corev1.IPv4Protocol
	}
	return c[0]
}

// DualStack is whether the cluster allocates in both families.
func (c Cluster) DualStack() bool { return len(c) == 2 }

// Serves is whether the cluster allocates in family f.
func (c Cluster) Serves(f corev1.IPFamily) bool { return slices.Contains(c, f) }

var (
	specPath       = field.NewPath("spec")
	clusterIPsPath = specPath.Child("clusterIPs")
	familiesPath   = specPath.Child("ipFamilies")
	policyPath     = specPath.Child("ipFamilyPolicy")

	supportedFamilies = []string{string(corev1.IPv4Protocol), string(corev1.IPv6Protocol)}
	supportedPolicies = []string{string(corev1.IPFamilyPolicyPreferDualStack), string(corev1.IPFamilyPolicyRequireDualStack),
		string(corev1.IPFamilyPolicySingleStack)}
)

// Validate checks clusterIP, clusterIPs, ipFamilies and ipFamilyPolicy of svc on their own
// and against each other (upstream's ValidateServiceClusterIPsRelatedFields). An unset
// policy or family list is fine: Decide fills them.
func Validate(svc *corev1.Service) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	spec := svc.Spec
	switch {
	case spec.ClusterIP != "" && len(spec.ClusterIPs) == 0:
		errs = append(errs, field.Required(clusterIPsPath, ""))
	case spec.ClusterIP != "" && spec.ClusterIPs[0] != spec.ClusterIP:
		errs = append(errs, field.Invalid(clusterIPsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
	case spec.ClusterIP == "" && len(spec.ClusterIPs) != 0:
		errs = append(errs, field.Invalid(clusterIPsPath, spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
	}
	seen := map[corev1.IPFamily]bool{}
	for i, f := range spec.IPFamilies {
		if f != corev1.IPv4Protocol && f != corev1.IPv6Protocol {
			errs = append(errs, field.NotSupported(familiesPath.Index(i), f, supportedFamilies))
		}
		if seen[f] {
			errs = append(errs, field.Duplicate(familiesPath.Index(i), f))
		}
		seen[f] = true
	}
	if p := spec.IPFamilyPolicy; p != nil && !slices.Contains(supportedPolicies, string(*p)) {
		errs = append(errs, field.NotSupported(policyPath, p, supportedPolicies))
	}
	badIPs := false
	var addrs []netip.Addr
	for i, ip := range spec.ClusterIPs {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(spec.ClusterIPs) > 1 {
				badIPs = true
				errs = append(errs, field.Invalid(clusterIPsPath, spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		if bad := utilvalidation.IsValidIP(clusterIPsPath.Index(i), ip); len(bad) > 0 {
			badIPs = true
			errs = append(errs, bad...)
			continue
		}
		addrs = append(addrs, netip.MustParseAddr(ip))
	}
	if len(spec.ClusterIPs) > 2 {
		errs = append(errs, field.Invalid(clusterIPsPath, spec.ClusterIPs, "may only hold up to 2 values"))
	}
	if badIPs {
		return errs // family checks of addresses that do not parse only add noise
	}
	if len(addrs) == 2 && addrs[0].Is4() == addrs[1].Is4() {
		errs = append(errs, field.Invalid(clusterIPsPath, spec.ClusterIPs, "may specify no more than one IP for each IP family"))
	}
	if !headless(svc) {
		for i, a := range addrs {
			if i >= len(spec.IPFamilies) {
				break
			}
			if want := spec.IPFamilies[i]; (want == corev1.IPv4Protocol) != a.Is4() {
				errs = append(errs, field.Invalid(clusterIPsPath.Index(i), spec.ClusterIPs[i],
					fmt.Sprintf("expected an %s value as indicated by `ipFamilies[%d]`", want, i)))
			}
		}
	}
	return errs
}

// ValidateUpdate checks what an update may change (upstream's upgrade and downgrade rules):
// the primary cluster IP and family never; the secondary ones are added freely and released
// only with ipFamilyPolicy SingleStack.
func ValidateUpdate(svc, old *corev1.Service) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	single := policyOf(svc) == corev1.IPFamilyPolicySingleStack && svc.Spec.IPFamilyPolicy != nil
	now, was := svc.Spec.ClusterIPs, old.Spec.ClusterIPs
	if !(headless(svc) && headless(old)) {
		switch {
		case len(now) == len(was):
			for i := range was {
				if now[i] != was[i] {
					errs = append(errs, field.Invalid(clusterIPsPath.Index(i), now, "may not change once set"))
				}
			}
		case len(now) < len(was):
			if len(now) == 0 {
				errs = append(errs, field.Invalid(clusterIPsPath.Index(0), now, "primary clusterIP can not be unset"))
			} else if now[0] != was[0] {
				errs = append(errs, field.Invalid(clusterIPsPath.Index(0), now, "may not change once set"))
			}
			if len(now) == 1 && !single {
				errs = append(errs, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be set to 'SingleStack' when releasing the secondary clusterIP"))
			}
		case len(was) > 0 && now[0] != was[0]:
			errs = append(errs, field.Invalid(clusterIPsPath.Index(0), now, "may not change once set"))
		}
	}
	if headless(svc) || headless(old) {
		return errs // headless Services may change families, and so may one becoming or leaving headless
	}
	fam, oldFam := svc.Spec.IPFamilies, old.Spec.IPFamilies
	switch {
	case len(fam) == len(oldFam):
		for i := range oldFam {
			if fam[i] != oldFam[i] {
				errs = append(errs, field.Invalid(familiesPath.Index(0), fam, "may not change once set"))
			}
		}
	case len(fam) < len(oldFam):
		if len(now) == 0 {
			errs = append(errs, field.Invalid(familiesPath.Index(0), fam, "primary ipFamily can not be unset"))
		}
		if len(fam) > 0 && fam[0] != oldFam[0] {
			errs = append(errs, field.Invalid(familiesPath.Index(0), now, "may not change once set"))
		}
		if len(fam) == 1 && !single {
			errs = append(errs, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be set to 'SingleStack' when releasing the secondary ipFamily"))
		}
	case len(oldFam) > 0 && len(fam) > 0 && fam[0] != oldFam[0]:
		errs = append(errs, field.Invalid(familiesPath.Index(0), now, "may not change once set"))
	}
	return errs
}

// Decide sets svc's ipFamilyPolicy and ipFamilies for cluster c (old is the stored Service on
// an update, nil on create), trimming clusterIPs and ipFamilies when a dual-stack Service is
// made SingleStack. After it, each ipFamilies[i] without a clusterIPs[i] is to be allocated
// (Missing says which). Errors carry upstream's messages; svc may be partly filled then.
func Decide(svc, old *corev1.Service, c Cluster) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if keepsPreferDualStack(svc, old) {
		return nil
	}
	if svc.Spec.IPFamilyPolicy == nil {
		switch {
		case old != nil && old.Spec.IPFamilyPolicy != nil:
			svc.Spec.IPFamilyPolicy = ptr.To(*old.Spec.IPFamilyPolicy)
		case svc.Spec.ClusterIP == corev1.ClusterIPNone && len(svc.Spec.Selector) == 0:
			svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		default:
			svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		}
	}
	if errs := Validate(svc); len(errs) > 0 {
		return errs
	}
	policy := *svc.Spec.IPFamilyPolicy
	var errs field.ErrorList
	if old != nil {
		if policy == corev1.IPFamilyPolicySingleStack {
			// With the lists unchanged, SingleStack is the intent to release the secondary
			// family; the primary ones stay (they cannot change).
			if slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) && len(svc.Spec.ClusterIPs) > 1 {
				svc.Spec.ClusterIPs = svc.Spec.ClusterIPs[:1]
			}
			if slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies) && len(svc.Spec.IPFamilies) > 1 {
				svc.Spec.IPFamilies = svc.Spec.IPFamilies[:1]
			}
		} else {
			if reduced(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) {
				errs = append(errs, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'SingleStack' to release the secondary cluster IP"))
			}
			if reduced(svc.Spec.IPFamilies, old.Spec.IPFamilies) {
				errs = append(errs, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'SingleStack' to release the secondary IP family"))
			}
		}
	}
	if policy == corev1.IPFamilyPolicySingleStack {
		if len(svc.Spec.ClusterIPs) == 2 {
			errs = append(errs, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"))
		}
		if len(svc.Spec.IPFamilies) == 2 {
			errs = append(errs, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"))
		}
	}
	// Families follow the addresses asked for.
	for i, ip := range svc.Spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			break
		}
		if i < len(svc.Spec.IPFamilies) {
			continue
		}
		f := familyOf(ip)
		if !c.Serves(f) {
			errs = append(errs, field.Invalid(clusterIPsPath.Index(i), svc.Spec.ClusterIPs, fmt.Sprintf("%s is not configured on this cluster", f)))
			continue
		}
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, f)
	}
	if len(errs) > 0 {
		return errs
	}
	// A headless Service without a selector lists its endpoints' families, which need no
	// range of the cluster's: it may have both on a single-stack cluster.
	if svc.Spec.ClusterIP == corev1.ClusterIPNone && len(svc.Spec.Selector) == 0 {
		if len(svc.Spec.IPFamilies) == 0 {
			svc.Spec.IPFamilies = []corev1.IPFamily{c.Primary()}
		}
		if len(svc.Spec.IPFamilies) == 1 && policy != corev1.IPFamilyPolicySingleStack {
			svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, other(svc.Spec.IPFamilies[0]))
		}
		return nil
	}
	if policy == corev1.IPFamilyPolicyRequireDualStack && !c.DualStack() {
		errs = append(errs, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "this cluster is not configured for dual-stack services"))
	}
	for i, f := range svc.Spec.IPFamilies {
		if !c.Serves(f) {
			errs = append(errs, field.Invalid(familiesPath.Index(i), f, "not configured on this cluster"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if len(svc.Spec.IPFamilies) == 0 {
		svc.Spec.IPFamilies = []corev1.IPFamily{c.Primary()}
	}
	if policy != corev1.IPFamilyPolicySingleStack && len(svc.Spec.IPFamilies) == 1 && c.DualStack() {
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, other(svc.Spec.IPFamilies[0]))
	}
	return nil
}

// Missing are the families of svc that have no cluster IP yet, in ipFamilies' order: what
// the registry allocates after Decide (none for headless and ExternalName Services).
func Missing(svc *corev1.Service) []corev1.IPFamily {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || headless(svc) {
		return nil
	}
	var out []corev1.IPFamily
	for i, f := range svc.Spec.IPFamilies {
		if i >= len(svc.Spec.ClusterIPs) || svc.Spec.ClusterIPs[i] == "" {
			out = append(out, f)
		}
	}
	return out
}

// keepsPreferDualStack is an update of a PreferDualStack Service that leaves its policy,
// cluster IPs and families as they were: it stays as it is whatever the cluster serves now
// (a cluster turned dual-stack does not add a family to it, nor one turned single-stack
// remove one).
func keepsPreferDualStack(svc, old *corev1.Service) bool {
	if old == nil || policyOf(old) != corev1.IPFamilyPolicyPreferDualStack || old.Spec.IPFamilyPolicy == nil {
		return false
	}
	if svc.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyPreferDualStack {
		return false
	}
	if !slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) || !slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies) {
		return false
	}
	svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	return true
}

// reduced is whether an update drops entries of a list that had them: a secondary released.
func reduced[T comparable](now, was []T) bool {
	return len(now) > 0 && len(now) < len(was)
}

func headless(svc *corev1.Service) bool {
	return len(svc.Spec.ClusterIPs) == 1 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone
}

func policyOf(svc *corev1.Service) corev1.IPFamilyPolicy {
	if svc.Spec.IPFamilyPolicy == nil {
		return corev1.IPFamilyPolicySingleStack
	}
	return *svc.Spec.IPFamilyPolicy
}

func familyOf(ip string) corev1.IPFamily {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ""
	}
	return familyOfAddr(a)
}

func familyOfAddr(a netip.Addr) corev1.IPFamily {
	if a.Unmap().Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

func other(f corev1.IPFamily) corev1.IPFamily {
	if f == corev1.IPv4Protocol {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}
