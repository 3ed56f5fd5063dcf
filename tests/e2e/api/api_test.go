// Package api checks the API server's verbs and semantics through client-go and raw HTTP:
// optimistic concurrency, generateName, selectors, deletecollection, graceful deletion and
// finalizers, dryRun, field validation, protobuf, streaming lists, service allocation,
// service-account tokens, and precise 4xx answers to bad input.
package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "api-test"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "skiff/testserver:1"}}}}
}

func TestAPISemantics(t *testing.T) {
	s := framework.StartServer(t)
	cfg := s.RESTConfig(t)
	client := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := client.CoreV1().Pods("default")

	t.Run("protobuf", func(t *testing.T) {
		pcfg := rest.CopyConfig(cfg)
		pcfg.ContentType = "application/vnd.kubernetes.protobuf"
		pcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf"
		pc := kubernetes.NewForConfigOrDie(pcfg)
		created, err := pc.CoreV1().Pods("default").Create(ctx, pod("proto"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.UID == "" || created.CreationTimestamp.IsZero() || created.ResourceVersion == "" {
			t.Fatalf("server did not fill uid/creationTimestamp/resourceVersion: %+v", created.ObjectMeta)
		}
		if _, err := pc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a Secret's stringData is stored as data, and an immutable one stays so", func(t *testing.T) {
		secrets := client.CoreV1().Secrets("default")
		created, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "string-data"},
			Data: map[string][]byte{"a": []byte("1")}, StringData: map[string]string{"b": "2"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := secrets.Get(ctx, "string-data", metav1.GetOptions{})
		if err != nil || string(got.Data["a"]) != "1" || string(got.Data["b"]) != "2" || got.StringData != nil || created.StringData != nil {
			t.Fatalf("stored secret: %v %+v", err, got)
		}
		got.Immutable = ptr.To(true)
		if got, err = secrets.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		got.Immutable = ptr.To(false)
		if _, err := secrets.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Fatalf("making an immutable secret mutable: %v, want Invalid", err)
		}
	})

	t.Run("status sent on create is cleared, as upstream, except a Node's", func(t *testing.T) {
		deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "status-on-create"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "soc"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "soc"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "skiff/testserver:1"}}}}},
			Status: appsv1.DeploymentStatus{Replicas: 7, ReadyReplicas: 7}}
		got, err := client.AppsV1().Deployments("default").Create(ctx, deploy, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Replicas != 0 || got.Status.ReadyReplicas != 0 {
			t.Errorf("a Deployment created with a status kept it: %+v", got.Status)
		}
		scale, err := client.AppsV1().Deployments("default").GetScale(ctx, "status-on-create", metav1.GetOptions{})
		if err != nil || scale.Spec.Replicas != 0 {
			t.Errorf("deployments/scale: %v %+v", err, scale)
		}
		rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "status-on-create"},
			Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](0), Selector: map[string]string{"app": "soc-rc"},
				Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "soc-rc"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "skiff/testserver:1"}}}}},
			Status: corev1.ReplicationControllerStatus{Replicas: 3}}
		if got, err := client.CoreV1().ReplicationControllers("default").Create(ctx, rc, metav1.CreateOptions{}); err != nil || got.Status.Replicas != 0 {
			t.Errorf("a ReplicationController created with a status: %v %+v", err, got.Status)
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "status-on-create"},
			Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("42")}}}
		gotNode, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = client.CoreV1().Nodes().Delete(context.Background(), "status-on-create", metav1.DeleteOptions{})
		}()
		if q := gotNode.Status.Capacity[corev1.ResourcePods]; q.Value() != 42 {
			t.Errorf("a Node registered with its capacity lost it: %+v", gotNode.Status)
		}
	})

	t.Run("generateName and conflicts", func(t *testing.T) {
		p := pod("")
		p.GenerateName = "gen-"
		got, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil || !strings.HasPrefix(got.Name, "gen-") || len(got.Name) != len("gen-")+5 {
			t.Fatalf("generateName: %v %q", err, got.Name)
		}
		if _, err := pods.Create(ctx, pod(got.Name), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Fatalf("second create: %v, want AlreadyExists", err)
		}
		// Optimistic concurrency, on an object no controller touches meanwhile.
		cms := client.CoreV1().ConfigMaps("default")
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "occ"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stale := cm.DeepCopy()
		cm.Data = map[string]string{"v": "1"}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		stale.Data = map[string]string{"v": "2"}
		_, err = cms.Update(ctx, stale, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			t.Fatalf("stale update: %v, want 409 Conflict", err)
		}
	})

	t.Run("selectors, limit/continue, deletecollection", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			p := pod(fmt.Sprintf("sel-%d", i))
			p.Labels["batch"] = "sel"
			if i%2 == 0 {
				p.Spec.NodeName = "node-a"
			}
			if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "batch=sel", FieldSelector: "spec.nodeName=node-a"})
		if err != nil || len(l.Items) != 3 {
			t.Fatalf("label+field selector: %v, %d items, want 3", err, len(l.Items))
		}
		l, err = pods.List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending,metadata.name=sel-1"})
		if err != nil || len(l.Items) != 1 {
			t.Fatalf("status.phase/metadata.name selector: %v %d", err, len(l.Items))
		}
		if _, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=x"}); !apierrors.IsBadRequest(err) {
			t.Fatalf("unsupported field selector: %v, want 400", err)
		}
		page, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "batch=sel", Limit: 2})
		if err != nil || len(page.Items) != 2 || page.Continue == "" {
			t.Fatalf("limit: %v %d %q", err, len(page.Items), page.Continue)
		}
		seen := len(page.Items)
		for page.Continue != "" {
			page, err = pods.List(ctx, metav1.ListOptions{LabelSelector: "batch=sel", Limit: 2, Continue: page.Continue})
			if err != nil {
				t.Fatal(err)
			}
			seen += len(page.Items)
		}
		if seen != 5 {
			t.Fatalf("paged through %d, want 5", seen)
		}
		// Unbound pods go at once; bound ones get a grace period.
		if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "batch=sel"}); err != nil {
			t.Fatal(err)
		}
		l, _ = pods.List(ctx, metav1.ListOptions{LabelSelector: "batch=sel"})
		if len(l.Items) != 3 {
			t.Fatalf("%d pods left after deletecollection, want the 3 bound ones terminating", len(l.Items))
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 {
				t.Fatalf("bound pod %s not gracefully terminating: %v %v", p.Name, p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
			}
		}
		// The node agent's final delete has grace 0.
		for _, p := range l.Items {
			if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Fatal(err)
			}
		}
		if l, _ = pods.List(ctx, metav1.ListOptions{LabelSelector: "batch=sel"}); len(l.Items) != 0 {
			t.Fatalf("%d pods left", len(l.Items))
		}
	})

	t.Run("finalizers", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fin", Finalizers: []string{"skiff.test/hold"}}}
		cms := client.CoreV1().ConfigMaps("default")
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, "fin", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		held, err := cms.Get(ctx, "fin", metav1.GetOptions{})
		if err != nil || held.DeletionTimestamp == nil {
			t.Fatalf("finalizer did not hold the object: %v %v", err, held)
		}
		if _, err := cms.Patch(ctx, "fin", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Get(ctx, "fin", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("after removing the finalizer: %v, want NotFound", err)
		}
	})

	t.Run("dryRun and field validation", func(t *testing.T) {
		if _, err := pods.Create(ctx, pod("dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("dry-run create persisted: %v", err)
		}
		body := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fv"},"data":{"a":"b"},"bogus":1}`)
		res := client.CoreV1().RESTClient().Post().Namespace("default").Resource("configmaps").
			Param("fieldValidation", "Strict").Body(body).Do(ctx)
		if err := res.Error(); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `unknown field "bogus"`) {
			t.Fatalf("Strict: %v", err)
		}
		var warned []string
		wcfg := rest.CopyConfig(cfg)
		wcfg.WarningHandler = warningRecorder(func(msg string) { warned = append(warned, msg) })
		wc := kubernetes.NewForConfigOrDie(wcfg)
		if err := wc.CoreV1().RESTClient().Post().Namespace("default").Resource("configmaps").
			Param("fieldValidation", "Warn").Body(body).Do(ctx).Error(); err != nil {
			t.Fatalf("Warn: %v", err)
		}
		if len(warned) == 0 || !strings.Contains(strings.Join(warned, ";"), "bogus") {
			t.Fatalf("Warn gave no warning about the unknown field: %v", warned)
		}
	})

	t.Run("validation errors are 422 with causes", func(t *testing.T) {
		p := pod("Bad_Name")
		p.Spec.Containers[0].Image = ""
		_, err := pods.Create(ctx, p, metav1.CreateOptions{})
		se, ok := err.(*apierrors.StatusError)
		if !ok || se.ErrStatus.Code != 422 || se.ErrStatus.Reason != metav1.StatusReasonInvalid {
			t.Fatalf("invalid pod: %v", err)
		}
		fields := map[string]bool{}
		for _, c := range se.ErrStatus.Details.Causes {
			fields[c.Field] = true
		}
		if !fields["metadata.name"] || !fields["spec.containers[0].image"] {
			t.Fatalf("causes %+v lack metadata.name and spec.containers[0].image", se.ErrStatus.Details.Causes)
		}
	})

	t.Run("streaming list (sendInitialEvents)", func(t *testing.T) {
		if _, err := pods.Create(ctx, pod("stream"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		sawStream, sawBookmark := false, false
		timeout := time.After(30 * time.Second)
		for !sawBookmark {
			select {
			case ev := <-w.ResultChan():
				switch ev.Type {
				case watch.Added:
					if ev.Object.(*corev1.Pod).Name == "stream" {
						sawStream = true
					}
				case watch.Bookmark:
					if ev.Object.(*corev1.Pod).Annotations[metav1.InitialEventsAnnotationKey] == "true" {
						sawBookmark = true
					}
				}
			case <-timeout:
				t.Fatal("no initial-events-end bookmark")
			}
		}
		if !sawStream {
			t.Fatal("initial events did not include the existing pod")
		}
	})

	t.Run("services get ClusterIPs and NodePorts without duplicates", func(t *testing.T) {
		svcs := client.CoreV1().Services("default")
		ips, ports := map[string]bool{}, map[int32]bool{}
		for i := 0; i < 10; i++ {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("np-%d", i)},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}}}
			got, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ip, np := got.Spec.ClusterIP, got.Spec.Ports[0].NodePort
			if ips[ip] || ports[np] || np < 30000 || np > 32767 || ip == "10.96.0.1" {
				t.Fatalf("service %d: ip %s nodePort %d (duplicate or out of range)", i, ip, np)
			}
			ips[ip], ports[np] = true, true
		}
		// 10.96.0.10 is the cluster DNS's (kube-system/kube-dns, kept by the server); another
		// address of the static band by hand.
		dns := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dns"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.53", Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}}}}
		if _, err := svcs.Create(ctx, dns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		dup := dns.DeepCopy()
		dup.Name = "dns2"
		if _, err := svcs.Create(ctx, dup, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "already allocated") {
			t.Fatalf("duplicate ClusterIP: %v", err)
		}
		if err := svcs.Delete(ctx, "dns", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := svcs.Create(ctx, dup, metav1.CreateOptions{}); err != nil {
			t.Fatalf("ClusterIP not released on delete: %v", err)
		}
		out := dup.DeepCopy()
		out.Name, out.Spec.ClusterIP = "outside", "192.168.0.1"
		if _, err := svcs.Create(ctx, out, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Fatalf("ClusterIP outside the service CIDR: %v", err)
		}
	})

	t.Run("healthCheckNodePort follows externalTrafficPolicy Local on LoadBalancers", func(t *testing.T) {
		svcs := client.CoreV1().Services("default")
		lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb-local"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, Ports: []corev1.ServicePort{{Port: 80}}}}
		got, err := svcs.Create(ctx, lb, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hc := got.Spec.HealthCheckNodePort
		if hc < 30000 || hc > 32767 || hc == got.Spec.Ports[0].NodePort {
			t.Fatalf("healthCheckNodePort %d (nodePort %d)", hc, got.Spec.Ports[0].NodePort)
		}
		// A PUT that omits it keeps it.
		got.Spec.HealthCheckNodePort = 0
		got.Labels = map[string]string{"touched": "yes"}
		if got, err = svcs.Update(ctx, got, metav1.UpdateOptions{}); err != nil || got.Spec.HealthCheckNodePort != hc {
			t.Fatalf("after an update: %d, %v", got.Spec.HealthCheckNodePort, err)
		}
		// Another Service cannot take it; once the policy is Cluster it is free again.
		taker := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "taker"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			Ports: []corev1.ServicePort{{Port: 80, NodePort: hc}}}}
		if _, err := svcs.Create(ctx, taker, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Fatalf("taking a reserved healthCheckNodePort: %v", err)
		}
		got.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		if got, err = svcs.Update(ctx, got, metav1.UpdateOptions{}); err != nil || got.Spec.HealthCheckNodePort != 0 {
			t.Fatalf("with policy Cluster: %d, %v", got.Spec.HealthCheckNodePort, err)
		}
		if _, err := svcs.Create(ctx, taker, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the freed port: %v", err)
		}
	})

	t.Run("service account tokens", func(t *testing.T) {
		sa, err := client.CoreV1().ServiceAccounts("default").Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil || tr.Status.Token == "" {
			t.Fatalf("TokenRequest: %v", err)
		}
		tcfg := rest.AnonymousClientConfig(cfg)
		tcfg.BearerToken = tr.Status.Token
		tc := kubernetes.NewForConfigOrDie(tcfg)
		review, err := tc.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if u := review.Status.UserInfo; u.Username != "system:serviceaccount:default:robot" || u.UID != string(sa.UID) {
			t.Fatalf("token authenticated as %+v", u)
		}
		// Authenticated, but RBAC grants the account nothing yet: 403, not 401.
		if _, err := tc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("service account without a binding: %v, want 403", err)
		}
		// Deleting the account revokes its tokens.
		if err := client.CoreV1().ServiceAccounts("default").Delete(ctx, "robot", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The authenticator looks the account up in the watch cache (as upstream's reads
		// an informer's), which sees the deletion a moment after the DELETE returns.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			_, err := tc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			if apierrors.IsUnauthorized(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("token of a deleted account: %v, want 401", err)
			}
		}
		bad := rest.AnonymousClientConfig(cfg)
		bad.BearerToken = tr.Status.Token[:len(tr.Status.Token)-4] + "AAAA"
		if _, err := kubernetes.NewForConfigOrDie(bad).CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
			t.Fatalf("forged token: %v, want 401", err)
		}
	})

	t.Run("events.k8s.io and core events share storage", func(t *testing.T) {
		ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ev1", Namespace: "default"},
			EventTime: metav1.NewMicroTime(time.Now()), ReportingController: "skiff.dev/test", ReportingInstance: "t-1",
			Action: "Testing", Reason: "Tested", Type: "Normal", Note: "hello",
			Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p1", Namespace: "default"}}
		if _, err := client.EventsV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		l, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=p1"})
		if err != nil || len(l.Items) != 1 || l.Items[0].Message != "hello" || l.Items[0].ReportingController != "skiff.dev/test" {
			t.Fatalf("core view of an events.k8s.io event: %v %+v", err, l)
		}
		v1l, err := client.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=p1"})
		if err != nil || len(v1l.Items) != 1 || v1l.Items[0].Note != "hello" {
			t.Fatalf("events.k8s.io list by regarding.name: %v %+v", err, v1l)
		}
	})

	t.Run("bad input gets a precise 4xx", func(t *testing.T) {
		base := cfg.Host + "/api/v1/namespaces/default/configmaps"
		cases := []struct {
			name, ctype, body, url string
			code                   int
			msg                    string
		}{
			{"truncated JSON", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"`, base, 400, "unexpected end of JSON input"},
			{"bad YAML", "application/yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: [\n", base, 400, "yaml"},
			{"garbage protobuf", "application/vnd.kubernetes.protobuf", "k8s\x00\x0a\xff\xff\xff", base, 400, ""},
			{"wrong kind", "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`, base, 400, "ConfigMap"},
			{"wrong apiVersion", "application/json", `{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}`, base, 400, ""},
			{"name mismatch", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`, base + "/y", 400, "does not match"},
			{"namespace mismatch", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"kube-system"}}`, base, 400, "does not match"},
			{"unknown field, strict", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"nope":1}`, base + "?fieldValidation=Strict", 400, `strict decoding error: unknown field`},
			{"too large", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":"` + strings.Repeat("x", 3<<20+10) + `"}}`, base, 413, ""},
		}
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			method := http.MethodPost
			if strings.HasSuffix(c.url, "/y") {
				method = http.MethodPut
			}
			req, _ := http.NewRequestWithContext(ctx, method, c.url, bytes.NewBufferString(c.body))
			req.Header.Set("Content-Type", c.ctype)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.code {
				t.Errorf("%s: HTTP %d, want %d: %s", c.name, resp.StatusCode, c.code, b)
				continue
			}
			if !strings.Contains(string(b), `"kind":"Status"`) && resp.StatusCode != 413 {
				t.Errorf("%s: answer is not a Status: %s", c.name, b)
			}
			if c.msg != "" && !strings.Contains(string(b), c.msg) {
				t.Errorf("%s: answer lacks %q: %s", c.name, c.msg, b)
			}
		}
	})
}

type warningRecorder func(string)

func (w warningRecorder) HandleWarningHeader(code int, agent, text string) { w(text) }
