package pullsecrets

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func jsonSecret(name, config string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(config)}}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestLookup(t *testing.T) {
	secrets := []*corev1.Secret{
		jsonSecret("regcred", `{"auths":{
			"https://registry.example.com/v1/": {"username": "site", "password": "s"},
			"registry.example.com/team": {"auth": "`+b64("team:t:with:colons")+`", "username": "ignored"},
			"*.mirror.example": {"username": "glob", "password": "g"},
			"127.0.0.1:5000": {"username": "local", "password": "l"},
			"https://index.docker.io/v1/": {"username": "hub", "password": "h"}}}`),
		// The legacy format: the entries at the top level.
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "old"}, Type: corev1.SecretTypeDockercfg,
			Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"registry.example.com": {"username": "old", "password": "o"}}`)}},
		// Not a pull secret: skipped even though it holds a config.
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "opaque"}, Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"username":"opaque"}}}`)}},
		// A pull secret without its key is skipped too (upstream's check).
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}, Type: corev1.SecretTypeDockerConfigJson},
	}
	k, err := FromSecrets(secrets)
	if err != nil {
		t.Fatal(err)
	}
	site, old := Credential{"site", "s"}, Credential{"old", "o"}
	team := Credential{"team", "t:with:colons"}
	for image, want := range map[string][]Credential{
		// The path key first, then the host's (two secrets' entries for it, in secret order).
		"registry.example.com/team/app:1.0":   {team, site, old},
		"registry.example.com/other/app:1.0":  {site, old},
		"registry.example.com:443/team/app":   nil, // a port must match exactly
		"eu.mirror.example/lib/app":           {{"glob", "g"}},
		"a.eu.mirror.example/lib/app":         nil, // a glob is one label
		"127.0.0.1:5000/test/netutil:pulled":  {{"local", "l"}},
		"127.0.0.1/test/netutil":              nil,
		"nginx":                               {{"hub", "h"}},
		"library/nginx:1.27":                  {{"hub", "h"}},
		"docker.io/library/nginx":             {{"hub", "h"}},
		"index.docker.io/library/nginx":       {{"hub", "h"}},
		"quay.io/org/app":                     nil,
		"registry.example.com.evil.test/team": nil,
	} {
		if got := k.Lookup(image); !reflect.DeepEqual(got, want) {
			t.Errorf("Lookup(%q) = %v, want %v", image, got, want)
		}
	}
	var none *Keyring
	if none.Lookup("nginx") != nil {
		t.Error("a nil keyring has credentials")
	}
}

func TestFromSecretsErrors(t *testing.T) {
	for _, tc := range []struct {
		secret *corev1.Secret
		err    string
	}{
		{jsonSecret("bad", `{"auths":`), "image pull secret ns/bad: .dockerconfigjson: unexpected end of JSON input"},
		{jsonSecret("badauth", `{"auths":{"r.example":{"auth":"%%%"}}}`), `image pull secret ns/badauth: registry "r.example": auth is not base64`},
		{jsonSecret("nocolon", `{"auths":{"r.example":{"auth":"`+b64("user")+`"}}}`), "auth does not decode to user:password"},
		{jsonSecret("nohost", `{"auths":{"https:///path":{"username":"u"}}}`), "names no registry host"},
		{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Type: corev1.SecretTypeDockercfg,
			Data: map[string][]byte{corev1.DockerConfigKey: []byte(`[]`)}}, "image pull secret ns/cfg: .dockercfg:"},
	} {
		_, err := FromSecrets([]*corev1.Secret{tc.secret})
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.secret.Name, err, tc.err)
		}
	}
}

func FuzzFromSecrets(f *testing.F) {
	f.Add([]byte(`{"auths":{"r.example/p":{"auth":"dTpw"}}}`), "r.example/p/app:1")
	f.Add([]byte(`{"auths":{"*.x:1":{}}}`), "a.x:1/b")
	f.Fuzz(func(t *testing.T, config []byte, image string) {
		k, err := FromSecrets([]*corev1.Secret{{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: config}}})
		if err != nil {
			return
		}
		_ = k.Lookup(image)
	})
}

// TestNodeConfig: a node's docker config, in either format, joins a pod's secrets after them.
func TestNodeConfig(t *testing.T) {
	node, err := FromDockerConfig([]byte(`{"auths":{"registry.example.com":{"auth":"` + b64("node:n") + `"}},"credsStore":"ignored"}`))
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := FromDockerConfig([]byte(`{"mirror.example":{"username":"old","password":"o"}}`))
	if err != nil {
		t.Fatal(err)
	}
	pod, err := FromSecrets([]*corev1.Secret{jsonSecret("s", `{"auths":{"registry.example.com":{"username":"pod","password":"p"}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	u := Union{pod, nil, node, legacy}
	if got, want := u.Lookup("registry.example.com/app:1"), []Credential{{"pod", "p"}, {"node", "n"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Lookup = %v, want the pod's then the node's %v", got, want)
	}
	if got, want := u.Lookup("mirror.example/app"), []Credential{{"old", "o"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("legacy format: %v, want %v", got, want)
	}
	for _, bad := range []string{`{`, `[]`, `{"r.example":{"auth":"%"}}`} {
		if _, err := FromDockerConfig([]byte(bad)); err == nil {
			t.Errorf("FromDockerConfig(%s) accepted", bad)
		}
	}
}
