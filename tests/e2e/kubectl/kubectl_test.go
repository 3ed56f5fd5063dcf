package kubectl

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

const manifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: skiff/testserver:1
        ports:
        - containerPort: 8080
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 8080
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  greeting: hello
`

func TestKubectl133(t *testing.T) { testKubectl(t, 33) }
func TestKubectl127(t *testing.T) { testKubectl(t, 27) }

func testKubectl(t *testing.T, minor int) {
	s := framework.StartServer(t)
	kc := framework.Kubectl(t, minor)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := s.Client(t)

	run := func(args ...string) string {
		t.Helper()
		out, err := s.Run(ctx, kc, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	fail := func(args ...string) string {
		t.Helper()
		out, err := s.Run(ctx, kc, args...)
		if err == nil {
			t.Fatalf("kubectl %s succeeded, want an error:\n%s", strings.Join(args, " "), out)
		}
		return out
	}
	contains := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("output lacks %q:\n%s", w, out)
			}
		}
	}

	// Discovery: aggregated (v2 for new kubectl, v2beta1 for 1.27-1.29) answers in two requests,
	// not one per group version.
	trace := run("get", "pods", "-v=6", "--cache-dir", t.TempDir())
	if strings.Contains(trace, "/apis/apps/v1?") || !strings.Contains(trace, "/apis?timeout") {
		t.Fatalf("kubectl 1.%d did not use aggregated discovery:\n%s", minor, trace)
	}
	out := run("api-resources")
	contains(out, "pods", "po", "deployments", "deploy", "apps/v1", "endpointslices", "discovery.k8s.io/v1",
		"leases", "coordination.k8s.io/v1", "networkpolicies", "netpol", "nodes", "no ", "servicecidrs")

	// The default ServiceCIDR shows --service-cidr, Ready; another is refused with the reason.
	contains(run("get", "servicecidrs"), "NAME", "CIDRS", "kubernetes", "10.96.0.0/12")
	contains(run("get", "servicecidr", "kubernetes", "-o", "jsonpath={.status.conditions[0].type}={.status.conditions[0].status}"), "Ready=True")
	extra := filepath.Join(t.TempDir(), "servicecidr.yaml")
	_ = os.WriteFile(extra, []byte("apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: extra}\nspec: {cidrs: [10.100.0.0/16]}\n"), 0o644)
	contains(fail("create", "-f", extra), "more ServiceCIDRs are not supported")

	// Namespaces: create, get, describe, delete.
	contains(run("create", "namespace", "team-a"), "namespace/team-a created")
	contains(run("get", "namespaces"), "default", "kube-system", "kube-public", "kube-node-lease", "team-a")
	contains(run("describe", "namespace", "team-a"), "Name:", "team-a", "Status:", "Active")
	contains(run("delete", "namespace", "team-a"), `namespace "team-a" deleted`)
	if out := fail("get", "namespace", "team-a"); !strings.Contains(out, "NotFound") {
		t.Fatalf("deleted namespace: %s", out)
	}
	contains(fail("delete", "namespace", "kube-system"), "this namespace may not be deleted")

	// apply -f with kubectl's default (strict, server-side) field validation.
	file := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	contains(run("apply", "-f", file), "deployment.apps/web created", "service/web created", "configmap/web-config created")
	contains(run("apply", "-f", file), "deployment.apps/web unchanged", "service/web unchanged", "configmap/web-config unchanged")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte(strings.Replace(manifest, "containerPort: 8080", "containerPort: 8080\n          bogusField: 1", 1)), 0o644)
	contains(fail("apply", "-f", bad), "unknown field", "bogusField")

	// Output formats.
	out = run("get", "deploy,svc", "-o", "wide")
	contains(out, "READY", "UP-TO-DATE", "AVAILABLE", "CONTAINERS", "IMAGES", "SELECTOR", "skiff/testserver:1", "app=web",
		"TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "80/TCP", "10.96.0.1")
	svc, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP == "" || !strings.HasPrefix(svc.Spec.ClusterIP, "10.") {
		t.Fatalf("web has no ClusterIP from 10.96.0.0/12: %q", svc.Spec.ClusterIP)
	}
	contains(run("get", "svc", "web", "-o", "yaml"), "clusterIP: "+svc.Spec.ClusterIP, "targetPort: 8080", "kind: Service")
	if got := run("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}/{.spec.strategy.type}/{.spec.template.spec.containers[0].image}"); got != "2/RollingUpdate/skiff/testserver:1" {
		t.Fatalf("jsonpath: %q", got)
	}

	// get -w streams later changes.
	watchCtx, stopWatch := context.WithCancel(ctx)
	w := exec.CommandContext(watchCtx, kc, "get", "configmaps", "-w", "--no-headers")
	w.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig)
	stdout, _ := w.StdoutPipe()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLine := func(prefix string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl get -w ended before %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return
				}
			case <-timeout:
				t.Fatalf("kubectl get -w never printed %q", prefix)
			}
		}
	}
	waitLine("web-config")
	run("create", "configmap", "later", "--from-literal=a=b")
	waitLine("later")
	stopWatch()
	_ = w.Wait()

	// Patches of all three types, label, annotate, scale.
	run("patch", "deploy", "web", "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"skiff/testserver:2"}]}}}}`)
	run("patch", "deploy", "web", "--type=merge", "-p", `{"metadata":{"labels":{"tier":"front"}}}`)
	run("patch", "deploy", "web", "--type=json", "-p", `[{"op":"replace","path":"/spec/replicas","value":4}]`)
	run("label", "deploy", "web", "owner=team-b")
	run("annotate", "deploy", "web", "note=hello")
	contains(run("scale", "deploy", "web", "--replicas=5"), "deployment.apps/web scaled")
	d, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "skiff/testserver:2" {
		t.Errorf("strategic merge patch: image %q", img)
	}
	if d.Labels["tier"] != "front" || d.Labels["owner"] != "team-b" || d.Annotations["note"] != "hello" {
		t.Errorf("merge patch/label/annotate: labels %v annotations %v", d.Labels, d.Annotations)
	}
	if *d.Spec.Replicas != 5 {
		t.Errorf("json patch + scale: replicas %d, want 5", *d.Spec.Replicas)
	}
	if d.Generation != 4 { // create, image, replicas=4, replicas=5
		t.Errorf("metadata.generation = %d, want 4", d.Generation)
	}

	// explain reads the OpenAPI documents.
	contains(run("explain", "pod.spec"), "containers", "List of containers belonging to the pod")

	// run: the pod is stored and waits for a scheduler.
	contains(run("run", "test", "--image=skiff/testserver:1"), "pod/test created")
	out = run("get", "pod", "test", "-o", "wide")
	contains(out, "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES", "Pending")
	pod, err := client.CoreV1().Pods("default").Get(ctx, "test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" || pod.Status.Phase != "Pending" || pod.Spec.ServiceAccountName != "default" ||
		pod.Spec.SchedulerName != "default-scheduler" || pod.Spec.RestartPolicy != "Always" {
		t.Errorf("defaults/admission on the new pod: %+v", pod.Spec)
	}
	var tolerations []string
	for _, tol := range pod.Spec.Tolerations {
		if tol.TolerationSeconds != nil {
			tolerations = append(tolerations, fmt.Sprintf("%s:%s:%d", tol.Key, tol.Effect, *tol.TolerationSeconds))
		}
	}
	if got, want := strings.Join(tolerations, ","), "node.kubernetes.io/not-ready:NoExecute:300,node.kubernetes.io/unreachable:NoExecute:300"; got != want {
		t.Errorf("DefaultTolerationSeconds: %s, want %s", got, want)
	}
	contains(run("describe", "pod", "test"), "Service Account:  default", "/var/run/secrets/kubernetes.io/serviceaccount", "Tolerations:")
	contains(s.Etcdctl(t, "get", "/registry/pods/default", "--prefix", "--keys-only"), "/registry/pods/default/test")

	contains(run("get", "--raw", "/readyz?verbose"), "[+]ping ok", "[+]etcd ok", "readyz check passed")
	contains(run("delete", "pod", "test"), `pod "test" deleted`)

	if code := s.AnonymousStatus(t, "/api/v1/namespaces"); code != 403 {
		t.Errorf("anonymous request: HTTP %d, want 403 (system:anonymous is authenticated as such and refused by RBAC, as upstream)", code)
	}
}
