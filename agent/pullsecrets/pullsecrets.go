// Package pullsecrets turns a pod's image pull secrets into the registry credentials to pull an
// image with, as the kubelet's keyring does (k8s.io/kubernetes pkg/credentialprovider): every
// entry of the docker config in a kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg
// secret is keyed by a registry host — each DNS label may be a glob, a port must match exactly —
// and an optional path prefix (a scheme and a /v1/ or /v2/ prefix are ignored, as the docker
// client does); an image gets the credentials of every key that matches it, the most specific
// key first, and the pull tries them in turn. Docker Hub's key ("https://index.docker.io/v1/")
// serves images of the default registry ("nginx", "docker.io/library/nginx") when no other key
// matches. FromDockerConfig reads a node's own logins (the kubelet's config.json), which Union
// puts after a pod's. It decides only: the caller reads the secrets and files, and pulls.
package pullsecrets

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Credential is one registry login.
type Credential struct {
	Username, Password string
}

// Keyring holds the credentials of some pull secrets by registry key.
type Keyring struct {
	keys  []string // most specific first
	creds map[string][]Credential
}

// defaultRegistryHost is the key Docker Hub's entries are filed under.
const defaultRegistryHost = "index.docker.io"

// dockerConfigEntry is one registry's login in a docker config: a username and password, or
// "auth", their base64 "user:password", which wins when both are given.
type dockerConfigEntry struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Email    string `json:"email,omitempty"`
	Auth     string `json:"auth,omitempty"`
}

// dockerConfigJSON is a config.json or .dockerconfigjson: the entries under "auths".
type dockerConfigJSON struct {
	Auths map[string]dockerConfigEntry `json:"auths"`
}

func (e dockerConfigEntry) credential() (Credential, error) {
	c := Credential{Username: e.Username, Password: e.Password}
	if e.Auth == "" {
		return c, nil
	}
	b, err := base64.StdEncoding.DecodeString(e.Auth)
	if err != nil {
		return c, fmt.Errorf("auth is not base64: %w", err)
	}
	user, pass, ok := strings.Cut(string(b), ":")
	if !ok {
		return c, fmt.Errorf("auth does not decode to user:password")
	}
	return Credential{Username: user, Password: pass}, nil
}

// FromSecrets builds the keyring of the pull secrets among secrets: those of type
// kubernetes.io/dockerconfigjson with a non-empty .dockerconfigjson ({"auths": {KEY: entry}})
// and kubernetes.io/dockercfg with a non-empty .dockercfg ({KEY: entry}). Secrets of other
// types are not pull secrets and are skipped, as upstream does; one whose config does not
// parse is an error naming it.
func FromSecrets(secrets []*corev1.Secret) (*Keyring, error) {
	k := &Keyring{creds: map[string][]Credential{}}
	for _, s := range secrets {
		var entries map[string]dockerConfigEntry
		switch b := s.Data[corev1.DockerConfigJsonKey]; {
		case s.Type == corev1.SecretTypeDockerConfigJson && len(b) > 0:
			var cfg dockerConfigJSON
			if err := json.Unmarshal(b, &cfg); err != nil {
				return nil, fmt.Errorf("image pull secret %s/%s: %s: %w", s.Namespace, s.Name, corev1.DockerConfigJsonKey, err)
			}
			entries = cfg.Auths
		case s.Type == corev1.SecretTypeDockercfg && len(s.Data[corev1.DockerConfigKey]) > 0:
			if err := json.Unmarshal(s.Data[corev1.DockerConfigKey], &entries); err != nil {
				return nil, fmt.Errorf("image pull secret %s/%s: %s: %w", s.Namespace, s.Name, corev1.DockerConfigKey, err)
			}
		default:
			continue
		}
		if err := k.add(entries); err != nil {
			return nil, fmt.Errorf("image pull secret %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	k.sort()
	return k, nil
}

// FromDockerConfig builds the keyring of a docker config file, as the kubelet reads its node's
// (config.json: {"auths": {KEY: entry}}, or the older .dockercfg: {KEY: entry}).
func FromDockerConfig(data []byte) (*Keyring, error) {
	var cfg dockerConfigJSON
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	entries := cfg.Auths
	if entries == nil {
		// No "auths": the older format, entries at the top level.
		if err := json.Unmarshal(data, &entries); err != nil {
			return nil, fmt.Errorf("neither config.json nor .dockercfg: %w", err)
		}
	}
	k := &Keyring{creds: map[string][]Credential{}}
	if err := k.add(entries); err != nil {
		return nil, err
	}
	k.sort()
	return k, nil
}

// add files a docker config's entries by key, in key order, so two entries of one config for
// the same key keep a stable order.
func (k *Keyring) add(entries map[string]dockerConfigEntry) error {
	locs := make([]string, 0, len(entries))
	for loc := range entries {
		locs = append(locs, loc)
	}
	sort.Strings(locs)
	for _, loc := range locs {
		cred, err := entries[loc].credential()
		if err != nil {
			return fmt.Errorf("registry %q: %w", loc, err)
		}
		key, err := registryKey(loc)
		if err != nil {
			return fmt.Errorf("registry %q: %w", loc, err)
		}
		if _, ok := k.creds[key]; !ok {
			k.keys = append(k.keys, key)
		}
		k.creds[key] = append(k.creds[key], cred)
	}
	return nil
}

// sort orders the keys most specific first: reverse lexical order puts a longer key (a path
// under a host) before its prefix.
func (k *Keyring) sort() { sort.Sort(sort.Reverse(sort.StringSlice(k.keys))) }

// Union looks up in each keyring in turn: a pod's secrets first, then the node's logins, as
// the kubelet joins them. Nil keyrings are skipped.
type Union []*Keyring

// Lookup returns every keyring's credentials for image, in the union's order.
func (u Union) Lookup(image string) []Credential {
	var out []Credential
	for _, k := range u {
		out = append(out, k.Lookup(image)...)
	}
	return out
}

// registryKey is the key a docker config location is filed under: its host and, when it has
// one, its path, without scheme; /v1/ and /v2/ (registry API roots) count as no path.
func registryKey(loc string) (string, error) {
	value := loc
	if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
		value = "https://" + value
	}
	u, err := url.Parse(value)
	if err != nil {
		return "", err
	}
	if u.Host == "" {
		return "", fmt.Errorf("names no registry host")
	}
	p := u.Path
	if strings.HasPrefix(p, "/v2/") || strings.HasPrefix(p, "/v1/") {
		p = p[3:]
	}
	if p == "" || p == "/" {
		return u.Host, nil
	}
	return u.Host + p, nil
}

// Lookup returns the credentials for image (as a pod names it), most specific key first;
// none means the pull goes without.
func (k *Keyring) Lookup(image string) []Credential {
	if k == nil {
		return nil
	}
	var out []Credential
	for _, key := range k.keys {
		if matches(key, image) {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) == 0 && isDefaultRegistry(image) {
		out = append(out, k.creds[defaultRegistryHost]...)
	}
	return out
}

// matches says whether key (host[:port][/path], DNS labels may be globs) covers image: the
// same number of labels, each matching, the same port, and the key's path a prefix of the
// image's.
func matches(key, image string) bool {
	k, err := url.Parse("https://" + key)
	if err != nil {
		return false
	}
	t, err := url.Parse("https://" + image)
	if err != nil {
		return false
	}
	if k.Port() != t.Port() || !strings.HasPrefix(t.Path, k.Path) {
		return false
	}
	kl, tl := strings.Split(k.Hostname(), "."), strings.Split(t.Hostname(), ".")
	if len(kl) != len(tl) {
		return false
	}
	for i := range kl {
		if ok, err := filepath.Match(kl[i], tl[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// isDefaultRegistry says whether image is Docker Hub's: one with no registry part (its first
// segment has no "." or ":", or there is only one), or docker.io/index.docker.io named.
func isDefaultRegistry(image string) bool {
	first, _, more := strings.Cut(image, "/")
	if first == "" {
		return false
	}
	if !more || first == "docker.io" || first == defaultRegistryHost {
		return true
	}
	return !strings.ContainsAny(first, ".:")
}
