package bootstrapdata

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"testing"

	"github.com/skiff-sh/skiff/internal/bootstraptoken"
)

var (
	token = bootstraptoken.Token{ID: "abcdef", Secret: "0123456789abcdef"}
	files = map[string][]byte{"pki/ca.crt": []byte("CA"), "pki/ca.key": []byte("KEY"), "cred/encryption-config.json": []byte("{}")}
)

func TestSealOpen(t *testing.T) {
	b, err := Seal(token, files)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("KEY")) || bytes.Contains(b, []byte(token.Secret)) {
		t.Fatal("the sealed copy shows a file or the token's secret")
	}
	got, err := Open(token, b)
	if err != nil || !maps.EqualFunc(got, files, bytes.Equal) {
		t.Fatalf("Open: %v %v", got, err)
	}
	other := bootstraptoken.Token{ID: "abcdef", Secret: "fedcba9876543210"}
	if _, err := Open(other, b); !errors.Is(err, ErrWrongToken) {
		t.Errorf("Open with another token: %v, want ErrWrongToken", err)
	}
	tampered := bytes.Replace(b, []byte(`"data":"`), []byte(`"data":"AAAA`), 1)
	if _, err := Open(token, tampered); err == nil {
		t.Error("Open of a changed copy: no error")
	}
	for _, bad := range []string{"", "{", `{"version":2}`, `{"version":1,"salt":"AA==","nonce":"AA==","data":"AA=="}`} {
		if _, err := Open(token, []byte(bad)); err == nil {
			t.Errorf("Open(%q): no error", bad)
		}
	}
}

type memStore struct {
	m    map[string][]byte
	puts int
}

func (s *memStore) Get(_ context.Context, key string) ([]byte, bool, error) {
	v, ok := s.m[key]
	return v, ok, nil
}

func (s *memStore) Put(_ context.Context, key string, value []byte) error {
	s.m[key] = value
	s.puts++
	return nil
}

// Watch does not watch: the tests call sync themselves.
func (s *memStore) Watch(context.Context, string) <-chan struct{} { return nil }

// TestKeeperAdopts: a stored copy that Adopt takes ends the keeper with ErrAdopted and is not
// overwritten; one it declines is replaced by this server's files.
func TestKeeperAdopts(t *testing.T) {
	store := &memStore{m: map[string][]byte{}}
	theirs := maps.Clone(files)
	theirs["pki/ca.crt"] = []byte("their rotated CA")
	sealed, err := Seal(token, theirs)
	if err != nil {
		t.Fatal(err)
	}
	store.m[Key(token)] = sealed
	var offered map[string][]byte
	take := true
	k := Keeper{Token: token, Store: store, Files: func() (map[string][]byte, error) { return files, nil },
		Adopt: func(_ context.Context, stored map[string][]byte) (bool, error) {
			offered = stored
			return take, nil
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := k.sync(context.Background()); !errors.Is(err, ErrAdopted) {
		t.Fatalf("sync with a copy Adopt takes: %v, want ErrAdopted", err)
	}
	if string(offered["pki/ca.crt"]) != "their rotated CA" || store.puts != 0 {
		t.Fatalf("Adopt offered %q; %d puts, want the stored copy offered and kept", offered["pki/ca.crt"], store.puts)
	}
	take = false
	if err := k.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, err := Open(token, store.m[Key(token)]); err != nil || string(got["pki/ca.crt"]) != string(files["pki/ca.crt"]) {
		t.Errorf("a declined copy was not replaced by this server's files: %q %v", got["pki/ca.crt"], err)
	}
}

func TestKeeperStoresOnlyChanges(t *testing.T) {
	store := &memStore{m: map[string][]byte{}}
	current := maps.Clone(files)
	k := Keeper{Token: token, Store: store, Files: func() (map[string][]byte, error) { return current, nil },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	for range 3 {
		if err := k.sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if store.puts != 1 {
		t.Errorf("%d puts for unchanged files, want 1", store.puts)
	}
	current["cred/encryption-config.json"] = []byte(`{"rotated":true}`)
	if err := k.sync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := Open(token, store.m[Key(token)])
	if err != nil || string(got["cred/encryption-config.json"]) != `{"rotated":true}` || store.puts != 2 {
		t.Errorf("after a change: %d puts, stored %q %v", store.puts, got["cred/encryption-config.json"], err)
	}
}
