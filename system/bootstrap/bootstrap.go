// Package bootstrap is the step that writes every file a server needs before any of its
// parts runs: the cluster PKI, the node join token, the control plane's kubeconfigs, the
// serving pair of the agent beside it, the encryption configuration --secrets-encryption
// asks for, and etcd's data directory (k3s's pkg/daemons/control/deps does this for k3s).
// Files that exist are kept, so a restart or an upgrade never re-keys the cluster; the parts
// that run afterwards only read them. An agent's own files come from joining (agent/join).
package bootstrap

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"github.com/skiff-sh/skiff/controlplane/encryption"
	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/internal/bootstraptoken"
	"github.com/skiff-sh/skiff/internal/certfile"
	"github.com/skiff-sh/skiff/internal/layout"
)

// Server is what a server's files depend on.
type Server struct {
	Dirs layout.Server
	// APIServerURL is what the control plane's kubeconfigs point at (the server's own port,
	// on loopback unless it binds one address).
	APIServerURL string
	// APIServerIPs and APIServerNames are the API server certificate's SANs (the advertised
	// address and --tls-san); ServiceIP the kubernetes Service's address, a SAN too.
	APIServerIPs   []net.IP
	APIServerNames []string
	ServiceIP      net.IP
	// Token, if set ("<id>.<secret>"), is the join token instead of a random one.
	Token string
	// AgentToken, if set, is a join token for agents only (k3s's --agent-token): it never
	// admits a server, which receives the CAs' keys. Kept in <data-dir>/agent-token.
	AgentToken string
	// NodeName, if set, is the agent beside the server: it gets node.kubeconfig and a serving
	// pair for NodeIPs.
	NodeName string
	NodeIPs  []net.IP
	// SecretsEncryption writes a generated aescbc EncryptionConfiguration (k3s's flag) unless
	// one exists.
	SecretsEncryption bool
	// EmbeddedEtcd makes the embedded member's data directory.
	EmbeddedEtcd bool
	// EtcdPeerIPs are the embedded member's peer addresses beyond loopback (its advertised
	// address when it has peers).
	EtcdPeerIPs []net.IP
	// Issued, if set, hears of every certificate issued (first start, renewal) and why.
	Issued func(cert, reason string)
	// CertificateLifetime is how long the leaf certificates and kubeconfigs issued last (a
	// year when zero).
	CertificateLifetime time.Duration
}

// ServerFiles is what PrepareServer leaves for the parts: where the PKI is and the join
// token the API server keeps as its bootstrap-token Secret.
type ServerFiles struct {
	PKI  pki.Layout
	Join bootstraptoken.JoinToken
	// AgentJoin is the agent-only token (zero without one).
	AgentJoin bootstraptoken.JoinToken
	// EncryptionConfig is the generated configuration ("" without SecretsEncryption).
	EncryptionConfig string
}

// kubeconfigs are the control plane's clients, as kubeadm writes admin.conf, scheduler.conf
// and controller-manager.conf: file name (layout.Server.Kubeconfig) → user and groups. The
// admin's embeds its certificate (it is copied to other machines); the others name files
// in pki/ (layout.PKI.KubeconfigClient), which their clients reload when renewed.
type kubeconfig struct {
	name, user string
	groups     []string
}

var kubeconfigs = []kubeconfig{
	{"admin", "kubernetes-admin", []string{"system:masters"}},
	{"scheduler", "system:kube-scheduler", nil},
	{"controller-manager", "system:kube-controller-manager", nil},
}

// PrepareServer writes what is missing of a server's files and returns where they are.
func PrepareServer(o Server, now time.Time) (ServerFiles, error) {
	certs, err := pki.Ensure(pki.Options{Dir: o.Dirs.PKI().Dir, APIServerIPs: o.APIServerIPs, APIServerNames: o.APIServerNames,
		ServiceIP: o.ServiceIP, EtcdPeerIPs: o.EtcdPeerIPs, Now: now, Issued: o.Issued, Lifetime: o.CertificateLifetime})
	if err != nil {
		return ServerFiles{}, fmt.Errorf("pki: %w", err)
	}
	ca, err := pki.LoadCA(certs.CA())
	if err != nil {
		return ServerFiles{}, err
	}
	join, err := EnsureJoinToken(o.Dirs.Token(), certs.CA().Cert, o.Token)
	if err != nil {
		return ServerFiles{}, fmt.Errorf("join token: %w", err)
	}
	files := ServerFiles{PKI: certs, Join: join}
	if files.AgentJoin, err = ensureAgentToken(o.Dirs.AgentToken(), certs.CA().Cert, o.AgentToken); err != nil {
		return files, fmt.Errorf("agent token: %w", err)
	}
	if files.AgentJoin.Token.ID != "" && files.AgentJoin.Token.ID == join.Token.ID {
		return files, fmt.Errorf("--agent-token has the id %q of the server token: the id names the token's Secret, so they must differ", join.Token.ID)
	}
	all := slices.Clone(kubeconfigs)
	if o.NodeName != "" {
		if err := writeAgentServingCert(certs, ca, o.NodeName, o.NodeIPs, now, o.CertificateLifetime, o.Issued); err != nil {
			return files, err
		}
		all = append(all, kubeconfig{"node", "system:node:" + o.NodeName, []string{"system:nodes"}})
	}
	for _, k := range all {
		kc := pki.Kubeconfig{Path: o.Dirs.Kubeconfig(k.name), Server: o.APIServerURL, User: k.user, Groups: k.groups,
			Lifetime: o.CertificateLifetime}
		if k.name != "admin" {
			pair := certs.KubeconfigClient(k.name)
			kc.Files = &pair
		}
		reason, err := kc.Write(ca, now)
		if err != nil {
			return files, fmt.Errorf("%s: %w", kc.Path, err)
		}
		if reason != "" && o.Issued != nil {
			o.Issued(kc.Path, reason)
		}
	}
	if o.SecretsEncryption {
		files.EncryptionConfig = o.Dirs.EncryptionConfig()
		if err := encryption.Generate(files.EncryptionConfig, now); err != nil {
			return files, fmt.Errorf("--secrets-encryption: %w", err)
		}
	}
	if o.EmbeddedEtcd {
		// etcd wants a data directory only its owner may read.
		if err := os.MkdirAll(o.Dirs.Etcd(), 0o700); err != nil {
			return files, err
		}
	}
	return files, nil
}

// EnsureJoinToken keeps the join token at path current: a preset token ("<id>.<secret>", or
// the whole "K10<CA hash>::<id>.<secret>" of a server joining, whose pin must be this CA's)
// replaces it; else
// the one there is kept (its CA hash updated when the CA changed); else a new one is made.
func EnsureJoinToken(path, caFile, preset string) (bootstraptoken.JoinToken, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return bootstraptoken.JoinToken{}, err
	}
	hash := bootstraptoken.CAHash(caPEM)
	if preset != "" {
		given, err := bootstraptoken.ParseJoin(preset)
		if err != nil {
			return bootstraptoken.JoinToken{}, fmt.Errorf("--token: %w", err)
		}
		if given.CAHash != "" && given.CAHash != hash && !holdsToken(path, given.Token) {
			return bootstraptoken.JoinToken{}, fmt.Errorf("--token pins the CA %s, but this server's CA (%s) is %s", given.CAHash, caFile, hash)
		}
		j := bootstraptoken.JoinToken{CAHash: hash, Token: given.Token}
		// A running server's renewal pass comes here hourly: write only what changed.
		if b, err := os.ReadFile(path); err == nil && string(b) == j.String()+"\n" {
			return j, nil
		}
		return j, os.WriteFile(path, []byte(j.String()+"\n"), 0o600)
	}
	if b, err := os.ReadFile(path); err == nil {
		j, err := bootstraptoken.ParseJoin(string(b))
		if err != nil {
			return bootstraptoken.JoinToken{}, fmt.Errorf("%s: %w", path, err)
		}
		if j.CAHash == hash {
			return j, nil
		}
		j.CAHash = hash
		return j, os.WriteFile(path, []byte(j.String()+"\n"), 0o600)
	} else if !errors.Is(err, os.ErrNotExist) {
		return bootstraptoken.JoinToken{}, err
	}
	t, err := bootstraptoken.Generate()
	if err != nil {
		return bootstraptoken.JoinToken{}, err
	}
	j := bootstraptoken.JoinToken{CAHash: hash, Token: t}
	return j, os.WriteFile(path, []byte(j.String()+"\n"), 0o600)
}

// ensureAgentToken is EnsureJoinToken for the agent-only token, which exists only when
// --agent-token gave one (now or on an earlier start: the file is kept).
func ensureAgentToken(path, caFile, preset string) (bootstraptoken.JoinToken, error) {
	if preset == "" {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return bootstraptoken.JoinToken{}, nil
		}
	}
	return EnsureJoinToken(path, caFile, preset)
}

// writeAgentServingCert issues the serving pair of the agent beside this server
// (pki/agent.crt), unless one is there that is still good for its addresses.
func writeAgentServingCert(l pki.Layout, ca *pki.Authority, node string, ips []net.IP, now time.Time, lifetime time.Duration, issued func(cert, reason string)) error {
	ips = append([]net.IP{net.ParseIP("127.0.0.1")}, ips...)
	reason := pki.Stale(l.AgentServing(), ca.Cert(), ips, now)
	if reason == "" {
		return nil
	}
	tmpl := x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		DNSNames:    []string{node, "localhost"},
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if lifetime > 0 {
		tmpl.NotAfter = now.Add(lifetime)
	}
	certPEM, keyPEM, err := ca.IssueAt(tmpl, now)
	if err != nil {
		return err
	}
	// The key first, each file whole: the agent's API reloads the pair (internal/certfile).
	if err := certfile.WriteWhole(l.AgentServing().Key, keyPEM, 0o600); err != nil {
		return err
	}
	if err := certfile.WriteWhole(l.AgentServing().Cert, certPEM, 0o644); err != nil {
		return err
	}
	if issued != nil {
		issued(l.AgentServing().Cert, reason)
	}
	return nil
}

// holdsToken says whether the token file at path already holds token: a data directory of
// the cluster the token is for, whose CA bundle has changed since the token's pin was taken
// (a CA rotation — `skiff certificate rotate-ca` — keeps the token and changes the hash).
func holdsToken(path string, token bootstraptoken.Token) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	j, err := bootstraptoken.ParseJoin(string(b))
	return err == nil && j.Token == token
}
