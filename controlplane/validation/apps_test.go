package validation

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func validTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}},
		Spec: corev1.PodSpec{
			Containers:    []corev1.Container{{Name: "nginx", Image: "nginx"}},
			RestartPolicy: corev1.RestartPolicyAlways,
		},
	}
}

func validDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: validTemplate(),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType},
		},
	}
}

func ios(v intstr.IntOrString) *intstr.IntOrString { return &v }

func TestDeployment(t *testing.T) {
	rolling := func(surge, unavailable *intstr.IntOrString) func(d *appsv1.Deployment) {
		return func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: surge, MaxUnavailable: unavailable}
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(d *appsv1.Deployment)
		want   []fe
	}{
		{name: "valid", mutate: func(*appsv1.Deployment) {}},
		{name: "dotted name", mutate: func(d *appsv1.Deployment) { d.Name = "web.v2" }},
		{name: "bad name", mutate: func(d *appsv1.Deployment) { d.Name = "Web" }, want: []fe{invalid("metadata.name")}},
		{name: "zero replicas", mutate: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](0) }},
		{name: "negative replicas", mutate: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](-1) },
			want: []fe{invalid("spec.replicas")}},
		{name: "no selector", mutate: func(d *appsv1.Deployment) { d.Spec.Selector = nil },
			want: []fe{required("spec.selector")}},
		{name: "empty selector", mutate: func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} },
			want: []fe{invalid("spec.selector")}},
		{name: "selector not matching template", mutate: func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchLabels = map[string]string{"app": "api"}
		}, want: []fe{invalid("spec.template.metadata.labels")}},
		{name: "selector with more labels than template", mutate: func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchLabels["zone"] = "a"
		}, want: []fe{invalid("spec.template.metadata.labels")}},
		{name: "template without labels", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Labels = nil },
			want: []fe{invalid("spec.template.metadata.labels")}},
		{name: "matchExpressions selector", mutate: func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front", "back"}},
			}}
		}},
		{name: "matchExpressions not matching", mutate: func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"front"}},
			}}
		}, want: []fe{invalid("spec.template.metadata.labels")}},
		{name: "malformed selector", mutate: func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn},
			}}
		}, want: []fe{required("spec.selector.matchExpressions[0].values")}},
		{name: "restartPolicy Never", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			want: []fe{notSupported("spec.template.spec.restartPolicy")}},
		{name: "restartPolicy OnFailure", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			want: []fe{notSupported("spec.template.spec.restartPolicy")}},
		{name: "template without image", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" },
			want: []fe{required("spec.template.spec.containers[0].image")}},
		{name: "template without containers", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers = nil },
			want: []fe{required("spec.template.spec.containers")}},
		{name: "recreate", mutate: func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType }},
		{name: "recreate with rollingUpdate", mutate: func(d *appsv1.Deployment) {
			d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}, want: []fe{forbidden("spec.strategy.rollingUpdate")}},
		{name: "empty strategy type", mutate: func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "" },
			want: []fe{notSupported("spec.strategy.type")}},
		{name: "unknown strategy type", mutate: func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" },
			want: []fe{notSupported("spec.strategy.type")}},
		{name: "rolling defaults", mutate: rolling(ios(intstr.FromString("25%")), ios(intstr.FromString("25%")))},
		{name: "surge 0, unavailable 1", mutate: rolling(ios(intstr.FromInt32(0)), ios(intstr.FromInt32(1)))},
		{name: "surge 1, unavailable 0", mutate: rolling(ios(intstr.FromInt32(1)), ios(intstr.FromInt32(0)))},
		{name: "surge only", mutate: rolling(ios(intstr.FromInt32(0)), nil)},
		{name: "surge 0, unavailable 0", mutate: rolling(ios(intstr.FromInt32(0)), ios(intstr.FromInt32(0))),
			want: []fe{invalid("spec.strategy.rollingUpdate.maxUnavailable")}},
		{name: "surge 0%, unavailable 0", mutate: rolling(ios(intstr.FromString("0%")), ios(intstr.FromInt32(0))),
			want: []fe{invalid("spec.strategy.rollingUpdate.maxUnavailable")}},
		{name: "surge 0%, unavailable 0%", mutate: rolling(ios(intstr.FromString("0%")), ios(intstr.FromString("0%"))),
			want: []fe{invalid("spec.strategy.rollingUpdate.maxUnavailable")}},
		{name: "negative surge", mutate: rolling(ios(intstr.FromInt32(-1)), ios(intstr.FromInt32(1))),
			want: []fe{invalid("spec.strategy.rollingUpdate.maxSurge")}},
		{name: "negative unavailable", mutate: rolling(ios(intstr.FromInt32(1)), ios(intstr.FromInt32(-1))),
			want: []fe{invalid("spec.strategy.rollingUpdate.maxUnavailable")}},
		{name: "surge not a percent", mutate: rolling(ios(intstr.FromString("lots")), ios(intstr.FromInt32(1))),
			want: []fe{invalid("spec.strategy.rollingUpdate.maxSurge")}},
		{name: "number as string", mutate: rolling(ios(intstr.FromString("2")), ios(intstr.FromInt32(1))),
			want: []fe{invalid("spec.strategy.rollingUpdate.maxSurge")}},
		{name: "negative percent", mutate: rolling(ios(intstr.FromString("-10%")), ios(intstr.FromInt32(1))),
			want: []fe{invalid("spec.strategy.rollingUpdate.maxSurge")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := validDeployment()
			tc.mutate(d)
			expectErrors(t, Deployment(d), tc.want...)
		})
	}
}

func TestReplicaSet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(rs *appsv1.ReplicaSet)
		want   []fe
	}{
		{name: "valid", mutate: func(*appsv1.ReplicaSet) {}},
		{name: "nil replicas", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = nil }},
		{name: "negative replicas", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr.To[int32](-3) },
			want: []fe{invalid("spec.replicas")}},
		{name: "no selector", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = nil },
			want: []fe{required("spec.selector")}},
		{name: "mismatch", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Labels = map[string]string{"app": "other"} },
			want: []fe{invalid("spec.template.metadata.labels")}},
		{name: "restartPolicy Never", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			want: []fe{notSupported("spec.template.spec.restartPolicy")}},
		{name: "missing namespace", mutate: func(rs *appsv1.ReplicaSet) { rs.Namespace = "" },
			want: []fe{required("metadata.namespace")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: "web-5d4f", Namespace: "default"},
				Spec: appsv1.ReplicaSetSpec{
					Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					Template: validTemplate(),
				},
			}
			tc.mutate(rs)
			expectErrors(t, ReplicaSet(rs), tc.want...)
		})
	}
}

func TestDaemonSet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(ds *appsv1.DaemonSet)
		want   []fe
	}{
		{name: "valid", mutate: func(*appsv1.DaemonSet) {}},
		{name: "no selector", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Selector = nil },
			want: []fe{required("spec.selector")}},
		{name: "empty selector", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} },
			want: []fe{invalid("spec.selector")}},
		{name: "mismatch", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Selector.MatchLabels = map[string]string{"app": "x"} },
			want: []fe{invalid("spec.template.metadata.labels")}},
		{name: "restartPolicy OnFailure", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			want: []fe{notSupported("spec.template.spec.restartPolicy")}},
		{name: "maxUnavailable percent", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ios(intstr.FromString("10%"))
		}},
		{name: "negative maxUnavailable", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ios(intstr.FromInt32(-1))
		}, want: []fe{invalid("spec.updateStrategy.rollingUpdate.maxUnavailable")}},
		{name: "bad maxUnavailable string", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ios(intstr.FromString("one"))
		}, want: []fe{invalid("spec.updateStrategy.rollingUpdate.maxUnavailable")}},
		{name: "OnDelete", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"},
				Spec: appsv1.DaemonSetSpec{
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					Template: validTemplate(),
					UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
						Type:          appsv1.RollingUpdateDaemonSetStrategyType,
						RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ios(intstr.FromInt32(1))},
					},
				},
			}
			tc.mutate(ds)
			expectErrors(t, DaemonSet(ds), tc.want...)
		})
	}
}

func TestSelectorUpdate(t *testing.T) {
	sel := func(kv ...string) *metav1.LabelSelector {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return &metav1.LabelSelector{MatchLabels: m}
	}
	for _, tc := range []struct {
		name     string
		new, old *metav1.LabelSelector
		want     []fe
	}{
		{name: "same", new: sel("app", "web"), old: sel("app", "web")},
		{name: "nil and empty expressions are equal", new: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"},
			MatchExpressions: []metav1.LabelSelectorRequirement{}}, old: sel("a", "b")},
		{name: "value changed", new: sel("app", "api"), old: sel("app", "web"), want: []fe{invalid("spec.selector")}},
		{name: "label added", new: sel("app", "web", "x", "y"), old: sel("app", "web"), want: []fe{invalid("spec.selector")}},
		{name: "removed", new: nil, old: sel("app", "web"), want: []fe{invalid("spec.selector")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectErrors(t, SelectorUpdate(tc.new, tc.old), tc.want...)
		})
	}
}

func TestEndpointSlice(t *testing.T) {
	many := func(n int) []discoveryv1.Endpoint {
		eps := make([]discoveryv1.Endpoint, n)
		for i := range eps {
			eps[i] = discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}}
		}
		return eps
	}
	for _, tc := range []struct {
		name   string
		mutate func(es *discoveryv1.EndpointSlice)
		want   []fe
	}{
		{name: "valid", mutate: func(*discoveryv1.EndpointSlice) {}},
		{name: "IPv6 and FQDN", mutate: func(es *discoveryv1.EndpointSlice) { es.AddressType = discoveryv1.AddressTypeIPv6 }},
		{name: "bad address type", mutate: func(es *discoveryv1.EndpointSlice) { es.AddressType = "IPv5" },
			want: []fe{notSupported("addressType")}},
		{name: "endpoint without address", mutate: func(es *discoveryv1.EndpointSlice) {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{})
		}, want: []fe{invalid("endpoints[1].addresses")}},
		{name: "endpoint with too many addresses", mutate: func(es *discoveryv1.EndpointSlice) {
			es.Endpoints[0].Addresses = make([]string, 101)
		}, want: []fe{invalid("endpoints[0].addresses")}},
		{name: "1000 endpoints", mutate: func(es *discoveryv1.EndpointSlice) { es.Endpoints = many(1000) }},
		{name: "1001 endpoints", mutate: func(es *discoveryv1.EndpointSlice) { es.Endpoints = many(1001) },
			want: []fe{tooMany("endpoints")}},
		{name: "nil port means all ports", mutate: func(es *discoveryv1.EndpointSlice) { es.Ports[0].Port = nil }},
		{name: "port 0", mutate: func(es *discoveryv1.EndpointSlice) { es.Ports[0].Port = ptr.To[int32](0) },
			want: []fe{invalid("ports[0].port")}},
		{name: "bad protocol", mutate: func(es *discoveryv1.EndpointSlice) { es.Ports[0].Protocol = ptr.To[corev1.Protocol]("GRE") },
			want: []fe{notSupported("ports[0].protocol")}},
		{name: "missing namespace", mutate: func(es *discoveryv1.EndpointSlice) { es.Namespace = "" },
			want: []fe{required("metadata.namespace")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: "web-abcde", Namespace: "default"},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}}},
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
			}
			tc.mutate(es)
			expectErrors(t, EndpointSlice(es), tc.want...)
		})
	}
}

func TestLease(t *testing.T) {
	for _, tc := range []struct {
		name     string
		duration *int32
		want     []fe
	}{
		{name: "unset"},
		{name: "positive", duration: ptr.To[int32](15)},
		{name: "zero", duration: ptr.To[int32](0), want: []fe{invalid("spec.leaseDurationSeconds")}},
		{name: "negative", duration: ptr.To[int32](-5), want: []fe{invalid("spec.leaseDurationSeconds")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1"), LeaseDurationSeconds: tc.duration},
			}
			expectErrors(t, Lease(l), tc.want...)
		})
	}
}

func TestNetworkPolicy(t *testing.T) {
	badExpr := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpIn}}}
	tcp := ptr.To(corev1.ProtocolTCP)
	for _, tc := range []struct {
		name   string
		mutate func(np *networkingv1.NetworkPolicy)
		want   []fe
	}{
		{name: "valid", mutate: func(*networkingv1.NetworkPolicy) {}},
		{name: "bad pod selector", mutate: func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector = *badExpr },
			want: []fe{required("spec.podSelector.matchExpressions[0].values")}},
		{name: "bad pod selector label", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "a b"}}
		}, want: []fe{invalid("spec.podSelector.matchLabels")}},
		{name: "bad ingress peer pod selector", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0].PodSelector = badExpr
		}, want: []fe{required("spec.ingress[0].from[0].podSelector.matchExpressions[0].values")}},
		{name: "bad egress namespace selector", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}, {NamespaceSelector: badExpr}}}}
		}, want: []fe{required("spec.egress[0].to[1].namespaceSelector.matchExpressions[0].values")}},
		{name: "ipBlock with pod selector", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0].IPBlock = &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}
		}, want: []fe{forbidden("spec.ingress[0].from[0]")}},
		{name: "ipBlock alone", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0] = networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}
		}},
		{name: "bad ingress protocol", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].Ports[0].Protocol = ptr.To[corev1.Protocol]("ANY")
		}, want: []fe{notSupported("spec.ingress[0].ports[0].protocol")}},
		{name: "named port", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].Ports[0].Port = ptr.To(intstr.FromString("http"))
		}},
		{name: "bad egress port", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{
				{Protocol: tcp, Port: ptr.To(intstr.FromInt32(53))}, {Protocol: tcp, Port: ptr.To(intstr.FromInt32(0))}}}}
		}, want: []fe{invalid("spec.egress[0].ports[1].port")}},
		{name: "both policy types", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
		}},
		{name: "bad policy type", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, "Both"}
		}, want: []fe{notSupported("spec.policyTypes[1]")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := &networkingv1.NetworkPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: "allow-web", Namespace: "default"},
				Spec: networkingv1.NetworkPolicySpec{
					PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					Ingress: []networkingv1.NetworkPolicyIngressRule{{
						From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
						Ports: []networkingv1.NetworkPolicyPort{{Protocol: tcp, Port: ptr.To(intstr.FromInt32(80))}},
					}},
				},
			}
			tc.mutate(np)
			expectErrors(t, NetworkPolicy(np), tc.want...)
		})
	}
}
