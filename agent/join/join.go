// Package join gives a new node its credentials from a join token, as k3s's agent and
// kubeadm's TLS bootstrap do:
//
//  1. fetch the cluster CA from the server's /cacerts over unverified TLS and keep it only if
//     its SHA-256 equals the hash pinned in the token (so a man in the middle learns nothing
//     and the token is never sent before the server is verified);
//  2. authenticated by the bootstrap token, request a client certificate CN=system:node:<name>,
//     O=system:nodes through a CertificateSigningRequest (signer
//     kubernetes.io/kube-apiserver-client-kubelet) that the control plane's csrapproving and
//     csrsigning controllers approve and sign;
//  3. as the node, request a serving certificate for the agent API (signer
//     kubernetes.io/kubelet-serving) with the node's addresses as SANs.
//
// Credentials that are already on disk and still valid are reused, so a restarting agent
// does not need the token again.
package join

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"

	"github.com/skiff-sh/skiff/internal/bootstraptoken"
	"github.com/skiff-sh/skiff/internal/certfile"
	"github.com/skiff-sh/skiff/internal/certrenew"
	"github.com/skiff-sh/skiff/internal/layout"
)

// Options describe the node that joins.
type Options struct {
	// Server is the API server's URL (https://IP:6443).
	Server string
	// Token is the join token from the server's <data-dir>/token.
	Token string
	// Dir receives node.kubeconfig and pki/{ca.crt,client.crt,client.key,agent.crt,agent.key}.
	Dir string
	// NodeName names the node; the certificates are for system:node:<NodeName>.
	NodeName string
	// IPs and DNSNames are the serving certificate's SANs.
	IPs      []net.IP
	DNSNames []string
	// Timeout bounds waiting for each certificate (2 minutes when zero).
	Timeout time.Duration
}

// Result names the files Ensure wrote or found.
type Result struct {
	Kubeconfig, CAFile, ServingCert, ServingKey string
}

// Paths returns where Ensure keeps credentials under dir.
func Paths(dir string) Result {
	a := layout.Agent{Dir: dir}
	return Result{Kubeconfig: a.Kubeconfig(), CAFile: a.PKI().CA().Cert,
		ServingCert: a.PKI().AgentServing().Cert, ServingKey: a.PKI().AgentServing().Key}
}

// Ensure makes sure the node has a CA, a client kubeconfig and a serving certificate.
func Ensure(ctx context.Context, o Options, log *slog.Logger) (Result, error) {
	res := Paths(o.Dir)
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if err := os.MkdirAll(filepath.Dir(res.CAFile), 0o700); err != nil {
		return res, err
	}
	jt, err := bootstraptoken.ParseJoin(o.Token)
	if err != nil {
		return res, err
	}
	if jt.CAHash == "" {
		log.Warn("the join token pins no CA: trusting the server's CA on first use (use the full K10… token from <server data dir>/token to pin it)")
	}
	// A server that was just started may not answer yet, nor know its own bootstrap token
	// (it writes the token file before the token's Secret is stored): like the kubelet's TLS
	// bootstrap, the agent retries what may be transient until o.Timeout, and fails at once
	// on what is not (a CA that does not match the pin, an invalid request).
	var caPEM []byte
	if err := retryTransient(ctx, o.Timeout, log, "fetching the cluster CA", func() error {
		var err error
		caPEM, err = ensureCA(ctx, o.Server, jt.CAHash, res.CAFile, layout.Agent{Dir: o.Dir}.PKI().CAPin())
		return err
	}); err != nil {
		return res, err
	}
	user := "system:node:" + o.NodeName
	client := layout.Agent{Dir: o.Dir}.PKI().AgentClient()
	clientCert, clientKey := client.Cert, client.Key
	if !usable(clientCert, clientKey, caPEM, func(c *x509.Certificate) bool { return c.Subject.CommonName == user }) {
		boot, err := kubernetes.NewForConfig(&rest.Config{Host: o.Server, BearerToken: jt.Token.String(),
			TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, UserAgent: "skiff-agent/join"})
		if err != nil {
			return res, err
		}
		log.Info("requesting a node client certificate", "server", o.Server, "user", user)
		if err := retryTransient(ctx, o.Timeout, log, "requesting a node client certificate", func() error {
			return request(ctx, boot, o.Timeout, clientCert, clientKey, certificatesv1.KubeAPIServerClientKubeletSignerName,
				&x509.CertificateRequest{Subject: pkix.Name{CommonName: user, Organization: []string{"system:nodes"}}},
				[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth})
		}); err != nil {
			return res, fmt.Errorf("node client certificate: %w", err)
		}
	}
	if err := writeKubeconfig(res.Kubeconfig, o.Server, user, caPEM, clientCert, clientKey); err != nil {
		return res, err
	}
	wantIPs, wantDNS := o.IPs, o.DNSNames
	if !usable(res.ServingCert, res.ServingKey, caPEM, func(c *x509.Certificate) bool {
		return c.Subject.CommonName == user && sameIPs(c.IPAddresses, wantIPs) && slices.Equal(c.DNSNames, wantDNS)
	}) {
		cfg, err := clientcmd.BuildConfigFromFlags("", res.Kubeconfig)
		if err != nil {
			return res, err
		}
		node, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return res, err
		}
		log.Info("requesting a serving certificate for the agent API", "ips", wantIPs, "dns", wantDNS)
		if err := request(ctx, node, o.Timeout, res.ServingCert, res.ServingKey, certificatesv1.KubeletServingSignerName,
			&x509.CertificateRequest{Subject: pkix.Name{CommonName: user, Organization: []string{"system:nodes"}}, IPAddresses: wantIPs, DNSNames: wantDNS},
			[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}); err != nil {
			return res, fmt.Errorf("agent serving certificate: %w", err)
		}
	}
	return res, nil
}

// Renewer rotates a joined agent's client and serving certificates while it runs, as the
// kubelet's certificate manager does: each is renewed through a CSR made with the node's own
// identity (approved as a node's renewal of its own) when it is due (internal/certrenew), and
// written in place — the agent's API client reloads its files, and the agent API its pair.
type Renewer struct {
	Options
	// Node is a client with the node's current credentials.
	Node kubernetes.Interface
	Log  *slog.Logger
	// MaxWait caps the time between checks (10 minutes when zero).
	MaxWait time.Duration
}

// Run renews each certificate when it is due until ctx ends; a failed renewal is tried again
// a minute later, and fails the part once the certificate has expired.
func (r Renewer) Run(ctx context.Context) error {
	if r.Timeout == 0 {
		r.Timeout = 2 * time.Minute
	}
	maxWait := r.MaxWait
	if maxWait == 0 {
		maxWait = 10 * time.Minute
	}
	res := Paths(r.Dir)
	client := layout.Agent{Dir: r.Dir}.PKI().AgentClient()
	user := "system:node:" + r.NodeName
	certs := []struct {
		name, cert, key, signer string
		tmpl                    func() *x509.CertificateRequest
		usages                  []certificatesv1.KeyUsage
	}{
		{"client", client.Cert, client.Key, certificatesv1.KubeAPIServerClientKubeletSignerName,
			func() *x509.CertificateRequest {
				return &x509.CertificateRequest{Subject: pkix.Name{CommonName: user, Organization: []string{"system:nodes"}}}
			},
			[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
		{"serving", res.ServingCert, res.ServingKey, certificatesv1.KubeletServingSignerName,
			func() *x509.CertificateRequest {
				return &x509.CertificateRequest{Subject: pkix.Name{CommonName: user, Organization: []string{"system:nodes"}}, IPAddresses: r.IPs, DNSNames: r.DNSNames}
			},
			[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}},
	}
	renewed := map[string]time.Time{}
	for {
		next := time.Now().Add(maxWait)
		bundle, err := readBundle(res.CAFile)
		if err != nil {
			return fmt.Errorf("cluster CA: %w", err)
		}
		for _, c := range certs {
			cert, err := certfile.Read(c.cert)
			if err != nil {
				return fmt.Errorf("%s certificate: %w", c.name, err)
			}
			// During a CA rotation a certificate of the old CA is renewed at once, so that
			// the rotation can be completed.
			oldCA := fromOldCA(cert, bundle)
			if due := certrenew.DueAt(cert); time.Now().Before(due) && !oldCA {
				next = minTime(next, due)
				continue
			}
			// A signer that issues certificates due at once (lifetimes of minutes) gets a CSR
			// a minute, not a stream of them.
			if again := renewed[c.name].Add(time.Minute); time.Now().Before(again) {
				next = minTime(next, again)
				continue
			}
			renewed[c.name] = time.Now()
			r.Log.Info("renewing the agent's certificate", "which", c.name, "expires", cert.NotAfter,
				"issuer", cert.Issuer.CommonName, "old CA", oldCA)
			if err := request(ctx, r.Node, r.Timeout, c.cert, c.key, c.signer, c.tmpl(), c.usages); err != nil {
				if time.Now().After(cert.NotAfter) {
					return fmt.Errorf("renewing the %s certificate, which expired at %s: %w", c.name, cert.NotAfter, err)
				}
				r.Log.Warn("renewing the agent's certificate; trying again in a minute", "which", c.name, "err", err)
				next = minTime(next, time.Now().Add(time.Minute))
				continue
			}
			r.Log.Info("agent certificate renewed", "which", c.name)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(next)):
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// Permanent says whether err (of FetchCA) is one that retrying cannot fix: a CA that does not
// match the pin, or a server that does not prove it holds a certificate of it.
func Permanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// transient says whether err may pass by itself: the server not listening or not ready yet,
// not yet knowing the bootstrap token (401), or refusing it (403) because its RBAC policy is
// still being loaded — a server's first second, as with kube-apiserver, whose kubelets retry
// too; a token that truly lacks the rights fails when the timeout passes, with the refusal.
// Not a bad request, or a CA that does not match the pin.
func transient(err error) bool {
	var p permanent
	if errors.As(err, &p) {
		return false
	}
	if apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) || apierrors.IsNotFound(err) {
		return false
	}
	return true
}

// retryTransient calls f until it succeeds, fails permanently, or timeout passes (Retry).
func retryTransient(ctx context.Context, timeout time.Duration, log *slog.Logger, what string, f func() error) error {
	return Retry(ctx, timeout, transient, func(err error, wait time.Duration) {
		log.Warn("retrying", "what", what, "err", err, "in", wait)
	}, f)
}

// Retry calls f until it succeeds, fails with an error retryable refuses, ctx ends, or the
// next try would come after timeout, waiting 1 s, 2 s, … 10 s between tries and telling
// failed of each error it tries again after. It returns f's last error.
func Retry(ctx context.Context, timeout time.Duration, retryable func(error) bool, failed func(err error, wait time.Duration), f func() error) error {
	deadline := time.Now().Add(timeout)
	wait := time.Second
	for {
		err := f()
		if err == nil || !retryable(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		failed(err, wait)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// ensureCA returns the pinned CA, from disk when it still matches the pin — or was first
// trusted under it (pinFile) and has changed since only through the server's /cacerts over
// TLS it verified (TrustWatcher, after a CA rotation).
func ensureCA(ctx context.Context, server, pin, file, pinFile string) ([]byte, error) {
	if b, err := os.ReadFile(file); err == nil {
		if pin == "" || bootstraptoken.CAHash(b) == pin {
			return b, nil
		}
		if admitted, err := os.ReadFile(pinFile); err == nil && strings.TrimSpace(string(admitted)) == pin {
			return b, nil
		}
	}
	caPEM, err := FetchCA(ctx, server, pin)
	if err != nil {
		return nil, err
	}
	if err := certfile.WriteWhole(file, caPEM, 0o644); err != nil {
		return nil, err
	}
	return caPEM, certfile.WriteWhole(pinFile, []byte(bootstraptoken.CAHash(caPEM)+"\n"), 0o644)
}

// FetchCA reads server/cacerts and returns it only if it hashes to pin (any CA when pin is
// empty) and the server's own certificate verifies against it.
func FetchCA(ctx context.Context, server, pin string) ([]byte, error) {
	get := func(tlsCfg *tls.Config) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/cacerts", nil)
		if err != nil {
			return nil, err
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
		defer c.CloseIdleConnections()
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s/cacerts: %s", server, resp.Status)
		}
		return body, nil
	}
	// The pin, not TLS, authenticates this first answer.
	caPEM, err := get(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // verified by the pin below
	if err != nil {
		return nil, fmt.Errorf("fetching the cluster CA: %w", err)
	}
	if got := bootstraptoken.CAHash(caPEM); pin != "" && got != pin {
		return nil, permanent{fmt.Errorf("the server's CA (sha256 %s) does not match the join token's pin %s: wrong server or wrong token", got, pin)}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, permanent{errors.New("the server's /cacerts holds no certificate")}
	}
	// Now the server must prove it holds a certificate from that CA.
	if _, err := get(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}); err != nil {
		return nil, permanent{fmt.Errorf("the server's certificate is not from the pinned CA: %w", err)}
	}
	return caPEM, nil
}

// request creates a CSR for a new key and waits for the certificate, then writes both.
func request(ctx context.Context, client kubernetes.Interface, timeout time.Duration, certFile, keyFile, signer string,
	tmpl *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return err
	}
	csrPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	name, uid, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, csrName(key.Public(), signer), signer, nil, usages, key)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, client, name, uid)
	if err != nil {
		return fmt.Errorf("waiting for CSR %s to be approved and signed: %w", name, err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}
	// Each file replaced whole (a reader never sees half of one); the key first, so a reader
	// between the two renames finds a pair that does not match, refuses it and keeps the one
	// it has (client-go's reloader and the agent API's both do).
	if err := keyutil.WriteKey(keyFile+".new", keyPEM); err != nil {
		return err
	}
	if err := certutil.WriteCert(certFile+".new", certPEM); err != nil {
		return err
	}
	if err := os.Rename(keyFile+".new", keyFile); err != nil {
		return err
	}
	return os.Rename(certFile+".new", certFile)
}

// csrName is deterministic per key, as the kubelet's "node-csr-<digest>": retrying with the
// same key finds the CSR it already made instead of creating another.
func csrName(pub crypto.PublicKey, signer string) string {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(append(der, signer...))
	return "node-csr-" + hex.EncodeToString(sum[:16])
}

// usable reports whether certFile/keyFile form a pair signed by the CA, not yet due for
// renewal (internal/certrenew), that ok accepts.
func usable(certFile, keyFile string, caPEM []byte, ok func(*x509.Certificate) bool) bool {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return false
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || certrenew.Due(cert, time.Now()) || !ok(cert) {
		return false
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

func sameIPs(a, b []net.IP) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func writeKubeconfig(path, server, user string, caPEM []byte, certFile, keyFile string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["skiff"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "skiff", AuthInfo: user}
	cfg.CurrentContext = "default"
	return clientcmd.WriteToFile(*cfg, path)
}
