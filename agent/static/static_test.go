package static

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: etcd, namespace: kube-system}\nspec:\n  containers: [{name: c, image: x:1}]\n")
	write("svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
	write("broken.json", "{")
	write("noname.yaml", "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: c, image: x:1}]\n")
	write("notes.txt", "ignored")
	pods, errs := Load(dir, "node-1")
	if len(pods) != 1 || len(errs) != 3 {
		t.Fatalf("pods %d errs %v", len(pods), errs)
	}
	p := pods[0]
	if p.Name != "etcd-node-1" || p.Namespace != "kube-system" || p.Spec.NodeName != "node-1" || p.UID == "" ||
		p.Annotations[HashAnnotation] != string(p.UID) || p.Annotations[SourceAnnotation] != "file" {
		t.Fatalf("static pod %+v", p.ObjectMeta)
	}
	if p.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("defaults not applied: %+v", p.Spec)
	}
	joined := ""
	for _, e := range errs {
		joined += e.Error() + "\n"
	}
	for _, want := range []string{"must hold a Pod", "broken.json", "has no name"} {
		if !strings.Contains(joined, want) {
			t.Errorf("errors lack %q:\n%s", want, joined)
		}
	}
	again, _ := Load(dir, "node-1")
	other, _ := Load(dir, "node-2")
	if again[0].UID != p.UID || other[0].UID == p.UID {
		t.Fatal("the hash must be stable for a file and differ per node")
	}
	m := Mirror(p, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "n-uid"}}, time.Unix(0, 0))
	if m.UID != "" || m.Annotations[MirrorAnnotation] != string(p.UID) || m.OwnerReferences[0].UID != "n-uid" {
		t.Fatalf("mirror %+v", m.ObjectMeta)
	}
	if none, errs := Load(filepath.Join(dir, "absent"), "n"); len(none) != 0 || len(errs) != 0 {
		t.Fatal("a missing manifest directory is not an error")
	}
}
