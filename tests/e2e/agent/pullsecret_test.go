package agent

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestImagePullSecrets pulls from a private registry (HTTP Basic, as an htpasswd registry) the
// test runs, as a user does with the real kubectl: a pod without credentials is refused; one
// whose imagePullSecrets hold the login runs (a missing secret beside it said in the kubelet's
// event); one with a wrong password and pullPolicy Always is refused even though the image is
// now on the node; a pod naming no secrets gets its service account's and runs; the node's own
// docker config serves after a pod's secrets.
func TestImagePullSecrets(t *testing.T) {
	n := newRegistryNode(t)
	c, ctx, kubectl, reg := n.c, n.ctx, n.kubectl, n.reg
	_, images := framework.AgentArtifacts(t)
	if _, err := reg.AddArchive(filepath.Join(images, "netutil.tar"), "private/netutil", "v1"); err != nil {
		t.Fatal(err)
	}
	reg.RequireLogin("skiff", "s3cret")
	image := reg.Ref("private/netutil", "v1")

	kubectl("", "create", "secret", "docker-registry", "regcred", "--docker-server="+reg.Addr, "--docker-username=skiff", "--docker-password=s3cret")
	kubectl("", "create", "secret", "docker-registry", "wrong", "--docker-server="+reg.Addr, "--docker-username=skiff", "--docker-password=nope")

	pod := func(name string, secrets ...string) string {
		m := `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists}]
  containers:
  - {name: c, image: "` + image + `", imagePullPolicy: Always, command: [/bin/netutil, sleep, 1h]}
`
		if len(secrets) > 0 {
			m += "  imagePullSecrets:\n"
			for _, s := range secrets {
				m += "  - {name: " + s + "}\n"
			}
		}
		return m
	}
	waiting := func(name string) {
		t.Helper()
		eventually(t, 60*time.Second, name+" refused: waiting with ErrImagePull or ImagePullBackOff, the registry's 401 said", func() (bool, string) {
			p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
				return false, fmt.Sprintf("%s %+v", p.Status.Phase, p.Status.ContainerStatuses)
			}
			w := p.Status.ContainerStatuses[0].State.Waiting
			failed := false
			for _, e := range podEvents(ctx, c, name) {
				failed = failed || (e.Reason == "Failed" && strings.Contains(e.Message, "401 Unauthorized"))
			}
			return (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && failed,
				fmt.Sprintf("waiting %s: %s\n%s", w.Reason, w.Message, podEvents(ctx, c, name))
		})
	}
	running := func(name string) {
		t.Helper()
		eventually(t, 90*time.Second, name+" Running", func() (bool, string) {
			p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Status.Phase == corev1.PodRunning, fmt.Sprintf("%s %+v\n%s", p.Status.Phase, p.Status.ContainerStatuses, podEvents(ctx, c, name))
		})
	}
	t.Cleanup(func() { deletePods(t, c, "anonymous", "with-secret", "wrong-password", "via-account", "node-login") })

	kubectl(pod("anonymous"), "apply", "-f", "-")
	waiting("anonymous")

	kubectl(pod("with-secret", "absent", "regcred"), "apply", "-f", "-")
	running("with-secret")
	missing := false
	for _, e := range podEvents(ctx, c, "with-secret") {
		missing = missing || (e.Reason == "FailedToRetrieveImagePullSecret" && e.Type == corev1.EventTypeWarning &&
			e.Message == "Unable to retrieve some image pull secrets (absent); attempting to pull the image may not succeed.")
	}
	if !missing {
		t.Errorf("no FailedToRetrieveImagePullSecret event for the missing secret:\n%s", podEvents(ctx, c, "with-secret"))
	}

	// The image is on the node now; pullPolicy Always still asks the registry, which refuses.
	kubectl(pod("wrong-password", "wrong"), "apply", "-f", "-")
	waiting("wrong-password")

	kubectl("", "patch", "serviceaccount", "default", "-p", `{"imagePullSecrets":[{"name":"regcred"}]}`)
	kubectl(pod("via-account"), "apply", "-f", "-")
	if out := kubectl("", "get", "pod", "via-account", "-o", "jsonpath={.spec.imagePullSecrets[*].name}"); out != "regcred" {
		t.Errorf("via-account's imagePullSecrets = %q, want its service account's regcred", out)
	}
	running("via-account")

	// The node's own logins (<agent-data-dir>/config.json, read at each pull) serve after the
	// pod's: the wrong password is tried first, then the node's.
	auth := base64.StdEncoding.EncodeToString([]byte("skiff:s3cret"))
	if err := os.WriteFile(filepath.Join(n.dir, "agent", "config.json"), []byte(`{"auths":{"`+reg.Addr+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(pod("node-login", "wrong"), "apply", "-f", "-")
	running("node-login")
}
