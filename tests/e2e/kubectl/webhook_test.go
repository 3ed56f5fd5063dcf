package kubectl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestAdmissionWebhooks registers a validating and a mutating webhook (served by the test
// over TLS with its caBundle) and creates ConfigMaps with the real kubectl: one is labelled
// by the mutating webhook, one refused with the validating webhook's message; a webhook
// that cannot be reached fails requests or is ignored, as its failurePolicy says.
func TestAdmissionWebhooks(t *testing.T) {
	s := framework.StartServer(t)
	kc := framework.Kubectl(t, 33)
	client := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	url, ca := framework.WebhookServer(t)
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
	only := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "default"}}
	hookConfig := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + path), CABundle: ca}
	}
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "deny.example.com",
			ClientConfig: hookConfig("/validate"), Rules: rules, NamespaceSelector: only,
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "label"}, Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "label.example.com",
			ClientConfig: hookConfig("/mutate"), Rules: rules, NamespaceSelector: only,
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(ctx, kc, "get", "validatingwebhookconfigurations,mutatingwebhookconfigurations")
	if err != nil || !strings.Contains(out, "WEBHOOKS") || !strings.Contains(out, "deny") || !strings.Contains(out, "label") {
		t.Fatalf("kubectl get webhook configurations: %v\n%s", err, out)
	}
	framework.Eventually(t, 30*time.Second, "the mutating webhook labels a new ConfigMap", func() (bool, string) {
		name := "cm-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
		if out, err := s.Run(ctx, kc, "create", "configmap", name, "--from-literal=a=b"); err != nil {
			return false, out
		}
		out, _ := s.Run(ctx, kc, "get", "configmap", name, "-o", "jsonpath={.metadata.labels.webhook}")
		return out == "seen", out
	})
	out, err = s.Run(ctx, kc, "create", "configmap", "bad", "--from-literal=forbidden=x")
	if err == nil || !strings.Contains(out, `admission webhook "deny.example.com" denied the request: the forbidden key is not allowed`) {
		t.Errorf("the validating webhook's refusal: %v\n%s", err, out)
	}
	// Another namespace is outside both webhooks' namespaceSelector.
	if out, err := s.Run(ctx, kc, "create", "namespace", "elsewhere"); err != nil {
		t.Fatal(out)
	}
	if out, err := s.Run(ctx, kc, "-n", "elsewhere", "create", "configmap", "free", "--from-literal=forbidden=x"); err != nil {
		t.Errorf("a namespace the selector leaves out was refused: %s", out)
	}

	// An unreachable webhook: Fail refuses with the call's error; Ignore lets requests through.
	dead := func(policy admissionregistrationv1.FailurePolicyType) {
		t.Helper()
		_ = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "dead", metav1.DeleteOptions{})
		if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "dead"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "dead.example.com",
				ClientConfig:  admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/never"), CABundle: ca},
				Rules:         []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}}}},
				FailurePolicy: ptr.To(policy), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](2)}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dead(admissionregistrationv1.Fail)
	framework.Eventually(t, 30*time.Second, "Fail refuses when the webhook is down", func() (bool, string) {
		out, err := s.Run(ctx, kc, "create", "secret", "generic", "s-"+strings.ReplaceAll(time.Now().Format("150405.000000"), ".", ""), "--from-literal=a=b")
		return err != nil && strings.Contains(out, `failed calling webhook "dead.example.com"`), out
	})
	dead(admissionregistrationv1.Ignore)
	framework.Eventually(t, 30*time.Second, "Ignore lets requests through", func() (bool, string) {
		out, err := s.Run(ctx, kc, "create", "secret", "generic", "s-"+strings.ReplaceAll(time.Now().Format("150405.000000"), ".", ""), "--from-literal=a=b")
		return err == nil, out
	})
}

const replicaPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-replicas}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= 5"
    message: "at most 5 replicas"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-replicas}
spec:
  policyName: max-replicas
  validationActions: [Deny]
`

// TestValidatingAdmissionPolicy denies with a CEL policy's message, through the real kubectl.
func TestValidatingAdmissionPolicy(t *testing.T) {
	s := framework.StartServer(t)
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(f, []byte(replicaPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Run(ctx, kc, "apply", "-f", f); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	framework.Eventually(t, 30*time.Second, "the policy denies a Deployment of 10", func() (bool, string) {
		out, err := s.Run(ctx, kc, "create", "deployment", "big", "--image=skiff/netutil:1", "--replicas=10")
		return err != nil && strings.Contains(out, "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' denied request: at most 5 replicas"), out
	})
	if out, err := s.Run(ctx, kc, "create", "deployment", "small", "--image=skiff/netutil:1", "--replicas=2"); err != nil {
		t.Errorf("a Deployment within the policy was refused: %s", out)
	}
	// An update is checked too (the scale subresource is not: the rule names deployments only).
	if out, err := s.Run(ctx, kc, "patch", "deployment", "small", "-p", `{"spec":{"replicas":9}}`); err == nil || !strings.Contains(out, "at most 5 replicas") {
		t.Errorf("patching past the policy: %v\n%s", err, out)
	}
}

const mutatingPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: team-label}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [configmaps]
  matchConditions:
  - name: not-kube-root-ca
    expression: object.metadata.name != "kube-root-ca.crt"
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"team": "storage"}}}'
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/data/stamped", value: "by-policy"}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: team-label}
spec:
  policyName: team-label
`

// TestMutatingAdmissionPolicy: a CEL policy with an apply configuration and a JSON patch
// mutates every new ConfigMap, through the real kubectl; a policy without what upstream
// requires is refused with its field named.
func TestMutatingAdmissionPolicy(t *testing.T) {
	s := framework.StartServer(t)
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := runner(ctx, t, s, kc)
	f := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(f, []byte(mutatingPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	run(false, "apply", "-f", f)
	if out := run(false, "get", "mutatingadmissionpolicy", "team-label"); !regexp.MustCompile(`team-label\s+2\s+<unset>`).MatchString(out) {
		t.Errorf("kubectl get mutatingadmissionpolicy:\n%s", out)
	}
	n := 0
	framework.Eventually(t, 30*time.Second, "a new ConfigMap mutated by the policy", func() (bool, string) {
		n++
		name := fmt.Sprintf("cm%d", n)
		run(false, "create", "configmap", name, "--from-literal=a=b")
		out := run(false, "get", "configmap", name, "-o", "jsonpath={.metadata.labels.team}/{.data.stamped}/{.data.a}")
		return out == "storage/by-policy/b", out
	})
	bad := strings.Replace(strings.Split(mutatingPolicy, "---")[0], "  reinvocationPolicy: Never\n", "", 1)
	bad = strings.Replace(bad, "name: team-label", "name: no-reinvocation", 1)
	if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(true, "apply", "-f", f); !strings.Contains(out, "spec.reinvocationPolicy: Required value") {
		t.Errorf("a policy without reinvocationPolicy:\n%s", out)
	}
}

// TestPodSecurity: a namespace labelled enforce=restricted refuses a privileged pod with
// upstream's message; warn=baseline answers a hostPath pod with a warning but admits it.
func TestPodSecurity(t *testing.T) {
	s := framework.StartServer(t)
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := runner(ctx, t, s, kc)
	run(false, "create", "namespace", "locked")
	run(false, "label", "namespace", "locked", "pod-security.kubernetes.io/enforce=restricted")
	out := run(true, "-n", "locked", "run", "root", "--image=skiff/netutil:1", "--overrides",
		`{"spec":{"containers":[{"name":"root","image":"skiff/netutil:1","securityContext":{"privileged":true}}]}}`)
	for _, want := range []string{`pods "root" is forbidden: violates PodSecurity "restricted:latest"`, `privileged (container "root" must not set securityContext.privileged=true)`} {
		if !strings.Contains(out, want) {
			t.Errorf("refusal lacks %q:\n%s", want, out)
		}
	}
	run(false, "create", "namespace", "watched")
	run(false, "label", "namespace", "watched", "pod-security.kubernetes.io/warn=baseline")
	out = run(false, "-n", "watched", "run", "host", "--image=skiff/netutil:1", "--overrides",
		`{"spec":{"volumes":[{"name":"h","hostPath":{"path":"/tmp"}}],"containers":[{"name":"host","image":"skiff/netutil:1","volumeMounts":[{"name":"h","mountPath":"/h"}]}]}}`)
	if !strings.Contains(out, `Warning: would violate PodSecurity "baseline:latest": hostPath volumes (volume "h")`) {
		t.Errorf("no PodSecurity warning:\n%s", out)
	}
	// Labelling a namespace warns about the pods already there that the new level refuses.
	out = run(false, "label", "namespace", "watched", "pod-security.kubernetes.io/enforce=baseline")
	if !strings.Contains(out, "existing pods in namespace \"watched\" violate the new PodSecurity enforce level") {
		t.Errorf("no warning about existing pods:\n%s", out)
	}
}
