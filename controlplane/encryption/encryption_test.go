package encryption

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestGenerateRotatePrune(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cred", "encryption-config.json")
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	if err := Generate(path, t0); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file %v %v", fi, err)
	}
	before, _ := os.ReadFile(path)
	if err := Generate(path, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("Generate replaced an existing configuration")
	}
	cfg, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	first := Keys(cfg)
	if len(first) != 1 || first[0] != "aescbckey-20261202T040000.000000000Z" {
		t.Fatalf("keys %v", first)
	}
	if p := cfg.Resources[0].Providers; len(p) != 2 || p[1].Identity == nil || cfg.Resources[0].Resources[0] != "secrets" {
		t.Errorf("providers %+v", p)
	}
	name, err := Rotate(cfg, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if k := Keys(cfg); len(k) != 2 || k[0] != name || k[1] != first[0] {
		t.Errorf("after rotate: %v", k)
	}
	if _, err := Rotate(cfg, t0.Add(time.Minute)); err == nil {
		t.Error("a second key of the same name was accepted")
	}
	Prune(cfg)
	if k := Keys(cfg); len(k) != 1 || k[0] != name {
		t.Errorf("after prune: %v", k)
	}
	if got := KeyOf([]byte(Prefix + name + ":\x00\x01")); got != name {
		t.Errorf("KeyOf = %q", got)
	}
	if got := KeyOf([]byte("\x6b\x38\x73\x00plain protobuf")); got != "" {
		t.Errorf("KeyOf of a plain value = %q", got)
	}
	if err := os.WriteFile(path, []byte(`{"kind":"EncryptionConfiguration","resources":[{"resources":["secrets"],"providers":[{"identity":{}}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Error("a configuration without aescbc keys was accepted")
	}
}
