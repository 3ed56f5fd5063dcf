// Package bootstrapdata keeps a copy of the files every server of a cluster shares (the CAs,
// the service-account keys, the encryption configuration: layout.Server.Shared) in etcd,
// sealed with the cluster's join token, as k3s keeps its bootstrap data. An etcd snapshot then
// carries all a new machine needs to restore the cluster from it: `skiff server
// --cluster-reset --cluster-reset-restore-path SNAPSHOT --token TOKEN` opens the copy with
// the token and writes the files, so the restored cluster keeps its CAs (every agent and
// kubeconfig stays trusted) and can read its encrypted Secrets.
package bootstrapdata

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/skiff-sh/skiff/internal/bootstraptoken"
)

// Key is where the copy sealed with token is kept in etcd: named by the token's public id,
// never its secret.
func Key(token bootstraptoken.Token) string { return "/skiff/bootstrap/" + token.ID }

// sealed is the stored form: the files (path under the data directory → content) as JSON,
// encrypted with AES-256-GCM under a key derived from the token with PBKDF2.
type sealed struct {
	Version int    `json:"version"`
	Salt    []byte `json:"salt"`
	Nonce   []byte `json:"nonce"`
	Data    []byte `json:"data"`
}

const (
	formatVersion = 1
	iterations    = 100_000
)

func aead(token bootstraptoken.Token, salt []byte) (cipher.AEAD, error) {
	key, err := pbkdf2.Key(sha256.New, token.ID+"."+token.Secret, salt, iterations, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts files with token.
func Seal(token bootstraptoken.Token, files map[string][]byte) ([]byte, error) {
	plain, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	s := sealed{Version: formatVersion, Salt: make([]byte, 16)}
	if _, err := rand.Read(s.Salt); err != nil {
		return nil, err
	}
	gcm, err := aead(token, s.Salt)
	if err != nil {
		return nil, err
	}
	s.Nonce = make([]byte, gcm.NonceSize())
	if _, err := rand.Read(s.Nonce); err != nil {
		return nil, err
	}
	s.Data = gcm.Seal(nil, s.Nonce, plain, []byte(Key(token)))
	return json.Marshal(s)
}

// ErrWrongToken is Open's error when the copy was sealed with another token (or changed).
var ErrWrongToken = errors.New("the cluster's files cannot be opened with this token: it is not the token they were sealed with")

// Open decrypts what Seal made with the same token.
func Open(token bootstraptoken.Token, b []byte) (map[string][]byte, error) {
	var s sealed
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("sealed cluster files: %w", err)
	}
	if s.Version != formatVersion {
		return nil, fmt.Errorf("sealed cluster files of format %d; this build reads %d", s.Version, formatVersion)
	}
	gcm, err := aead(token, s.Salt)
	if err != nil {
		return nil, err
	}
	if len(s.Nonce) != gcm.NonceSize() {
		return nil, fmt.Errorf("sealed cluster files: a nonce of %d bytes, want %d", len(s.Nonce), gcm.NonceSize())
	}
	plain, err := gcm.Open(nil, s.Nonce, s.Data, []byte(Key(token)))
	if err != nil {
		return nil, ErrWrongToken
	}
	var files map[string][]byte
	if err := json.Unmarshal(plain, &files); err != nil {
		return nil, fmt.Errorf("sealed cluster files: %w", err)
	}
	return files, nil
}

// Store is the etcd the copy lives in.
type Store interface {
	Get(ctx context.Context, key string) (value []byte, found bool, err error)
	Put(ctx context.Context, key string, value []byte) error
	// Watch tells of each change of key until ctx ends; the channel closes when the watch
	// does (nil: no watching, the keeper only looks every Every).
	Watch(ctx context.Context, key string) <-chan struct{}
}

// Keeper keeps the copy in etcd current: at start, every Every (10 minutes when zero) and
// whenever another server changes it, it reads the shared files and stores them sealed unless
// the stored copy already holds the same (an encryption key rotated since is stored at the
// next look) — or holds files this server takes instead (Adopt).
type Keeper struct {
	Token bootstraptoken.Token
	Store Store
	// Files reads the shared files as they are now.
	Files func() (map[string][]byte, error)
	// Adopt, if set, hears of a stored copy that differs from the files: it takes what of it
	// should replace this server's own (another server's CA rotation) and says whether it
	// did; the keeper then returns ErrAdopted. Otherwise the files are stored.
	Adopt func(ctx context.Context, stored map[string][]byte) (bool, error)
	Every time.Duration
	Log   *slog.Logger
}

// ErrAdopted ends Run after Adopt took files from the stored copy: the process must load them.
var ErrAdopted = errors.New("took the cluster's newer shared files from etcd")

// Run keeps the copy until ctx ends.
func (k Keeper) Run(ctx context.Context) error {
	every := k.Every
	if every == 0 {
		every = 10 * time.Minute
	}
	changed := k.Store.Watch(ctx, Key(k.Token))
	for {
		if err := k.sync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		case _, ok := <-changed:
			if !ok { // the watch ended (etcd compacted past it, a leader change): watch again
				changed = k.Store.Watch(ctx, Key(k.Token))
			}
		}
	}
}

func (k Keeper) sync(ctx context.Context) error {
	files, err := k.Files()
	if err != nil {
		return fmt.Errorf("reading the shared files: %w", err)
	}
	old, found, err := k.Store.Get(ctx, Key(k.Token))
	if err != nil {
		return fmt.Errorf("reading the sealed copy of the shared files: %w", err)
	}
	if found {
		stored, err := Open(k.Token, old)
		if err == nil && maps.EqualFunc(stored, files, bytes.Equal) {
			return nil
		}
		if err == nil && k.Adopt != nil {
			adopted, err := k.Adopt(ctx, stored)
			if err != nil {
				return fmt.Errorf("taking the shared files from etcd: %w", err)
			}
			if adopted {
				return ErrAdopted
			}
		}
	}
	b, err := Seal(k.Token, files)
	if err != nil {
		return err
	}
	if err := k.Store.Put(ctx, Key(k.Token), b); err != nil {
		return fmt.Errorf("storing the sealed copy of the shared files: %w", err)
	}
	k.Log.Info("the shared files are kept in etcd, sealed with the join token", "key", Key(k.Token), "files", len(files))
	return nil
}
