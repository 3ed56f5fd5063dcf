package admission

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"
)

var (
	podsGVR = corev1.SchemeGroupVersion.WithResource("pods")
	podGVK  = corev1.SchemeGroupVersion.WithKind("Pod")
)

func attrs(obj runtime.Object, gvk schema.GroupVersionKind, ns, name string, gvr schema.GroupVersionResource, sub string, op admission.Operation) admission.Attributes {
	return admission.NewAttributesRecord(obj, nil, gvk, ns, name, gvr, sub, op, nil, false, &user.DefaultInfo{Name: "alice"})
}

func podCreate(p *corev1.Pod) admission.Attributes {
	return attrs(p, podGVK, p.Namespace, p.Name, podsGVR, "", admission.Create)
}

func newPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "a", Image: "nginx"}, {Name: "b", Image: "nginx"}},
		},
	}
}

func mutate(t *testing.T, m admission.MutationInterface, a admission.Attributes) error {
	t.Helper()
	return m.Admit(context.Background(), a, nil)
}

func tokenVolumes(p *corev1.Pod) []corev1.Volume {
	var vs []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") {
			vs = append(vs, v)
		}
	}
	return vs
}

func tokenMounts(c corev1.Container) []corev1.VolumeMount {
	var ms []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if m.MountPath == TokenPath {
			ms = append(ms, m)
		}
	}
	return ms
}

func TestServiceAccount(t *testing.T) {
	p := newPod()
	if err := mutate(t, ServiceAccount{}, podCreate(p)); err != nil {
		t.Fatal(err)
	}
	if p.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName = %q", p.Spec.ServiceAccountName)
	}
	vols := tokenVolumes(p)
	if len(vols) != 1 {
		t.Fatalf("token volumes = %v", p.Spec.Volumes)
	}
	v := vols[0]
	if suffix := strings.TrimPrefix(v.Name, "kube-api-access-"); len(suffix) != 5 {
		t.Errorf("volume name %q, want kube-api-access-xxxxx", v.Name)
	}
	if !apiequality.Semantic.DeepEqual(v, TokenVolume(v.Name)) {
		t.Errorf("volume = %+v, want TokenVolume", v)
	}
	proj := v.Projected
	if proj == nil || len(proj.Sources) != 3 || proj.Sources[0].ServiceAccountToken == nil || proj.Sources[0].ServiceAccountToken.Path != "token" ||
		proj.Sources[1].ConfigMap == nil || proj.Sources[1].ConfigMap.Name != "kube-root-ca.crt" ||
		proj.Sources[2].DownwardAPI == nil || proj.Sources[2].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("projected sources = %+v", proj)
	}
	if e := proj.Sources[0].ServiceAccountToken.ExpirationSeconds; e == nil || *e != 3607 {
		t.Errorf("token expiration = %v", e)
	}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		ms := tokenMounts(c)
		if len(ms) != 1 || ms[0].Name != v.Name || !ms[0].ReadOnly {
			t.Errorf("container %s mounts = %+v", c.Name, c.VolumeMounts)
		}
	}
}

func TestServiceAccountCases(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pod   func() *corev1.Pod
		attrs func(p *corev1.Pod) admission.Attributes
		check func(t *testing.T, p *corev1.Pod)
	}{
		{name: "explicit account kept", pod: func() *corev1.Pod {
			p := newPod()
			p.Spec.ServiceAccountName = "builder"
			return p
		}, check: func(t *testing.T, p *corev1.Pod) {
			if p.Spec.ServiceAccountName != "builder" || len(tokenVolumes(p)) != 1 {
				t.Errorf("sa %q volumes %v", p.Spec.ServiceAccountName, p.Spec.Volumes)
			}
		}},
		{name: "automount disabled", pod: func() *corev1.Pod {
			p := newPod()
			p.Spec.AutomountServiceAccountToken = ptr.To(false)
			return p
		}, check: func(t *testing.T, p *corev1.Pod) {
			if p.Spec.ServiceAccountName != "default" {
				t.Errorf("serviceAccountName = %q", p.Spec.ServiceAccountName)
			}
			if len(p.Spec.Volumes) != 0 {
				t.Errorf("volumes = %v", p.Spec.Volumes)
			}
			for _, c := range p.Spec.Containers {
				if len(c.VolumeMounts) != 0 {
					t.Errorf("container %s mounts %v", c.Name, c.VolumeMounts)
				}
			}
		}},
		{name: "automount explicitly enabled", pod: func() *corev1.Pod {
			p := newPod()
			p.Spec.AutomountServiceAccountToken = ptr.To(true)
			return p
		}, check: func(t *testing.T, p *corev1.Pod) {
			if len(tokenVolumes(p)) != 1 {
				t.Errorf("volumes = %v", p.Spec.Volumes)
			}
		}},
		{name: "mirror pod untouched", pod: func() *corev1.Pod {
			p := newPod()
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
			return p
		}, check: func(t *testing.T, p *corev1.Pod) {
			if p.Spec.ServiceAccountName != "" || len(p.Spec.Volumes) != 0 || len(p.Spec.Containers[0].VolumeMounts) != 0 {
				t.Errorf("mirror pod changed: %+v", p.Spec)
			}
		}},
		{name: "existing volume reused, existing mount kept", pod: func() *corev1.Pod {
			p := newPod()
			p.Spec.Volumes = []corev1.Volume{{Name: "data"}, TokenVolume("kube-api-access-abcde")}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "custom", MountPath: TokenPath}}
			return p
		}, check: func(t *testing.T, p *corev1.Pod) {
			if len(p.Spec.Volumes) != 2 {
				t.Errorf("volumes = %v", p.Spec.Volumes)
			}
			if ms := p.Spec.Containers[0].VolumeMounts; len(ms) != 1 || ms[0].Name != "custom" {
				t.Errorf("container a mounts = %v", ms)
			}
			if ms := tokenMounts(p.Spec.Containers[1]); len(ms) != 1 || ms[0].Name != "kube-api-access-abcde" {
				t.Errorf("container b mounts = %v", ms)
			}
		}},
		{name: "update ignored", pod: newPod, attrs: func(p *corev1.Pod) admission.Attributes {
			return attrs(p, podGVK, p.Namespace, p.Name, podsGVR, "", admission.Update)
		}, check: func(t *testing.T, p *corev1.Pod) {
			if p.Spec.ServiceAccountName != "" || len(p.Spec.Volumes) != 0 {
				t.Errorf("update mutated: %+v", p.Spec)
			}
		}},
		{name: "subresource ignored", pod: newPod, attrs: func(p *corev1.Pod) admission.Attributes {
			return attrs(p, podGVK, p.Namespace, p.Name, podsGVR, "ephemeralcontainers", admission.Create)
		}, check: func(t *testing.T, p *corev1.Pod) {
			if p.Spec.ServiceAccountName != "" || len(p.Spec.Volumes) != 0 {
				t.Errorf("subresource create mutated: %+v", p.Spec)
			}
		}},
		{name: "other resource ignored", pod: newPod, attrs: func(p *corev1.Pod) admission.Attributes {
			return attrs(p, podGVK, p.Namespace, p.Name, corev1.SchemeGroupVersion.WithResource("podtemplates"), "", admission.Create)
		}, check: func(t *testing.T, p *corev1.Pod) {
			if p.Spec.ServiceAccountName != "" {
				t.Errorf("non-pod resource mutated: %+v", p.Spec)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pod()
			a := podCreate(p)
			if tc.attrs != nil {
				a = tc.attrs(p)
			}
			if err := mutate(t, ServiceAccount{}, a); err != nil {
				t.Fatal(err)
			}
			tc.check(t, p)
		})
	}
	t.Run("Handles only create", func(t *testing.T) {
		if !(ServiceAccount{}).Handles(admission.Create) || (ServiceAccount{}).Handles(admission.Update) {
			t.Error("ServiceAccount must handle create only")
		}
	})
	t.Run("non-pod object under pods", func(t *testing.T) {
		d := &appsv1.Deployment{}
		if err := mutate(t, ServiceAccount{}, attrs(d, podGVK, "default", "x", podsGVR, "", admission.Create)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDefaultTolerationSeconds(t *testing.T) {
	notReady := func(tol corev1.Toleration) bool { return tol.Key == corev1.TaintNodeNotReady }
	unreachable := func(tol corev1.Toleration) bool { return tol.Key == corev1.TaintNodeUnreachable }
	count := func(ts []corev1.Toleration, f func(corev1.Toleration) bool) (n int) {
		for _, tol := range ts {
			if f(tol) {
				n++
			}
		}
		return n
	}
	added := corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}
	withKey := func(k string) corev1.Toleration { t := added; t.Key = k; return t }

	for _, tc := range []struct {
		name string
		in   []corev1.Toleration
		want []corev1.Toleration
	}{
		{name: "none", want: []corev1.Toleration{withKey(corev1.TaintNodeNotReady), withKey(corev1.TaintNodeUnreachable)}},
		{name: "own not-ready toleration", in: []corev1.Toleration{
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](10)},
		}, want: []corev1.Toleration{
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](10)},
			withKey(corev1.TaintNodeUnreachable),
		}},
		{name: "own unreachable toleration without effect", in: []corev1.Toleration{
			{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists},
		}, want: []corev1.Toleration{
			{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists},
			withKey(corev1.TaintNodeNotReady),
		}},
		{name: "tolerate everything", in: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			want: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{name: "not-ready NoSchedule does not count", in: []corev1.Toleration{
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		}, want: []corev1.Toleration{
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			withKey(corev1.TaintNodeNotReady), withKey(corev1.TaintNodeUnreachable),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod()
			p.Spec.Tolerations = tc.in
			if err := mutate(t, DefaultTolerationSeconds{Seconds: 300}, podCreate(p)); err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(p.Spec.Tolerations, tc.want) {
				t.Errorf("tolerations = %+v\nwant %+v", p.Spec.Tolerations, tc.want)
			}
		})
	}

	t.Run("idempotent", func(t *testing.T) {
		p := newPod()
		d := DefaultTolerationSeconds{Seconds: 300}
		for range 2 {
			if err := mutate(t, d, podCreate(p)); err != nil {
				t.Fatal(err)
			}
		}
		if count(p.Spec.Tolerations, notReady) != 1 || count(p.Spec.Tolerations, unreachable) != 1 {
			t.Errorf("tolerations duplicated: %+v", p.Spec.Tolerations)
		}
	})
	t.Run("seconds come from the plugin", func(t *testing.T) {
		p := newPod()
		if err := mutate(t, DefaultTolerationSeconds{Seconds: 42}, podCreate(p)); err != nil {
			t.Fatal(err)
		}
		for _, tol := range p.Spec.Tolerations {
			if tol.TolerationSeconds == nil || *tol.TolerationSeconds != 42 {
				t.Errorf("toleration %+v", tol)
			}
		}
	})
	t.Run("update ignored", func(t *testing.T) {
		p := newPod()
		if err := mutate(t, DefaultTolerationSeconds{Seconds: 300}, attrs(p, podGVK, "default", "web", podsGVR, "", admission.Update)); err != nil {
			t.Fatal(err)
		}
		if len(p.Spec.Tolerations) != 0 {
			t.Errorf("update mutated tolerations: %v", p.Spec.Tolerations)
		}
	})
}

func TestPriority(t *testing.T) {
	for _, tc := range []struct {
		name      string
		className string
		priority  *int32
		want      int32
		forbidden bool
	}{
		{name: "default", want: 0},
		{name: "explicit zero", priority: ptr.To[int32](0), want: 0},
		{name: "node critical", className: "system-node-critical", want: 2000001000},
		{name: "cluster critical", className: "system-cluster-critical", want: 2000000000},
		{name: "matching explicit priority", className: "system-cluster-critical", priority: ptr.To[int32](2000000000), want: 2000000000},
		{name: "mismatching priority", className: "system-cluster-critical", priority: ptr.To[int32](5), forbidden: true},
		{name: "priority without class", priority: ptr.To[int32](1000), forbidden: true},
		{name: "unknown class", className: "high", forbidden: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod()
			p.Spec.PriorityClassName = tc.className
			p.Spec.Priority = tc.priority
			err := mutate(t, Priority{Classes: testClasses()}, podCreate(p))
			if tc.forbidden {
				if !apierrors.IsForbidden(err) {
					t.Fatalf("err = %v, want Forbidden", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Spec.Priority == nil || *p.Spec.Priority != tc.want {
				t.Errorf("priority = %v, want %d", p.Spec.Priority, tc.want)
			}
		})
	}
	t.Run("unknown class message", func(t *testing.T) {
		p := newPod()
		p.Spec.PriorityClassName = "high"
		err := mutate(t, Priority{Classes: testClasses()}, podCreate(p))
		if err == nil || !strings.Contains(err.Error(), "no PriorityClass with name high was found") {
			t.Errorf("err = %v", err)
		}
	})
}

// namespaces is a NamespaceGetter over a fixed set of namespaces.
func namespaces(nss ...*corev1.Namespace) NamespaceGetter {
	return func(_ context.Context, name string) (*corev1.Namespace, error) {
		for _, ns := range nss {
			if ns.Name == name {
				return ns, nil
			}
		}
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
}

func ns(name string, phase corev1.NamespacePhase) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
}

func TestNamespaceLifecycle(t *testing.T) {
	l := &NamespaceLifecycle{Namespaces: namespaces(ns("default", corev1.NamespaceActive), ns("app", corev1.NamespaceActive),
		ns("dying", corev1.NamespaceTerminating))}
	nsGVR := corev1.SchemeGroupVersion.WithResource("namespaces")
	nsGVK := corev1.SchemeGroupVersion.WithKind("Namespace")
	cm := func(namespace string, op admission.Operation) admission.Attributes {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: namespace}}
		return attrs(obj, corev1.SchemeGroupVersion.WithKind("ConfigMap"), namespace, "cfg", corev1.SchemeGroupVersion.WithResource("configmaps"), "", op)
	}
	for _, tc := range []struct {
		name  string
		attrs admission.Attributes
		check func(error) bool
		msg   string
	}{
		{name: "create in active namespace", attrs: cm("app", admission.Create), check: isNil},
		{name: "create in missing namespace", attrs: cm("nope", admission.Create), check: apierrors.IsForbidden,
			msg: `namespaces "nope" not found`},
		{name: "create in terminating namespace", attrs: cm("dying", admission.Create), check: apierrors.IsForbidden,
			msg: "unable to create new content in namespace dying because it is being terminated"},
		{name: "update in terminating namespace", attrs: cm("dying", admission.Update), check: isNil},
		{name: "delete in missing namespace", attrs: cm("nope", admission.Delete), check: isNil},
		{name: "event in terminating namespace", attrs: attrs(&corev1.Event{}, corev1.SchemeGroupVersion.WithKind("Event"), "dying", "e",
			corev1.SchemeGroupVersion.WithResource("events"), "", admission.Create), check: isNil},
		{name: "events.k8s.io event in terminating namespace", attrs: attrs(nil, schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "Event"},
			"dying", "e", schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}, "", admission.Create), check: isNil},
		{name: "event in missing namespace", attrs: attrs(&corev1.Event{}, corev1.SchemeGroupVersion.WithKind("Event"), "nope", "e",
			corev1.SchemeGroupVersion.WithResource("events"), "", admission.Create), check: apierrors.IsForbidden},
		{name: "subresource create in terminating namespace", attrs: attrs(nil, schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"},
			"dying", "default", corev1.SchemeGroupVersion.WithResource("serviceaccounts"), "token", admission.Create), check: isNil},
		{name: "cluster-scoped create", attrs: attrs(&corev1.Node{}, corev1.SchemeGroupVersion.WithKind("Node"), "", "n1",
			corev1.SchemeGroupVersion.WithResource("nodes"), "", admission.Create), check: isNil},
		{name: "create namespace", attrs: attrs(ns("new", ""), nsGVK, "", "new", nsGVR, "", admission.Create), check: isNil},
		{name: "delete default", attrs: attrs(nil, nsGVK, "", "default", nsGVR, "", admission.Delete), check: apierrors.IsForbidden,
			msg: "this namespace may not be deleted"},
		{name: "delete kube-system", attrs: attrs(nil, nsGVK, "", "kube-system", nsGVR, "", admission.Delete), check: apierrors.IsForbidden},
		{name: "delete kube-public", attrs: attrs(nil, nsGVK, "", "kube-public", nsGVR, "", admission.Delete), check: apierrors.IsForbidden},
		{name: "delete kube-node-lease", attrs: attrs(nil, nsGVK, "", "kube-node-lease", nsGVR, "", admission.Delete), check: isNil},
		{name: "delete app namespace", attrs: attrs(nil, nsGVK, "", "app", nsGVR, "", admission.Delete), check: isNil},
		{name: "finalize default", attrs: attrs(nil, nsGVK, "", "default", nsGVR, "finalize", admission.Delete), check: isNil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := l.Validate(context.Background(), tc.attrs, nil)
			if !tc.check(err) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %q, want it to contain %q", err, tc.msg)
			}
		})
	}

	t.Run("lookup failure is internal", func(t *testing.T) {
		broken := &NamespaceLifecycle{Namespaces: func(context.Context, string) (*corev1.Namespace, error) {
			return nil, errors.New("etcd down")
		}}
		err := broken.Validate(context.Background(), cm("app", admission.Create), nil)
		if !apierrors.IsInternalError(err) {
			t.Errorf("err = %v, want InternalError", err)
		}
	})
	t.Run("Handles", func(t *testing.T) {
		for op, want := range map[admission.Operation]bool{admission.Create: true, admission.Delete: true, admission.Update: false, admission.Connect: false} {
			if got := l.Handles(op); got != want {
				t.Errorf("Handles(%s) = %v", op, got)
			}
		}
	})
}

func isNil(err error) bool { return err == nil }

func TestChain(t *testing.T) {
	chain := Chain(namespaces(ns("default", corev1.NamespaceActive)), &NodeRestriction{}, ServiceAccount{}, testClasses())
	p := newPod()
	a := podCreate(p)
	if err := chain.(admission.MutationInterface).Admit(context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	if err := chain.(admission.ValidationInterface).Validate(context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	if p.Spec.ServiceAccountName != "default" || len(tokenVolumes(p)) != 1 || len(p.Spec.Tolerations) != 2 ||
		p.Spec.Priority == nil || *p.Spec.Priority != 0 {
		t.Errorf("chain did not run every mutating plugin: %+v", p.Spec)
	}

	orphan := newPod()
	orphan.Namespace = "gone"
	if err := chain.(admission.ValidationInterface).Validate(context.Background(), podCreate(orphan), nil); !apierrors.IsForbidden(err) {
		t.Errorf("chain validate in missing namespace: %v", err)
	}
}

// The account's automountServiceAccountToken applies when the pod says nothing; the pod's
// own setting wins.
func TestServiceAccountAutomountFromAccount(t *testing.T) {
	accounts := func(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
		switch name {
		case "nomount":
			return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}, AutomountServiceAccountToken: ptr.To(false)}, nil
		case "default":
			return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
		}
		return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
	}
	for _, tc := range []struct {
		account string
		pod     *bool
		want    int
	}{
		{"nomount", nil, 0},
		{"nomount", ptr.To(true), 1},
		{"default", nil, 1},
		{"default", ptr.To(false), 0},
		{"missing", nil, 1}, // not readable yet: mounted, the default
	} {
		p := newPod()
		p.Spec.ServiceAccountName = tc.account
		p.Spec.AutomountServiceAccountToken = tc.pod
		if err := mutate(t, ServiceAccount{Accounts: accounts}, podCreate(p)); err != nil {
			t.Fatal(err)
		}
		if got := len(tokenVolumes(p)); got != tc.want {
			t.Errorf("account %s, pod automount %v: %d token volumes, want %d", tc.account, tc.pod, got, tc.want)
		}
	}
}

// A pod that names no image pull secrets gets its account's (even when it mounts no token); one
// that names its own keeps them.
func TestServiceAccountImagePullSecrets(t *testing.T) {
	accounts := func(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}, AutomountServiceAccountToken: ptr.To(false),
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}}}, nil
	}
	p := newPod()
	if err := mutate(t, ServiceAccount{Accounts: accounts}, podCreate(p)); err != nil {
		t.Fatal(err)
	}
	if want := []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}}; !reflect.DeepEqual(p.Spec.ImagePullSecrets, want) {
		t.Errorf("pull secrets %v, want the account's %v", p.Spec.ImagePullSecrets, want)
	}
	own := newPod()
	own.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "mine"}}
	if err := mutate(t, ServiceAccount{Accounts: accounts}, podCreate(own)); err != nil {
		t.Fatal(err)
	}
	if len(own.Spec.ImagePullSecrets) != 1 || own.Spec.ImagePullSecrets[0].Name != "mine" {
		t.Errorf("the pod's own pull secrets became %v", own.Spec.ImagePullSecrets)
	}
}

func TestTaintNodesByCondition(t *testing.T) {
	nodeGVR, nodeGVK := corev1.SchemeGroupVersion.WithResource("nodes"), corev1.SchemeGroupVersion.WithKind("Node")
	cp := corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{cp}}}
	if err := mutate(t, TaintNodesByCondition{}, attrs(n, nodeGVK, "", "n1", nodeGVR, "", admission.Create)); err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 2 || n.Spec.Taints[0] != cp || n.Spec.Taints[1] != notReady {
		t.Errorf("taints after create: %v", n.Spec.Taints)
	}
	// Already there: not twice.
	if err := mutate(t, TaintNodesByCondition{}, attrs(n, nodeGVK, "", "n1", nodeGVR, "", admission.Create)); err != nil || len(n.Spec.Taints) != 2 {
		t.Errorf("taints after a second admission: %v %v", n.Spec.Taints, err)
	}
	if (TaintNodesByCondition{}).Handles(admission.Update) {
		t.Error("TaintNodesByCondition handles updates: a node's Ready taint is the lifecycle controller's")
	}
}

func TestStorageObjectInUseProtection(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data", Finalizers: []string{"example.com/x"}}}
	if err := mutate(t, StorageObjectInUseProtection{}, attrs(pvc, corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), "default", "data",
		corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), "", admission.Create)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"example.com/x", "kubernetes.io/pvc-protection"}; !reflect.DeepEqual(pvc.Finalizers, want) {
		t.Errorf("claim finalizers %v, want %v", pvc.Finalizers, want)
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1", Finalizers: []string{"kubernetes.io/pv-protection"}}}
	if err := mutate(t, StorageObjectInUseProtection{}, attrs(pv, corev1.SchemeGroupVersion.WithKind("PersistentVolume"), "", "pv1",
		corev1.SchemeGroupVersion.WithResource("persistentvolumes"), "", admission.Create)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"kubernetes.io/pv-protection"}; !reflect.DeepEqual(pv.Finalizers, want) {
		t.Errorf("volume finalizers %v, want %v (not twice)", pv.Finalizers, want)
	}
}
