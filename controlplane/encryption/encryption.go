// Package encryption manages the EncryptionConfiguration that encrypts Secrets at rest, as
// k3s's --secrets-encryption does: Generate writes one with a new aescbc key (and identity
// behind it, so data written before stays readable), Rotate puts a new key first (new
// writes use it; the old ones still decrypt), Prune keeps only the first. The API server
// reads the file with automatic reload, so a rotation needs no restart.
package encryption

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
)

// Prefix begins every value the aescbc provider writes to etcd: k8s:enc:aescbc:v1:<key>:.
const Prefix = "k8s:enc:aescbc:v1:"

// Resources are what skiff's generated configuration encrypts.
var Resources = []string{"secrets"}

// Generate writes a configuration with one fresh key at path (0600), unless one is there.
func Generate(path string, now time.Time) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	key, err := newKey(now)
	if err != nil {
		return err
	}
	cfg := &apiserverv1.EncryptionConfiguration{Resources: []apiserverv1.ResourceConfiguration{{
		Resources: Resources,
		Providers: []apiserverv1.ProviderConfiguration{
			{AESCBC: &apiserverv1.AESConfiguration{Keys: []apiserverv1.Key{key}}},
			{Identity: &apiserverv1.IdentityConfiguration{}},
		},
	}}}
	return Write(path, cfg)
}

// Read parses a configuration skiff wrote (JSON, apiserver.config.k8s.io/v1).
func Read(path string) (*apiserverv1.EncryptionConfiguration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg := &apiserverv1.EncryptionConfiguration{}
	if err := json.Unmarshal(b, cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(aescbc(cfg)) == 0 {
		return nil, fmt.Errorf("%s: no aescbc keys for secrets (not a configuration skiff generated)", path)
	}
	return cfg, nil
}

// Write replaces path atomically, readable by its owner only.
func Write(path string, cfg *apiserverv1.EncryptionConfiguration) error {
	cfg.APIVersion, cfg.Kind = "apiserver.config.k8s.io/v1", "EncryptionConfiguration"
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// aescbc returns the aescbc keys of the secrets' providers, first (the one writes use) first.
func aescbc(cfg *apiserverv1.EncryptionConfiguration) []apiserverv1.Key {
	for _, r := range cfg.Resources {
		for _, res := range r.Resources {
			if res != "secrets" {
				continue
			}
			for _, p := range r.Providers {
				if p.AESCBC != nil {
					return p.AESCBC.Keys
				}
			}
		}
	}
	return nil
}

func setAESCBC(cfg *apiserverv1.EncryptionConfiguration, keys []apiserverv1.Key) {
	for i := range cfg.Resources {
		for j := range cfg.Resources[i].Providers {
			if p := cfg.Resources[i].Providers[j].AESCBC; p != nil {
				p.Keys = keys
				return
			}
		}
	}
}

// Keys are the names of the configuration's keys, the one writes use first.
func Keys(cfg *apiserverv1.EncryptionConfiguration) []string {
	var out []string
	for _, k := range aescbc(cfg) {
		out = append(out, k.Name)
	}
	return out
}

// Rotate puts a new key first and keeps the others to read older data; it returns the
// new key's name.
func Rotate(cfg *apiserverv1.EncryptionConfiguration, now time.Time) (string, error) {
	key, err := newKey(now)
	if err != nil {
		return "", err
	}
	for _, k := range aescbc(cfg) {
		if k.Name == key.Name {
			return "", fmt.Errorf("a key named %s exists already", key.Name)
		}
	}
	setAESCBC(cfg, append([]apiserverv1.Key{key}, aescbc(cfg)...))
	return key.Name, nil
}

// Prune drops every key but the first, once everything is encrypted with it.
func Prune(cfg *apiserverv1.EncryptionConfiguration) {
	if keys := aescbc(cfg); len(keys) > 1 {
		setAESCBC(cfg, keys[:1])
	}
}

// KeyOf is the name of the key an etcd value was encrypted with, or "" if it is not.
func KeyOf(value []byte) string {
	rest, ok := strings.CutPrefix(string(value), Prefix)
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, ":")
	return name
}

// newKey is a random 32-byte AES key named after its time, as k3s names them.
func newKey(now time.Time) (apiserverv1.Key, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return apiserverv1.Key{}, err
	}
	return apiserverv1.Key{Name: fmt.Sprintf("aescbckey-%s", now.UTC().Format("20060102T150405.000000000Z")), Secret: base64.StdEncoding.EncodeToString(b)}, nil
}
