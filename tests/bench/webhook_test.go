package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// BenchmarkAdmission measures what extensible admission adds to a write: ConfigMap creates
// in a namespace nothing extra matches, beside creates in one where a mutating and a
// validating webhook (served over TLS on loopback, as a pod's would be through its Service)
// both match, and in one where a CEL ValidatingAdmissionPolicy and a MutatingAdmissionPolicy
// match. Same server, rounds interleaved; reported as medians and as ratios to the plain
// create, plus the overhead per request in microseconds.
func BenchmarkAdmission(b *testing.B) {
	s := framework.StartServer(b)
	ctx := context.Background()
	client := protobufClient(b, s)
	url, ca := framework.WebhookServer(b)
	for _, ns := range []string{"plain", "hooked", "policed"} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"bench": ns}}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
	only := func(ns string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"bench": ns}}
	}
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	reg := client.AdmissionregistrationV1()
	if _, err := reg.MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "mutate.bench.example.com", Rules: rules, NamespaceSelector: only("hooked"),
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + "/mutate"), CABundle: ca}, SideEffects: none,
			AdmissionReviewVersions: []string{"v1"}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := reg.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "validate.bench.example.com", Rules: rules, NamespaceSelector: only("hooked"),
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + "/validate"), CABundle: ca}, SideEffects: none,
			AdmissionReviewVersions: []string{"v1"}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	match := &admissionregistrationv1.MatchResources{NamespaceSelector: only("policed"), ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: rules[0]}}}
	if _, err := reg.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: match,
			Validations: []admissionregistrationv1.Validation{{Expression: `!has(object.data) || !("forbidden" in object.data)`}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := reg.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "bench",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := reg.MutatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: match, ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{metadata: Object.metadata{labels: {"policy": "seen"}}}`}}}}},
		metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := reg.MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "bench"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}

	value := strings.Repeat("x", 200)
	seq := 0
	create := func(ns string) (*corev1.ConfigMap, error) {
		seq++
		return client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", seq)},
			Data: map[string]string{"v": value}}, metav1.CreateOptions{})
	}
	// The admission plugins pick configurations up from informers: wait until both kinds act,
	// so no round measures a create they have not seen yet.
	deadline := time.Now().Add(30 * time.Second)
	for {
		h, err1 := create("hooked")
		p, err2 := create("policed")
		if err1 == nil && err2 == nil && h.Labels["webhook"] == "seen" && p.Labels["policy"] == "seen" {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("admission never acted: %v %v %v %v", h, p, err1, err2)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ops := []struct {
		name string
		ns   string
	}{{"plain", "plain"}, {"webhooks", "hooked"}, {"cel-policies", "policed"}}
	b.ResetTimer()
	times := make([][]time.Duration, len(ops))
	for round := 0; round < 5; round++ {
		for k, op := range ops {
			d, err := timeN(max(b.N/5, 1), func(int) error { _, err := create(op.ns); return err })
			if err != nil {
				b.Fatalf("%s: %v", op.name, err)
			}
			times[k] = append(times[k], d)
		}
	}
	b.StopTimer()
	plain := median(times[0])
	b.ReportMetric(float64(plain.Microseconds()), "plain-create-µs")
	for k := 1; k < len(ops); k++ {
		m := median(times[k])
		b.ReportMetric(float64(m.Microseconds()), ops[k].name+"-create-µs")
		b.ReportMetric(float64(m)/float64(plain), ops[k].name+"/plain")
		b.ReportMetric(float64((m - plain).Microseconds()), ops[k].name+"-overhead-µs")
	}
}
