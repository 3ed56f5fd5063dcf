package printers

import (
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ServiceCIDRs prints NAME CIDRS AGE.
var ServiceCIDRs = New(func(o runtime.Object) []any {
	sc := o.(*networkingv1.ServiceCIDR)
	return []any{strings.Join(sc.Spec.CIDRs, ","), Age(sc.CreationTimestamp)}
}, Column{Name: "CIDRs"}, AgeColumn)

// IPAddresses prints NAME PARENTREF AGE, the parent as resource.group/namespace/name
// ("services/default/kubernetes").
var IPAddresses = New(func(o runtime.Object) []any {
	ip := o.(*networkingv1.IPAddress)
	parent := "<none>"
	if r := ip.Spec.ParentRef; r != nil {
		parent = strings.ToLower(schema.GroupResource{Group: r.Group, Resource: r.Resource}.String())
		if r.Namespace != "" {
			parent += "/" + r.Namespace
		}
		parent += "/" + r.Name
	}
	return []any{parent, Age(ip.CreationTimestamp)}
}, Column{Name: "ParentRef"}, AgeColumn)

// NetworkPolicies prints NAME POD-SELECTOR AGE.
var NetworkPolicies = New(func(o runtime.Object) []any {
	np := o.(*networkingv1.NetworkPolicy)
	return []any{selector(&np.Spec.PodSelector), Age(np.CreationTimestamp)}
}, Column{Name: "Pod-Selector"}, AgeColumn)

// Ingresses prints NAME CLASS HOSTS ADDRESS PORTS AGE.
var Ingresses = New(func(o runtime.Object) []any {
	ing := o.(*networkingv1.Ingress)
	class := "<none>"
	if ing.Spec.IngressClassName != nil {
		class = *ing.Spec.IngressClassName
	}
	var hosts []string
	for _, r := range ing.Spec.Rules {
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	h := "*"
	if len(hosts) > 0 {
		h = strings.Join(hosts, ",")
	}
	var addrs []string
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		if lb.IP != "" {
			addrs = append(addrs, lb.IP)
		} else if lb.Hostname != "" {
			addrs = append(addrs, lb.Hostname)
		}
	}
	ports := "80"
	if len(ing.Spec.TLS) > 0 {
		ports = "80, 443"
	}
	return []any{class, h, strings.Join(addrs, ","), ports, Age(ing.CreationTimestamp)}
}, Column{Name: "Class"}, Column{Name: "Hosts"}, Column{Name: "Address"}, Column{Name: "Ports"}, AgeColumn)

// IngressClasses prints NAME CONTROLLER PARAMETERS AGE.
var IngressClasses = New(func(o runtime.Object) []any {
	ic := o.(*networkingv1.IngressClass)
	params := "<none>"
	if p := ic.Spec.Parameters; p != nil {
		params = p.Kind + "/" + p.Name
		if p.APIGroup != nil && *p.APIGroup != "" {
			params = p.Kind + "." + *p.APIGroup + "/" + p.Name
		}
	}
	return []any{ic.Spec.Controller, params, Age(ic.CreationTimestamp)}
}, Column{Name: "Controller"}, Column{Name: "Parameters"}, AgeColumn)
