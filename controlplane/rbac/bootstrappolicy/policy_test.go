package bootstrappolicy

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The fixtures are upstream's (testdata/README.md): a kind: List of the objects sorted by
// name (namespaced ones by namespace, then name), as the API server would serialize them.

// asList renders objects as upstream's fixtures: a v1 List, keys sorted, YAML.
func asList(t *testing.T, items []any) string {
	t.Helper()
	j, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}, "items": items})
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		t.Fatal(err)
	}
	return string(y)
}

func byName[T any](objs []T, name func(*T) string) []T {
	objs = slices.Clone(objs)
	slices.SortStableFunc(objs, func(a, b T) int { return cmp.Compare(name(&a), name(&b)) })
	return objs
}

func clusterRoleItems(roles []rbacv1.ClusterRole) []any {
	var items []any
	for _, r := range byName(roles, func(r *rbacv1.ClusterRole) string { return r.Name }) {
		r.APIVersion, r.Kind = rbacv1.SchemeGroupVersion.String(), "ClusterRole"
		items = append(items, r)
	}
	return items
}

func clusterRoleBindingItems(bindings []rbacv1.ClusterRoleBinding) []any {
	var items []any
	for _, b := range byName(bindings, func(b *rbacv1.ClusterRoleBinding) string { return b.Name }) {
		b.APIVersion, b.Kind = rbacv1.SchemeGroupVersion.String(), "ClusterRoleBinding"
		items = append(items, b)
	}
	return items
}

func roleItems(byNamespace map[string][]rbacv1.Role) []any {
	var items []any
	for _, ns := range slices.Sorted(maps.Keys(byNamespace)) {
		for _, r := range byName(byNamespace[ns], func(r *rbacv1.Role) string { return r.Name }) {
			r.APIVersion, r.Kind = rbacv1.SchemeGroupVersion.String(), "Role"
			items = append(items, r)
		}
	}
	return items
}

func roleBindingItems(byNamespace map[string][]rbacv1.RoleBinding) []any {
	var items []any
	for _, ns := range slices.Sorted(maps.Keys(byNamespace)) {
		for _, b := range byName(byNamespace[ns], func(b *rbacv1.RoleBinding) string { return b.Name }) {
			b.APIVersion, b.Kind = rbacv1.SchemeGroupVersion.String(), "RoleBinding"
			items = append(items, b)
		}
	}
	return items
}

// lineDiff describes where got and want differ first, with a few lines of context, or
// returns "" when they are equal.
func lineDiff(got, want string) string {
	if got == want {
		return ""
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d (got %d lines, want %d):\n", i+1, len(g), len(w))
	from := max(0, i-6)
	for k := from; k < i; k++ {
		fmt.Fprintf(&b, "  %s\n", g[k])
	}
	for k := i; k < min(len(w), i+8); k++ {
		fmt.Fprintf(&b, "- %s\n", w[k])
	}
	for k := i; k < min(len(g), i+8); k++ {
		fmt.Fprintf(&b, "+ %s\n", g[k])
	}
	return b.String()
}

func checkGolden(t *testing.T, file string, items []any) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	if d := lineDiff(asList(t, items), string(want)); d != "" {
		t.Errorf("policy differs from upstream's testdata/%s (- upstream, + skiff):\n%s", file, d)
	}
}

func TestClusterRolesMatchUpstream(t *testing.T) {
	checkGolden(t, "cluster-roles.yaml", clusterRoleItems(ClusterRoles()))
}

func TestClusterRoleBindingsMatchUpstream(t *testing.T) {
	checkGolden(t, "cluster-role-bindings.yaml", clusterRoleBindingItems(ClusterRoleBindings()))
}

func TestNamespaceRolesMatchUpstream(t *testing.T) {
	checkGolden(t, "namespace-roles.yaml", roleItems(NamespaceRoles()))
}

func TestNamespaceRoleBindingsMatchUpstream(t *testing.T) {
	checkGolden(t, "namespace-role-bindings.yaml", roleBindingItems(NamespaceRoleBindings()))
}

func TestControllerRolesMatchUpstream(t *testing.T) {
	checkGolden(t, "controller-roles.yaml", clusterRoleItems(ControllerRoles()))
}

func TestControllerRoleBindingsMatchUpstream(t *testing.T) {
	checkGolden(t, "controller-role-bindings.yaml", clusterRoleBindingItems(ControllerRoleBindings()))
}

// The comparison must see a change of a single verb, and of the order of rules.
func TestGoldenComparisonIsStrict(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "cluster-roles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mutations := map[string]func([]rbacv1.ClusterRole){
		"verb dropped": func(rs []rbacv1.ClusterRole) {
			for i := range rs {
				if rs[i].Name == "system:node" {
					rs[i].Rules[0].Verbs = nil
				}
			}
		},
		"rules swapped": func(rs []rbacv1.ClusterRole) {
			for i := range rs {
				if rs[i].Name == "system:kube-scheduler" {
					rs[i].Rules[1], rs[i].Rules[2] = rs[i].Rules[2], rs[i].Rules[1]
				}
			}
		},
		"label dropped": func(rs []rbacv1.ClusterRole) { delete(rs[0].Labels, BootstrappingLabel) },
	}
	for name, mutate := range mutations {
		roles := ClusterRoles()
		mutate(roles)
		if lineDiff(asList(t, clusterRoleItems(roles)), string(want)) == "" {
			t.Errorf("%s: the comparison did not notice", name)
		}
	}
}

func TestNodeRulesAreSystemNode(t *testing.T) {
	for _, r := range ClusterRoles() {
		if r.Name == "system:node" {
			if !reflect.DeepEqual(r.Rules, NodeRules()) {
				t.Error("system:node's rules are not NodeRules()")
			}
			return
		}
	}
	t.Error("no ClusterRole system:node")
}

// Every call returns fresh objects: a caller changing one must not change the next call's.
func TestFreshObjects(t *testing.T) {
	a := ClusterRoles()
	a[1].Rules[0].Verbs[0] = "x"
	a[1].Labels["x"] = "y"
	b := ClusterRoles()
	if b[1].Rules[0].Verbs[0] == "x" || b[1].Labels["x"] == "y" {
		t.Error("ClusterRoles shares state between calls")
	}
	r := read
	_ = rules(rule(r...).groups(core).resources("b", "a"))
	if !slices.Equal(read, []string{"get", "list", "watch"}) {
		t.Errorf("rules changed a verb preset: %v", read)
	}
}

func TestRulePanicsOnMalformed(t *testing.T) {
	for name, r := range map[string]pr{
		"no verbs":          rule().groups(core).resources("pods"),
		"no resources":      rule("get").groups(core),
		"no groups":         rule("get").resources("pods"),
		"urls and resource": rule("get").groups(core).resources("pods").urls("/x"),
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			rules(r)
		}()
	}
}

// Unique names in every set, and the metadata Reconcile relies on.
func TestNamesAndMetadata(t *testing.T) {
	seen := map[string]bool{}
	check := func(kind, ns, name string, labels, annotations map[string]string) {
		key := kind + " " + ns + "/" + name
		if seen[key] {
			t.Errorf("%s twice", key)
		}
		seen[key] = true
		if labels[BootstrappingLabel] != "rbac-defaults" || annotations[rbacv1.AutoUpdateAnnotationKey] != "true" {
			t.Errorf("%s: labels %v annotations %v", key, labels, annotations)
		}
	}
	for _, r := range slices.Concat(ClusterRoles(), ControllerRoles(), SkiffClusterRoles()) {
		check("ClusterRole", "", r.Name, r.Labels, r.Annotations)
	}
	for _, b := range slices.Concat(ClusterRoleBindings(), ControllerRoleBindings(), SkiffClusterRoleBindings()) {
		check("ClusterRoleBinding", "", b.Name, b.Labels, b.Annotations)
	}
	for _, m := range []map[string][]rbacv1.Role{NamespaceRoles(), SkiffRoles()} {
		for ns, rs := range m {
			for _, r := range rs {
				if r.Namespace != ns {
					t.Errorf("Role %s/%s listed under %s", r.Namespace, r.Name, ns)
				}
				check("Role", ns, r.Name, r.Labels, r.Annotations)
			}
		}
	}
	for _, m := range []map[string][]rbacv1.RoleBinding{NamespaceRoleBindings(), SkiffRoleBindings()} {
		for ns, bs := range m {
			for _, b := range bs {
				if b.Namespace != ns {
					t.Errorf("RoleBinding %s/%s listed under %s", b.Namespace, b.Name, ns)
				}
				check("RoleBinding", ns, b.Name, b.Labels, b.Annotations)
			}
		}
	}
}
