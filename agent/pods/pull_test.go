package pods

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakePuller records the logins pulls are tried with and refuses those not in accept.
type fakePuller struct {
	runtimeapi.ImageServiceClient
	accept string // "user:password" that succeeds; "" accepts a pull without login
	tried  []string
}

func (f *fakePuller) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest, _ ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	login := ""
	if a := req.Auth; a != nil {
		login = a.Username + ":" + a.Password
	}
	f.tried = append(f.tried, login)
	if login != f.accept {
		return nil, status.Errorf(codes.Unknown, "failed to pull %s as %q: 401 Unauthorized", req.Image.Image, login)
	}
	return &runtimeapi.PullImageResponse{ImageRef: "sha256:feed"}, nil
}

func dockerSecret(name, server, user, pass string) *corev1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + server + `":{"auth":"` + auth + `"}}}`)}}
}

// TestPullWithSecrets: a pull tries the logins of the pod's pull secrets that match the image's
// registry, most specific first, stopping at the first that works; with none matching it pulls
// without; when all fail, it says every failure; a secret that does not parse fails the pull.
func TestPullWithSecrets(t *testing.T) {
	client := fake.NewClientset(
		dockerSecret("team", "reg.example:5000/team", "team", "t"),
		dockerSecret("site", "reg.example:5000", "site", "s"),
		dockerSecret("elsewhere", "other.example", "x", "y"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "broken"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("{")}},
	)
	pod := func(secrets ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
		for _, s := range secrets {
			p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
		}
		return p
	}
	for _, tc := range []struct {
		name, image, accept string
		secrets             []string
		tried               []string
		err                 string
	}{
		{name: "no secrets", image: "reg.example:5000/team/app:1", accept: "", tried: []string{""}},
		{name: "no secret for this registry", image: "reg.example:5000/team/app:1", secrets: []string{"elsewhere"}, tried: []string{""}},
		{name: "most specific first", image: "reg.example:5000/team/app:1", accept: "team:t", secrets: []string{"site", "team"},
			tried: []string{"team:t"}},
		{name: "the next after a refusal", image: "reg.example:5000/team/app:1", accept: "site:s", secrets: []string{"site", "team", "missing"},
			tried: []string{"team:t", "site:s"}},
		{name: "every refusal said", image: "reg.example:5000/team/app:1", accept: "nobody:n", secrets: []string{"site", "team"},
			tried: []string{"team:t", "site:s"}, err: `[failed to pull reg.example:5000/team/app:1 as "team:t": 401 Unauthorized, failed to pull reg.example:5000/team/app:1 as "site:s": 401 Unauthorized]`},
		{name: "one refusal as it is", image: "reg.example:5000/other/app:1", accept: "nobody:n", secrets: []string{"site"},
			tried: []string{"site:s"}, err: `failed to pull reg.example:5000/other/app:1 as "site:s": 401 Unauthorized`},
		{name: "a broken secret", image: "reg.example:5000/team/app:1", secrets: []string{"broken"}, err: "image pull secret ns/broken: .dockerconfigjson"},
	} {
		puller := &fakePuller{accept: tc.accept}
		m := New(client, nil, puller, Options{NodeName: "n"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		err := m.pull(context.Background(), pod(tc.secrets...), tc.image)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(puller.tried, tc.tried) {
			t.Errorf("%s: tried %q, want %q", tc.name, puller.tried, tc.tried)
		}
	}
}

func TestAuthRefused(t *testing.T) {
	for msg, want := range map[string]bool{
		`failed to resolve reference "127.0.0.1:5000/p:v1": unexpected status from HEAD request to http://127.0.0.1:5000/v2/p/manifests/v1: 401 Unauthorized`: true,
		`pulling from host quay.io failed with status code [manifests v1]: 403 Forbidden`:                                                                     true,
		`failed to authorize: failed to fetch anonymous token: unexpected status: 401`:                                                                        true,
		`failed to do request: Head "https://registry.example/v2/": dial tcp: lookup registry.example: no such host`:                                          false,
		`dial tcp 127.0.0.1:5000: connect: connection refused`:                                                                                                false,
	} {
		if got := authRefused(errors.New(msg)); got != want {
			t.Errorf("authRefused(%q) = %v, want %v", msg, got, want)
		}
	}
}

// TestPullWithNodeLogins: the node's docker config serves pods after their own secrets; one that
// does not parse serves none, and the pull goes without.
func TestPullWithNodeLogins(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.json")
	client := fake.NewClientset(dockerSecret("site", "reg.example:5000", "site", "s"))
	m := func(puller *fakePuller) *Manager {
		return New(client, nil, puller, Options{NodeName: "n", RegistryLogins: file}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	withSecret := pod.DeepCopy()
	withSecret.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "site"}}

	// No file yet: no login.
	p := &fakePuller{accept: ""}
	if err := m(p).pull(context.Background(), pod, "reg.example:5000/app"); err != nil || !reflect.DeepEqual(p.tried, []string{""}) {
		t.Errorf("without a node config: %v, tried %q", err, p.tried)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("node:n"))
	if err := os.WriteFile(file, []byte(`{"auths":{"reg.example:5000":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p = &fakePuller{accept: "node:n"}
	if err := m(p).pull(context.Background(), pod, "reg.example:5000/app"); err != nil || !reflect.DeepEqual(p.tried, []string{"node:n"}) {
		t.Errorf("with the node's login: %v, tried %q", err, p.tried)
	}
	p = &fakePuller{accept: "node:n"}
	if err := m(p).pull(context.Background(), withSecret, "reg.example:5000/app"); err != nil || !reflect.DeepEqual(p.tried, []string{"site:s", "node:n"}) {
		t.Errorf("the pod's secret, then the node's: %v, tried %q", err, p.tried)
	}
	if err := os.WriteFile(file, []byte(`{`), 0o600); err != nil {
		t.Fatal(err)
	}
	p = &fakePuller{accept: ""}
	if err := m(p).pull(context.Background(), pod, "reg.example:5000/app"); err != nil || !reflect.DeepEqual(p.tried, []string{""}) {
		t.Errorf("with a broken node config: %v, tried %q", err, p.tried)
	}
}
