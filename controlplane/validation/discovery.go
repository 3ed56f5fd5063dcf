package validation

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

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
