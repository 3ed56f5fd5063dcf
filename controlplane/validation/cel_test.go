package validation

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestWebhookMatchConditions(t *testing.T) {
	hook := func(conds ...admissionregistrationv1.MatchCondition) *admissionregistrationv1.ValidatingWebhookConfiguration {
		return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "w.example.com", SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
				ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/v")}, AdmissionReviewVersions: []string{"v1"},
				MatchConditions: conds}}}
	}
	if errs := ValidatingWebhookConfiguration(hook(
		admissionregistrationv1.MatchCondition{Name: "not-system", Expression: `!request.userInfo.username.startsWith("system:")`},
		admissionregistrationv1.MatchCondition{Name: "authz", Expression: `authorizer.group("").resource("pods").namespace("x").check("get").allowed()`},
	)); len(errs) != 0 {
		t.Errorf("valid conditions refused: %v", errs)
	}
	for _, c := range []struct {
		name  string
		conds []admissionregistrationv1.MatchCondition
		want  string
	}{
		{"syntax", []admissionregistrationv1.MatchCondition{{Name: "bad", Expression: "... [] bad expression"}},
			"webhooks[0].matchConditions[0].expression: Invalid value: \"... [] bad expression\": compilation failed"},
		{"not a bool", []admissionregistrationv1.MatchCondition{{Name: "str", Expression: `"yes"`}}, "must evaluate to bool"},
		{"params without a paramKind", []admissionregistrationv1.MatchCondition{{Name: "p", Expression: `params.x == 1`}}, "undeclared reference to 'params'"},
		{"duplicate", []admissionregistrationv1.MatchCondition{{Name: "a", Expression: "true"}, {Name: "a", Expression: "true"}},
			"webhooks[0].matchConditions[1].name: Duplicate value"},
		{"no expression", []admissionregistrationv1.MatchCondition{{Name: "a"}}, "matchConditions[0].expression: Required value"},
		{"bad name", []admissionregistrationv1.MatchCondition{{Name: "-a", Expression: "true"}}, "matchConditions[0].name: Invalid value"},
	} {
		errs := ValidatingWebhookConfiguration(hook(c.conds...))
		if !strings.Contains(errs.ToAggregate().Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, errs, c.want)
		}
	}
	// A policy with a paramKind may use params.
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			Validations:     []admissionregistrationv1.Validation{{Expression: "true"}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "p", Expression: `params.data.x == "1"`}}}}
	if errs := ValidatingAdmissionPolicy(p); len(errs) != 0 {
		t.Errorf("a policy's params condition refused: %v", errs)
	}
	p.Spec.ParamKind = nil
	if errs := ValidatingAdmissionPolicy(p); !strings.Contains(errs.ToAggregate().Error(), "spec.matchConditions[0].expression") {
		t.Errorf("params without paramKind: %v", errs)
	}
}
