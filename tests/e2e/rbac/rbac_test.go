package rbac

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// kubectl runs the real kubectl 1.33 with a kubeconfig, returning output and error.
type kubectl struct {
	t          *testing.T
	bin        string
	kubeconfig string
	extra      []string
}

func (k kubectl) run(args ...string) (string, error) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, append(append([]string{"--kubeconfig", k.kubeconfig}, k.extra...), args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ok runs kubectl and fails the test if it fails.
func (k kubectl) ok(args ...string) string {
	k.t.Helper()
	out, err := k.run(args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// eventually runs kubectl until its output contains want (informers feed the authorizer,
// so a new binding applies within moments, not at once).
func (k kubectl) eventually(want string, args ...string) {
	k.t.Helper()
	framework.Eventually(k.t, 10*time.Second, "kubectl "+strings.Join(args, " "), func() (bool, string) {
		out, _ := k.run(args...)
		return strings.Contains(out, want), out
	})
}

// user writes a kubeconfig with a client certificate for name in groups.
func user(t *testing.T, s *framework.Server, name string, groups ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "user.kubeconfig")
	args := []string{"kubeconfig", "--data-dir", s.Dir, "--user", name, "--out", out, "--server", fmt.Sprintf("https://127.0.0.1:%d", s.Port)}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	if b, err := exec.Command(framework.Binary(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("skiff kubeconfig: %v\n%s", err, b)
	}
	return out
}

func TestRBAC(t *testing.T) {
	s := framework.StartServer(t)
	bin := framework.Kubectl(t, 33)
	admin := kubectl{t: t, bin: bin, kubeconfig: s.Kubeconfig}

	t.Run("bootstrap policy", func(t *testing.T) {
		out := admin.ok("get", "clusterroles")
		for _, r := range []string{"cluster-admin", "admin", "edit", "view", "system:node", "system:kube-scheduler",
			"system:controller:deployment-controller", "system:discovery", "system:public-info-viewer"} {
			if !strings.Contains(out, r+" ") {
				t.Errorf("clusterrole %s missing:\n%s", r, out)
			}
		}
		out = admin.ok("get", "clusterrolebinding", "cluster-admin", "-o", "wide")
		if !strings.Contains(out, "ClusterRole/cluster-admin") || !strings.Contains(out, "system:masters") {
			t.Errorf("cluster-admin binding:\n%s", out)
		}
		admin.ok("get", "role", "-n", "kube-system", "system:controller:bootstrap-signer")
		// view is aggregated from system:aggregate-to-view by the controller.
		admin.eventually("pods", "get", "clusterrole", "view", "-o", "jsonpath={.rules[*].resources}")
	})

	t.Run("anonymous", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/livez", "/readyz", "/version"} {
			if code := s.AnonymousStatus(t, p); code != 200 {
				t.Errorf("anonymous GET %s: HTTP %d, want 200", p, code)
			}
		}
		for _, p := range []string{"/api/v1/namespaces", "/api/v1/namespaces/default/secrets", "/metrics", "/apis"} {
			if code := s.AnonymousStatus(t, p); code != 403 {
				t.Errorf("anonymous GET %s: HTTP %d, want 403 as upstream", p, code)
			}
		}
	})

	admin.ok("create", "namespace", "team")
	admin.ok("create", "serviceaccount", "app", "-n", "team")
	admin.ok("create", "secret", "generic", "db", "-n", "team", "--from-literal=password=hunter2")
	token := saToken(t, s.Client(t), "team", "app")
	sa := kubectl{t: t, bin: bin, kubeconfig: tokenKubeconfig(t, s, token)}

	t.Run("a pod's token is forbidden by default", func(t *testing.T) {
		out, err := sa.run("get", "secrets", "-n", "team")
		want := `User "system:serviceaccount:team:app" cannot list resource "secrets" in API group "" in the namespace "team"`
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("list secrets with a service account token: %v\n%s\nwant %q", err, out, want)
		}
		if out, err := sa.run("delete", "node", "anything"); err == nil || !strings.Contains(out, `cannot delete resource "nodes"`) {
			t.Fatalf("delete node: %v\n%s", err, out)
		}
		sa.ok("auth", "whoami") // system:basic-user lets anyone ask who they are
		// TokenReview says who the token is, groups as authentication gives them.
		tr, err := s.Client(t).AuthenticationV1().TokenReviews().Create(context.Background(),
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil || !tr.Status.Authenticated || tr.Status.User.Username != "system:serviceaccount:team:app" ||
			!slices.Contains(tr.Status.User.Groups, "system:authenticated") || !slices.Contains(tr.Status.User.Groups, "system:serviceaccounts:team") {
			t.Errorf("TokenReview: %+v, %v", tr.Status, err)
		}
		if tr, err := s.Client(t).AuthenticationV1().TokenReviews().Create(context.Background(),
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token + "x"}}, metav1.CreateOptions{}); err != nil || tr.Status.Authenticated {
			t.Errorf("TokenReview of a forged token: %+v, %v", tr, err)
		}
	})

	t.Run("a RoleBinding grants what it says and nothing else", func(t *testing.T) {
		admin.ok("create", "role", "pod-reader", "-n", "team", "--verb=get,list,watch", "--resource=pods")
		admin.ok("create", "rolebinding", "app-reads-pods", "-n", "team", "--role=pod-reader", "--serviceaccount=team:app")
		sa.eventually("No resources found in team namespace", "get", "pods", "-n", "team")
		for _, args := range [][]string{
			{"get", "pods", "-n", "default"},
			{"get", "secrets", "-n", "team"},
			{"delete", "pod", "x", "-n", "team"},
			{"get", "pods", "--all-namespaces"},
		} {
			if out, err := sa.run(args...); err == nil || !strings.Contains(out, "forbidden") {
				t.Errorf("kubectl %v: %v\n%s, want forbidden", args, err, out)
			}
		}
		if out := admin.ok("get", "rolebinding", "app-reads-pods", "-n", "team", "-o", "wide"); !strings.Contains(out, "Role/pod-reader") || !strings.Contains(out, "team/app") {
			t.Errorf("rolebinding printer:\n%s", out)
		}
	})

	t.Run("auth can-i", func(t *testing.T) {
		as := []string{"--as", "system:serviceaccount:team:app"}
		if out := admin.ok(append([]string{"auth", "can-i", "list", "pods", "-n", "team"}, as...)...); strings.TrimSpace(out) != "yes" {
			t.Errorf("can-i list pods: %q", out)
		}
		if out, _ := admin.run(append([]string{"auth", "can-i", "delete", "pods", "-n", "team"}, as...)...); strings.TrimSpace(out) != "no" {
			t.Errorf("can-i delete pods: %q", out)
		}
		if out, _ := sa.run("auth", "can-i", "get", "secrets", "-n", "team"); strings.TrimSpace(out) != "no" {
			t.Errorf("self can-i get secrets: %q", out)
		}
		out := sa.ok("auth", "can-i", "--list", "-n", "team")
		if !strings.Contains(out, "pods") || !strings.Contains(out, "[get list watch]") || strings.Contains(out, "secrets") {
			t.Errorf("can-i --list:\n%s", out)
		}
	})

	t.Run("escalation is refused", func(t *testing.T) {
		alice := kubectl{t: t, bin: bin, kubeconfig: user(t, s, "alice", "devs")}
		if out, err := alice.run("get", "pods", "-n", "team"); err == nil || !strings.Contains(out, `User "alice" cannot list resource "pods"`) {
			t.Fatalf("alice before any binding: %v\n%s", err, out)
		}
		admin.ok("create", "role", "role-manager", "-n", "team", "--verb=create,get,list", "--resource=roles,rolebindings,pods")
		admin.ok("create", "rolebinding", "devs-manage-roles", "-n", "team", "--role=role-manager", "--group=devs")
		alice.eventually("No resources found", "get", "pods", "-n", "team")
		// What alice holds she may hand on...
		alice.ok("create", "role", "pod-lister", "-n", "team", "--verb=list", "--resource=pods")
		alice.ok("create", "rolebinding", "bob-lists-pods", "-n", "team", "--role=pod-lister", "--user=bob")
		// ...and nothing more.
		out, err := alice.run("create", "role", "secret-reader", "-n", "team", "--verb=get", "--resource=secrets")
		if err == nil || !strings.Contains(out, "is attempting to grant RBAC permissions not currently held") || !strings.Contains(out, `Resources:["secrets"]`) {
			t.Errorf("role beyond alice's rights: %v\n%s", err, out)
		}
		out, err = alice.run("create", "rolebinding", "alice-admin", "-n", "team", "--clusterrole=cluster-admin", "--user=alice")
		if err == nil || !strings.Contains(out, "is attempting to grant RBAC permissions not currently held") {
			t.Errorf("binding cluster-admin: %v\n%s", err, out)
		}
		// Impersonation is authorized too: alice may not act as anyone else (k8s.io/apiserver
		// v0.37 words it after constrained impersonation: "cannot impersonate-on:user-info:list").
		if out, err := alice.run("get", "pods", "-n", "team", "--as", "bob"); err == nil || !strings.Contains(out, `User "alice" cannot impersonate`) {
			t.Errorf("alice impersonating bob: %v\n%s", err, out)
		}
		// bind on a role lets one bind it without holding it.
		admin.ok("create", "role", "binder", "-n", "team", "--verb=bind", "--resource=clusterroles", "--resource-name=edit")
		admin.ok("create", "rolebinding", "alice-binds-edit", "-n", "team", "--role=binder", "--user=alice")
		alice.eventually("created", "create", "rolebinding", "bob-edits", "-n", "team", "--clusterrole=edit", "--user=bob")
	})

	t.Run("aggregation", func(t *testing.T) {
		admin.ok("apply", "-f", writeFile(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widgets-view
  labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
rules:
- apiGroups: [example.com]
  resources: [widgets]
  verbs: [get, list, watch]
`))
		admin.eventually("widgets", "get", "clusterrole", "view", "-o", "jsonpath={.rules[*].resources}")
		admin.eventually("widgets", "get", "clusterrole", "admin", "-o", "jsonpath={.rules[*].resources}") // admin aggregates edit aggregates view
		admin.ok("delete", "clusterrole", "widgets-view")
		framework.Eventually(t, 10*time.Second, "widgets gone from view", func() (bool, string) {
			out, _ := admin.run("get", "clusterrole", "view", "-o", "jsonpath={.rules[*].resources}")
			return !strings.Contains(out, "widgets"), out
		})
	})

	t.Run("validation", func(t *testing.T) {
		out, err := admin.run("create", "-f", writeFile(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bad, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Secret, name: x}
subjects: [{kind: Robot, name: r}]
`))
		if err == nil || !strings.Contains(out, `roleRef.kind: Unsupported value: "Secret"`) || !strings.Contains(out, `subjects[0].kind: Unsupported value: "Robot"`) {
			t.Errorf("bad binding: %v\n%s", err, out)
		}
		out, err = admin.run("patch", "rolebinding", "app-reads-pods", "-n", "team", "--type=merge", "-p", `{"roleRef":{"name":"other"}}`)
		if err == nil || !strings.Contains(out, "cannot change roleRef") {
			t.Errorf("changing roleRef: %v\n%s", err, out)
		}
	})

	t.Run("node credentials", func(t *testing.T) {
		for _, n := range []string{"n1", "n2"} {
			admin.ok("apply", "-f", writeFile(t, fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n", n)))
			admin.ok("create", "secret", "generic", "secret-"+n, "-n", "team", "--from-literal=k=v")
			admin.ok("apply", "-f", writeFile(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: pod-%[1]s, namespace: team}
spec:
  nodeName: %[1]s
  containers:
  - name: c
    image: skiff/testserver:1
    env:
    - name: S
      valueFrom: {secretKeyRef: {name: secret-%[1]s, key: k}}
`, n)))
		}
		n1 := kubectl{t: t, bin: bin, kubeconfig: user(t, s, "system:node:n1", "system:nodes")}
		n1.eventually("secret-n1", "get", "secret", "secret-n1", "-n", "team")
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"get", "secret", "secret-n2", "-n", "team"}, `no relationship found between node 'n1' and this object`},
			{[]string{"get", "secrets", "-n", "team"}, "forbidden"},
			{[]string{"label", "node", "n2", "x=y"}, `node "n1" is not allowed to modify node "n2"`},
			{[]string{"label", "node", "n1", "node-restriction.kubernetes.io/pool=a"}, "is not allowed to modify labels"},
			{[]string{"delete", "pod", "pod-n2", "-n", "team", "--wait=false"}, "can only delete pods with spec.nodeName set to itself"},
		} {
			out, err := n1.run(tc.args...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("node n1: kubectl %v: %v\n%s\nwant %q", tc.args, err, out, tc.want)
			}
		}
		n1.ok("label", "node", "n1", "topology.kubernetes.io/zone=a") // its own node, a label it may set
		// A node lists its own pods, as the kubelet does, and no one else's.
		if out := n1.ok("get", "pods", "-A", "--field-selector", "spec.nodeName=n1"); !strings.Contains(out, "pod-n1") || strings.Contains(out, "pod-n2") {
			t.Errorf("node n1 listing its pods:\n%s", out)
		}
		// Every pod is readable (ClusterRole skiff:node-policy: each node enforces
		// NetworkPolicy, whose peers may be any pod, as Calico's and Cilium's agents read
		// them); writing stays limited to its own (above).
		if out := n1.ok("get", "pods", "-A"); !strings.Contains(out, "pod-n2") {
			t.Errorf("node n1 listing every pod:\n%s", out)
		}
	})

	// Signers: RBAC on the objects is not enough to act in a signer's name; the verb on
	// certificates.k8s.io "signers" is (upstream's CertificateApproval and
	// ClusterTrustBundleAttest).
	t.Run("signers", func(t *testing.T) {
		admin.ok("create", "clusterrole", "bundle-writer", "--verb=create,get,list", "--resource=clustertrustbundles.certificates.k8s.io")
		admin.ok("create", "clusterrolebinding", "carol-writes-bundles", "--clusterrole=bundle-writer", "--user=carol")
		carol := kubectl{t: t, bin: bin, kubeconfig: user(t, s, "carol")}
		ca := caPEM(t)
		bundle := func(name, signer string) string {
			return writeFile(t, fmt.Sprintf("apiVersion: certificates.k8s.io/v1\nkind: ClusterTrustBundle\nmetadata: {name: %q}\nspec:\n  signerName: %q\n  trustBundle: %q\n", name, signer, ca))
		}
		carol.eventually("created", "create", "-f", bundle("roots", ""))
		out, err := carol.run("create", "-f", bundle("example.com:issuer:roots", "example.com/issuer"))
		if want := `user not permitted to attest for signerName "example.com/issuer"`; err == nil || !strings.Contains(out, want) {
			t.Fatalf("a signer-linked bundle without attest: %v\n%s\nwant %q", err, out, want)
		}
		// "signers" is no served resource, so kubectl create clusterrole refuses it: as a manifest.
		admin.ok("apply", "-f", writeFile(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: example-attester}
rules:
- {apiGroups: [certificates.k8s.io], resources: [signers], verbs: [attest], resourceNames: ["example.com/*"]}
`))
		admin.ok("create", "clusterrolebinding", "carol-attests", "--clusterrole=example-attester", "--user=carol")
		carol.eventually("created", "create", "-f", bundle("example.com:issuer:roots", "example.com/issuer"))
		out = carol.ok("get", "clustertrustbundles", "--field-selector", "spec.signerName=example.com/issuer")
		if !strings.Contains(out, "SIGNERNAME") || !strings.Contains(out, "example.com:issuer:roots   example.com/issuer") || strings.Contains(out, "\nroots ") {
			t.Errorf("bundles of signer example.com/issuer:\n%s", out)
		}
		if out, err := carol.run("create", "-f", bundle("wrong-name", "example.com/issuer")); err == nil || !strings.Contains(out, `must begin with "example.com:issuer:"`) {
			t.Errorf("a linked bundle's name must carry its signer: %v\n%s", err, out)
		}
	})
}

// caPEM is a self-signed CA certificate, PEM.
func caPEM(t *testing.T) string {
	t.Helper()
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e root"}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func saToken(t *testing.T, c kubernetes.Interface, ns, name string) string {
	t.Helper()
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// tokenKubeconfig is the admin kubeconfig's cluster with a bearer token as the user.
func tokenKubeconfig(t *testing.T, s *framework.Server, token string) string {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join(s.Dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: skiff, cluster: {server: "https://127.0.0.1:%d", certificate-authority: %s}}]
users: [{name: sa, user: {token: %s}}]
contexts: [{name: sa, context: {cluster: skiff, user: sa}}]
current-context: sa
`, s.Port, caFile, token))
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return f.Name()
}
