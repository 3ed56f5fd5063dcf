package kubectl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

const volumesManifest = `apiVersion: v1
kind: PersistentVolume
metadata: {name: static-1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  hostPath: {path: /tmp/skiff-static-1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: example}
spec: {controller: example.com/ingress}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  ingressClassName: example
  rules:
  - host: web.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: runc}
handler: runc
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
`

// TestClassAPIs drives the storage, scheduling, node, networking and DRA APIs with the real
// kubectl: the built-in classes, upstream's columns, and upstream's refusals.
func TestClassAPIs(t *testing.T) {
	s := framework.StartServer(t)
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := runner(ctx, t, s, kc)
	contains := func(out string, want ...string) { t.Helper(); containsAll(t, out, want...) }

	contains(run(false, "api-resources"), "persistentvolumeclaims", "pvc", "storageclasses", "sc ", "storage.k8s.io/v1",
		"csidrivers", "csinodes", "csistoragecapacities", "volumeattachments", "volumeattributesclasses",
		"runtimeclasses", "node.k8s.io/v1", "priorityclasses", "pc ", "scheduling.k8s.io/v1",
		"ingresses", "ing ", "ingressclasses", "statefulsets", "sts ", "resourceclaims", "resource.k8s.io/v1", "deviceclasses")

	// What every cluster has: the system priority classes and the default StorageClass.
	framework.Eventually(t, 30*time.Second, "built-in classes", func() (bool, string) {
		out, _ := s.Run(ctx, kc, "get", "priorityclasses,storageclasses")
		return strings.Contains(out, "system-node-critical") && strings.Contains(out, "local-path (default)"), out
	})
	contains(run(false, "get", "priorityclasses"), "NAME", "VALUE", "GLOBAL-DEFAULT", "system-cluster-critical", "2000000000", "system-node-critical", "2000001000")
	contains(run(false, "get", "storageclass"), "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "skiff.sh/local-path", "Delete", "WaitForFirstConsumer")
	contains(run(true, "delete", "priorityclass", "system-node-critical"), "this is a system priority class and cannot be deleted")

	file := filepath.Join(t.TempDir(), "classes.yaml")
	if err := os.WriteFile(file, []byte(volumesManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	contains(run(false, "apply", "-f", file), "persistentvolume/static-1 created", "persistentvolumeclaim/data created",
		"ingressclass.networking.k8s.io/example created", "ingress.networking.k8s.io/web created",
		"runtimeclass.node.k8s.io/runc created", "priorityclass.scheduling.k8s.io/high created")
	contains(run(false, "get", "pv"), "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "static-1", "1Gi", "RWO", "Retain", "manual")
	contains(run(false, "get", "pvc"), "STATUS", "VOLUME", "data", "Pending")
	contains(run(false, "get", "ingress"), "CLASS", "HOSTS", "web", "example", "web.example.com", "80")
	contains(run(false, "get", "runtimeclass"), "HANDLER", "runc")
	contains(run(false, "get", "pvc", "data", "-o", "jsonpath={.spec.volumeMode}/{.spec.storageClassName}"), "Filesystem/local-path")

	// Admission resolves the classes a pod names.
	contains(run(false, "run", "important", "--image=skiff/netutil:1", "--overrides", `{"spec":{"priorityClassName":"high"}}`), "pod/important created")
	contains(run(false, "get", "pod", "important", "-o", "jsonpath={.spec.priority}/{.spec.preemptionPolicy}"), "1000/PreemptLowerPriority")
	contains(run(true, "run", "nobody", "--image=skiff/netutil:1", "--overrides", `{"spec":{"priorityClassName":"nobody"}}`), "no PriorityClass with name nobody was found")
	contains(run(true, "run", "sandboxed", "--image=skiff/netutil:1", "--overrides", `{"spec":{"runtimeClassName":"kata"}}`), `pod rejected: RuntimeClass "kata" not found`)
	bad0 := filepath.Join(t.TempDir(), "default2.yaml")
	_ = os.WriteFile(bad0, []byte("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: d1}\nvalue: 1\nglobalDefault: true\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: d2}\nvalue: 2\nglobalDefault: true\n"), 0o644)
	contains(run(true, "create", "-f", bad0), "PriorityClass d1 is already marked as default. Only one default can exist")

	// Upstream's refusals, with upstream's words.
	bad := func(name, manifest string, want ...string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), name+".yaml")
		_ = os.WriteFile(f, []byte(manifest), 0o644)
		contains(run(true, "create", "-f", f), want...)
	}
	bad("pvc", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: nosize}\nspec: {accessModes: [ReadWriteOnce]}\n",
		"spec.resources[storage]: Required value")
	bad("pv", "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: nosrc}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce]}\n",
		"must specify a volume type")
	bad("pc", "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: huge}\nvalue: 2000000000\n",
		"maximum allowed value of a user defined priority is 1000000000")
	bad("ing", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: empty}\nspec: {}\n",
		"either `defaultBackend` or `rules` must be specified")
	bad("sc", "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: nop}\nprovisioner: \"\"\n", "provisioner: Required value")
	contains(run(true, "patch", "pvc", "data", "--type=merge", "-p", `{"spec":{"accessModes":["ReadWriteMany"]}}`),
		"spec is immutable after creation")

	// A quota's status follows what its namespace holds, and admission refuses what would
	// exceed it, with upstream's words.
	run(false, "create", "namespace", "quota-test")
	contains(run(false, "-n", "quota-test", "create", "quota", "small", "--hard=pods=1,count/configmaps=5"), "resourcequota/small created")
	framework.Eventually(t, 30*time.Second, "the quota's status computed", func() (bool, string) {
		out, _ := s.Run(ctx, kc, "-n", "quota-test", "get", "quota", "small", "-o", "jsonpath={.status.used.pods}/{.status.hard.pods}")
		return out == "0/1", out
	})
	run(false, "-n", "quota-test", "run", "first", "--image=skiff/netutil:1")
	contains(run(true, "-n", "quota-test", "run", "second", "--image=skiff/netutil:1"),
		"exceeded quota: small, requested: pods=1, used: pods=1, limited: pods=1")
	contains(run(false, "-n", "quota-test", "get", "quota"), "NAME", "REQUEST", "LIMIT", "small", "pods: 1/1")
	run(false, "-n", "quota-test", "delete", "pod", "first", "--grace-period=0", "--force")
	framework.Eventually(t, 30*time.Second, "the deleted pod's share given back", func() (bool, string) {
		out, _ := s.Run(ctx, kc, "-n", "quota-test", "get", "quota", "small", "-o", "jsonpath={.status.used.pods}")
		return out == "0", out
	})
	run(false, "-n", "quota-test", "run", "second", "--image=skiff/netutil:1")
	bad("limits", "apiVersion: v1\nkind: LimitRange\nmetadata: {name: inverted}\nspec: {limits: [{type: Container, min: {cpu: \"2\"}, max: {cpu: \"1\"}}]}\n",
		"min value 2 is greater than max value 1")

	// A LimitRange's defaults fill a new pod's containers; what breaks its max is refused.
	run(false, "create", "namespace", "limits-test")
	lrFile := filepath.Join(t.TempDir(), "lr.yaml")
	_ = os.WriteFile(lrFile, []byte("apiVersion: v1\nkind: LimitRange\nmetadata: {name: cpu, namespace: limits-test}\nspec: {limits: [{type: Container, max: {cpu: \"1\"}, defaultRequest: {cpu: 100m}}]}\n"), 0o644)
	run(false, "apply", "-f", lrFile)
	contains(run(false, "-n", "limits-test", "get", "limitrange", "cpu", "-o", "jsonpath={.spec.limits[0].default.cpu}"), "1")
	run(false, "-n", "limits-test", "run", "defaulted", "--image=skiff/netutil:1")
	contains(run(false, "-n", "limits-test", "get", "pod", "defaulted", "-o", "jsonpath={.spec.containers[0].resources.requests.cpu}/{.spec.containers[0].resources.limits.cpu}"), "100m/1")
	contains(run(true, "-n", "limits-test", "run", "greedy", "--image=skiff/netutil:1", "--overrides",
		`{"spec":{"containers":[{"name":"greedy","image":"skiff/netutil:1","resources":{"limits":{"cpu":"2"}}}]}}`),
		"maximum cpu usage per Container is 1, but limit is 2")

	// kubectl autoscale makes an autoscaling/v2 HPA; with no metrics API yet, its
	// conditions say why it cannot size the target, and the bounds still apply.
	contains(run(false, "create", "deployment", "scaled", "--image=skiff/netutil:1", "--replicas=4"), "deployment.apps/scaled created")
	contains(run(false, "autoscale", "deployment", "scaled", "--min=1", "--max=2", "--cpu-percent=50"), "horizontalpodautoscaler.autoscaling/scaled autoscaled")
	contains(run(false, "get", "hpa", "scaled"), "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "Deployment/scaled", "cpu: <unknown>/50%")
	framework.Eventually(t, 60*time.Second, "the HPA brings the Deployment within maxReplicas", func() (bool, string) {
		out, _ := s.Run(ctx, kc, "get", "deployment", "scaled", "-o", "jsonpath={.spec.replicas}")
		return out == "2", out
	})
	// autoscaling/v1 serves the same HPAs: its CPU target, and v1 objects read back in v2.
	contains(run(false, "get", "horizontalpodautoscalers.v1.autoscaling", "scaled", "-o", "jsonpath={.apiVersion} {.spec.targetCPUUtilizationPercentage}"), "autoscaling/v1 50")
	v1hpa := filepath.Join(t.TempDir(), "hpa-v1.yaml")
	_ = os.WriteFile(v1hpa, []byte("apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: legacy}\nspec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: scaled}, maxReplicas: 3, targetCPUUtilizationPercentage: 60}\n"), 0o644)
	contains(run(false, "create", "-f", v1hpa), "horizontalpodautoscaler.autoscaling/legacy created")
	contains(run(false, "get", "horizontalpodautoscalers.v2.autoscaling", "legacy", "-o", "jsonpath={.spec.minReplicas} {.spec.metrics[0].resource.name} {.spec.metrics[0].resource.target.averageUtilization}"), "1 cpu 60")
	framework.Eventually(t, 60*time.Second, "the HPA says it has no metrics", func() (bool, string) {
		out, _ := s.Run(ctx, kc, "get", "hpa", "scaled", "-o", `jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason};{end}`)
		return strings.Contains(out, "ScalingActive=False/FailedGetResourceMetric"), out
	})

	// DRA: a claim's spec is immutable; its status is written through the subresource.
	client := s.Client(t)
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "req-0", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}}}
	got, err := client.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e := got.Spec.Devices.Requests[0].Exactly; e.AllocationMode != resourcev1.DeviceAllocationModeExactCount || e.Count != 1 {
		t.Errorf("request defaults: %+v", e)
	}
	got.Status.Allocation = &resourcev1.AllocationResult{}
	if _, err := client.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	contains(run(false, "get", "resourceclaims"), "STATE", "gpu", "allocated")
	contains(run(true, "patch", "resourceclaim", "gpu", "--type=merge", "-p", `{"spec":{"devices":{"requests":[{"name":"req-1","exactly":{"deviceClassName":"x"}}]}}}`),
		"field is immutable")
}
