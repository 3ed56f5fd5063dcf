package lab

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

const hooksManifest = `apiVersion: v1
kind: Namespace
metadata: {name: hooked, labels: {hooks: "on"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hooks, namespace: default}
spec:
  selector: {matchLabels: {app: hooks}}
  template:
    metadata: {labels: {app: hooks}}
    spec:
      containers:
      - name: hooks
        image: localhost/skiff/netutil:1
        command: [netutil, webhook, /tls/tls.crt, /tls/tls.key, --port, "8443"]
        readinessProbe: {tcpSocket: {port: 8443}, periodSeconds: 1}
        volumeMounts: [{name: tls, mountPath: /tls, readOnly: true}]
      volumes: [{name: tls, secret: {secretName: hooks-tls}}]
---
apiVersion: v1
kind: Service
metadata: {name: hooks, namespace: default}
spec:
  selector: {app: hooks}
  ports: [{port: 443, targetPort: 8443}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: lab-hooks}
webhooks:
- name: validate.hooks.example.com
  clientConfig: {service: {namespace: default, name: hooks, path: /validate}, caBundle: CABUNDLE}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  namespaceSelector: {matchLabels: {hooks: "on"}}
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: lab-hooks}
webhooks:
- name: mutate.hooks.example.com
  clientConfig: {service: {namespace: default, name: hooks, path: /mutate}, caBundle: CABUNDLE}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  namespaceSelector: {matchLabels: {hooks: "on"}}
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {service: {namespace: default, name: hooks, path: /convert}, caBundle: CABUNDLE}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {color: {type: string}}}}}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {colour: {type: string}}}}}}
`

// podWebhooks runs admission and conversion webhooks in a pod, reached through its Service
// with the caBundle, as operators deploy them, and uses them with the real kubectl: a
// ConfigMap mutated and one refused with the webhook's message, and a custom resource
// written as v1 read as v2 and the other way, converted by the pod.
func (l *lab) podWebhooks() {
	t := l.t
	pair := framework.NewServingPair(t, []string{"hooks.default.svc"}, nil)
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(crt, pair.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pair.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	l.kubectl("create", "secret", "tls", "hooks-tls", "--cert", crt, "--key", key)
	cleanup := l.apply(strings.ReplaceAll(hooksManifest, "CABUNDLE", base64.StdEncoding.EncodeToString(pair.CAPEM)))
	defer func() {
		cleanup()
		l.kubectl("delete", "secret", "hooks-tls")
	}()
	l.kubectl("rollout", "status", "deployment/hooks", "--timeout=2m")

	n := 0
	framework.Eventually(t, 60*time.Second, "a ConfigMap labelled by the pod's mutating webhook", func() (bool, string) {
		n++
		name := fmt.Sprintf("ok-%d", n)
		if out, err := l.kubectlErr("-n", "hooked", "create", "configmap", name, "--from-literal=a=b"); err != nil {
			return false, out
		}
		out := l.kubectl("-n", "hooked", "get", "configmap", name, "-o", "jsonpath={.metadata.labels.webhook}")
		return out == "mutated", out
	})
	out, err := l.kubectlErr("-n", "hooked", "create", "configmap", "bad", "--from-literal=forbidden=x")
	if err == nil || !strings.Contains(out, `admission webhook "validate.hooks.example.com" denied the request: the forbidden key is not allowed`) {
		t.Errorf("a forbidden ConfigMap: %v\n%s", err, out)
	}
	// Outside the selected namespace nothing is asked.
	l.kubectl("create", "configmap", "unhooked", "--from-literal=forbidden=x")
	l.kubectl("delete", "configmap", "unhooked")

	framework.Eventually(t, 60*time.Second, "widgets served", func() (bool, string) {
		out, err := l.kubectlErr("get", "widgets")
		return err == nil, out
	})
	l.apply("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {color: red}\n")
	if got := l.kubectl("get", "widgets.v2.example.com", "w1", "-o", "jsonpath={.apiVersion} {.spec.colour}"); got != "example.com/v2 red" {
		t.Errorf("w1 read as v2: %q", got)
	}
	l.apply("apiVersion: example.com/v2\nkind: Widget\nmetadata: {name: w2, namespace: default}\nspec: {colour: blue}\n")
	if got := l.kubectl("get", "widgets.v1.example.com", "w2", "-o", "jsonpath={.apiVersion} {.spec.color}"); got != "example.com/v1 blue" {
		t.Errorf("w2 written as v2, read as v1: %q", got)
	}
	l.kubectl("delete", "widgets", "w1", "w2")
}
