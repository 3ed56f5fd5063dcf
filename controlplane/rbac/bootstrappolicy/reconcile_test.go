package bootstrappolicy

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-helpers/auth/rbac/validation"
)

func testLogger(t *testing.T) (*slog.Logger, *bytes.Buffer) {
	t.Helper()
	var b bytes.Buffer
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

func reconcile(t *testing.T, c *fake.Clientset) string {
	t.Helper()
	log, out := testLogger(t)
	if err := Reconcile(context.Background(), c, log); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return out.String()
}

// writes is the fake's create/update/patch/delete actions, as "verb resource ns/name".
func writes(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		var name string
		switch a := a.(type) {
		case k8stesting.CreateAction:
			name = objectKey(a.GetObject())
		case k8stesting.UpdateAction:
			name = objectKey(a.GetObject())
		case k8stesting.PatchAction:
			name = objectName(a.GetNamespace(), a.GetName())
		case k8stesting.DeleteAction:
			name = objectName(a.GetNamespace(), a.GetName())
		default:
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource+" "+name)
	}
	return out
}

func objectKey(o runtime.Object) string {
	m, ok := o.(metav1.Object)
	if !ok {
		return "?"
	}
	return objectName(m.GetNamespace(), m.GetName())
}

func countRoles(m map[string][]rbacv1.Role) (n int) {
	for _, rs := range m {
		n += len(rs)
	}
	return n
}

func countBindings(m map[string][]rbacv1.RoleBinding) (n int) {
	for _, bs := range m {
		n += len(bs)
	}
	return n
}

func TestReconcileEmptyClusterCreatesEverything(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	out := reconcile(t, c)

	wantRoles := slices.Concat(ClusterRoles(), ControllerRoles(), SkiffClusterRoles())
	crs, err := c.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(crs.Items) != len(wantRoles) {
		t.Errorf("%d ClusterRoles, want %d", len(crs.Items), len(wantRoles))
	}
	for _, want := range wantRoles {
		got, err := c.RbacV1().ClusterRoles().Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("ClusterRole %s: %v", want.Name, err)
			continue
		}
		if !reflect.DeepEqual(got.Rules, want.Rules) || !reflect.DeepEqual(got.AggregationRule, want.AggregationRule) ||
			!reflect.DeepEqual(got.Labels, want.Labels) || !reflect.DeepEqual(got.Annotations, want.Annotations) {
			t.Errorf("ClusterRole %s stored as %+v, want %+v", want.Name, got, want)
		}
	}

	wantBindings := slices.Concat(ClusterRoleBindings(), ControllerRoleBindings(), SkiffClusterRoleBindings())
	crbs, err := c.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(crbs.Items) != len(wantBindings) {
		t.Errorf("%d ClusterRoleBindings, want %d", len(crbs.Items), len(wantBindings))
	}
	for _, want := range wantBindings {
		got, err := c.RbacV1().ClusterRoleBindings().Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("ClusterRoleBinding %s: %v", want.Name, err)
			continue
		}
		if got.RoleRef != want.RoleRef || !slices.Equal(got.Subjects, want.Subjects) {
			t.Errorf("ClusterRoleBinding %s stored as %+v, want %+v", want.Name, got, want)
		}
	}

	rs, err := c.RbacV1().Roles("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := countRoles(NamespaceRoles()) + countRoles(SkiffRoles()); len(rs.Items) != want {
		t.Errorf("%d Roles, want %d", len(rs.Items), want)
	}
	rbs, err := c.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := countBindings(NamespaceRoleBindings()) + countBindings(SkiffRoleBindings()); len(rbs.Items) != want {
		t.Errorf("%d RoleBindings, want %d", len(rbs.Items), want)
	}
	for _, ns := range []string{"kube-system", "kube-public"} {
		if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s: %v", ns, err)
		}
	}

	creates := 0
	for _, w := range writes(c) {
		if strings.HasPrefix(w, "create") && !strings.HasPrefix(w, "create namespaces") {
			creates++
		}
	}
	if all := len(wantRoles) + len(wantBindings) + len(rs.Items) + len(rbs.Items); creates != all {
		t.Errorf("%d creates, want %d", creates, all)
	}
	if n := strings.Count(out, "created default RBAC object"); n != creates {
		t.Errorf("%d creations logged, want %d:\n%s", n, creates, out)
	}
}

func find[T any](objs []T, name func(T) string, want string) T {
	for _, o := range objs {
		if name(o) == want {
			return o
		}
	}
	panic("no " + want)
}

func clusterRoleNamed(name string) rbacv1.ClusterRole {
	return find(slices.Concat(ClusterRoles(), ControllerRoles(), SkiffClusterRoles()),
		func(r rbacv1.ClusterRole) string { return r.Name }, name)
}

func TestReconcileRestoresMissingRules(t *testing.T) {
	ctx := context.Background()
	// system:aggregate-to-view lacks a rule, view its aggregation selector, a binding its
	// subject; an extra rule and an extra subject stay.
	partial := clusterRoleNamed("system:aggregate-to-view")
	partial.Rules = slices.Delete(partial.Rules, 2, 3)
	extra := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
	partial.Rules = append(partial.Rules, extra)
	view := clusterRoleNamed("view")
	view.AggregationRule = nil
	view.Rules = []rbacv1.PolicyRule{extra}
	binding := find(SkiffClusterRoleBindings(), func(b rbacv1.ClusterRoleBinding) string { return b.Name }, "skiff:node-proxier")
	other := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "someone"}
	binding.Subjects = []rbacv1.Subject{other}
	c := fake.NewClientset(&partial, &view, &binding)

	out := reconcile(t, c)

	got, err := c.RbacV1().ClusterRoles().Get(ctx, "system:aggregate-to-view", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The missing rule comes back as what was missing of it, one verb a rule, as upstream.
	want := clusterRoleNamed("system:aggregate-to-view")
	if covers, missing := validation.Covers(got.Rules, want.Rules); !covers {
		t.Errorf("system:aggregate-to-view still lacks %v", missing)
	}
	if !slices.ContainsFunc(got.Rules, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, extra) }) {
		t.Errorf("system:aggregate-to-view lost its extra rule: %v", got.Rules)
	}
	if len(got.Rules) != len(partial.Rules)+len(want.Rules[2].Verbs) {
		t.Errorf("system:aggregate-to-view has %d rules, want %d", len(got.Rules), len(partial.Rules)+len(want.Rules[2].Verbs))
	}

	gotView, err := c.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotView.AggregationRule, clusterRoleNamed("view").AggregationRule) {
		t.Errorf("view's aggregation rule is %+v", gotView.AggregationRule)
	}

	gotBinding, err := c.RbacV1().ClusterRoleBindings().Get(ctx, "skiff:node-proxier", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if wantSubjects := []rbacv1.Subject{other, group("system:nodes")}; !slices.Equal(gotBinding.Subjects, wantSubjects) {
		t.Errorf("skiff:node-proxier's subjects are %v, want %v", gotBinding.Subjects, wantSubjects)
	}

	for _, name := range []string{"system:aggregate-to-view", "view", "skiff:node-proxier"} {
		if !strings.Contains(out, `msg="updated default RBAC object"`) || !strings.Contains(out, "name="+name+" ") {
			t.Errorf("no update of %s logged:\n%s", name, out)
		}
	}
}

func TestReconcileLeavesProtectedAlone(t *testing.T) {
	ctx := context.Background()
	edit := clusterRoleNamed("system:aggregate-to-edit")
	edit.Annotations[rbacv1.AutoUpdateAnnotationKey] = "false"
	delete(edit.Labels, BootstrappingLabel)
	edit.Rules = edit.Rules[:1]
	bgp := SkiffRoles()["kube-system"][0]
	bgp.Annotations[rbacv1.AutoUpdateAnnotationKey] = "false"
	bgp.Rules = nil
	binding := find(ClusterRoleBindings(), func(b rbacv1.ClusterRoleBinding) string { return b.Name }, "system:basic-user")
	binding.Annotations[rbacv1.AutoUpdateAnnotationKey] = "false"
	binding.Subjects = nil
	c := fake.NewClientset(edit.DeepCopy(), bgp.DeepCopy(), binding.DeepCopy())

	out := reconcile(t, c)

	gotEdit, err := c.RbacV1().ClusterRoles().Get(ctx, edit.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotEdit.Rules, edit.Rules) || !reflect.DeepEqual(gotEdit.Labels, edit.Labels) {
		t.Errorf("protected ClusterRole changed: %+v", gotEdit)
	}
	gotBGP, err := c.RbacV1().Roles("kube-system").Get(ctx, bgp.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gotBGP.Rules) != 0 {
		t.Errorf("protected Role changed: %+v", gotBGP)
	}
	gotBinding, err := c.RbacV1().ClusterRoleBindings().Get(ctx, binding.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gotBinding.Subjects) != 0 {
		t.Errorf("protected ClusterRoleBinding changed: %+v", gotBinding)
	}
	for _, w := range writes(c) {
		for _, name := range []string{"clusterroles " + edit.Name, "roles kube-system/" + bgp.Name, "clusterrolebindings " + binding.Name} {
			if strings.HasSuffix(w, " "+name) {
				t.Errorf("wrote a protected object: %s", w)
			}
		}
	}
	if n := strings.Count(out, "not reconciling RBAC object annotated autoupdate=false"); n != 3 {
		t.Errorf("%d protected objects logged, want 3:\n%s", n, out)
	}
}

func TestReconcileTwiceWritesOnce(t *testing.T) {
	c := fake.NewClientset()
	reconcile(t, c)
	if len(writes(c)) == 0 {
		t.Fatal("the first run wrote nothing")
	}
	c.ClearActions()
	if out := reconcile(t, c); out != "" {
		t.Errorf("the second run logged:\n%s", out)
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("the second run wrote: %v", w)
	}
	if len(c.Actions()) == 0 {
		t.Error("the second run did not even read")
	}
}

func TestReconcileStopsWhenCancelled(t *testing.T) {
	c := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	log, _ := testLogger(t)
	if err := Reconcile(ctx, c, log); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("Reconcile = %v, want context canceled", err)
	}
	if len(c.Actions()) != 0 {
		t.Errorf("a cancelled run made requests: %v", c.Actions())
	}
}
