package printers

import (
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EndpointSlices prints NAME ADDRESSTYPE PORTS ENDPOINTS AGE.
var EndpointSlices = New(func(o runtime.Object) []any {
	es := o.(*discoveryv1.EndpointSlice)
	var ports []string
	for _, p := range es.Ports {
		if p.Port != nil {
			ports = append(ports, strconv.Itoa(int(*p.Port)))
		}
	}
	var addrs []string
	for _, e := range es.Endpoints {
		addrs = append(addrs, e.Addresses...)
	}
	return []any{string(es.AddressType), firstN(ports, 3), firstN(addrs, 3), Age(es.CreationTimestamp)}
},
	Column{Name: "AddressType", Description: "Type of address carried by this EndpointSlice."},
	Column{Name: "Ports", Description: "Port numbers exposed by this EndpointSlice."},
	Column{Name: "Endpoints", Description: "Addresses of the endpoints."},
	AgeColumn,
)
