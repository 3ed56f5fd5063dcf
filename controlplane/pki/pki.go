// Package pki lays out and loads the cluster's certificates the way kubeadm does under
// /etc/kubernetes/pki: a cluster CA with the API server's serving and kubelet-client pairs, the
// service-account signing key, and a separate etcd CA with server, peer, health-check and
// apiserver-etcd-client pairs. Missing files are generated on first start; existing ones are
// reused, so restarts keep every issued credential valid.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/skiff-sh/skiff/internal/certfile"
	"github.com/skiff-sh/skiff/internal/certrenew"
	"github.com/skiff-sh/skiff/internal/layout"
)

// Options say what the certificates are issued for.
type Options struct {
	// Dir is the PKI directory, <data-dir>/pki.
	Dir string
	// APIServerIPs are extra IP SANs of the API server certificate (127.0.0.1 and the first
	// service IP are always included).
	APIServerIPs []net.IP
	// APIServerNames are extra DNS SANs of the API server certificate.
	APIServerNames []string
	// ServiceIP is the first address of the service CIDR (the kubernetes Service).
	ServiceIP net.IP
	// EtcdPeerIPs are extra IP SANs of etcd's peer certificate: the advertised address of a
	// server whose member has peers (HA with embedded etcd).
	EtcdPeerIPs []net.IP
	// Now is when certificates are checked and issued (time.Now when zero).
	Now time.Time
	// Lifetime is how long a leaf certificate lasts (a year when zero; --certificate-lifetime).
	Lifetime time.Duration
	// Issued, if set, hears of every leaf certificate issued and why.
	Issued func(cert, reason string)
}

// RenewBefore is how long before it expires a leaf certificate is issued again when a server
// starts, as k3s renews within 90 days of expiry (internal/certrenew: or within the last
// quarter of a shorter lifetime). Leaves last a year, CAs ten.
const RenewBefore = certrenew.Before

// Pair is a certificate and key file pair; Layout names every file of the PKI (both are
// internal/layout's, which owns every path skiff keeps).
type (
	Pair   = layout.Pair
	Layout = layout.PKI
)

// FrontProxyClientName is the aggregation layer's client certificate's common name, the one
// extension API servers allow (requestheader-allowed-names).
const FrontProxyClientName = "front-proxy-client"

// Ensure creates whatever part of the PKI is missing and returns its layout.
func Ensure(o Options) (Layout, error) {
	l := Layout{Dir: o.Dir}
	if err := os.MkdirAll(filepath.Join(o.Dir, "etcd"), 0o700); err != nil {
		return l, err
	}
	ca, err := ensureCA(l.CA(), "kubernetes")
	if err != nil {
		return l, err
	}
	etcdCA, err := ensureCA(l.EtcdCA(), "etcd-ca")
	if err != nil {
		return l, err
	}
	frontProxyCA, err := ensureCA(l.FrontProxyCA(), "front-proxy-ca")
	if err != nil {
		return l, err
	}
	host, _ := os.Hostname()
	ips := append([]net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}, o.APIServerIPs...)
	if o.ServiceIP != nil {
		ips = append(ips, o.ServiceIP)
	}
	names := append([]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", "localhost", host}, o.APIServerNames...)
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	peerIPs := append(slices.Clone(loopback), o.EtcdPeerIPs...)
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	leaves := []struct {
		pair   Pair
		ca     *authority
		tmpl   x509.Certificate
		usages []x509.ExtKeyUsage
	}{
		{l.APIServer(), ca, x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"}, DNSNames: names, IPAddresses: ips},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{l.APIServerKubeletClient(), ca, x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{l.EtcdServer(), etcdCA, x509.Certificate{Subject: pkix.Name{CommonName: host}, DNSNames: []string{host, "localhost"}, IPAddresses: loopback},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{l.EtcdPeer(), etcdCA, x509.Certificate{Subject: pkix.Name{CommonName: host}, DNSNames: []string{host, "localhost"}, IPAddresses: peerIPs},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{l.EtcdHealthcheckClient(), etcdCA, x509.Certificate{Subject: pkix.Name{CommonName: "kube-etcd-healthcheck-client"}},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{l.APIServerEtcdClient(), etcdCA, x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver-etcd-client"}},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{l.FrontProxyClient(), frontProxyCA, x509.Certificate{Subject: pkix.Name{CommonName: FrontProxyClientName}},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	}
	for _, leaf := range leaves {
		reason := Stale(leaf.pair, leaf.ca.cert, leaf.tmpl.IPAddresses, now)
		if reason == "" {
			reason = leaf.ca.chainStale(leaf.pair.Cert)
		}
		if reason == "" {
			continue
		}
		leaf.tmpl.ExtKeyUsage = leaf.usages
		leaf.tmpl.NotAfter = notAfter(now, o.Lifetime)
		certPEM, keyPEM, err := leaf.ca.issueAt(leaf.tmpl, now)
		if err != nil {
			return l, fmt.Errorf("issue %s: %w", leaf.pair.Cert, err)
		}
		if err := writePair(leaf.pair, certPEM, keyPEM); err != nil {
			return l, err
		}
		if o.Issued != nil {
			o.Issued(leaf.pair.Cert, reason)
		}
	}
	if !exists(l.SAKey()) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return l, err
		}
		keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
		if err != nil {
			return l, err
		}
		pubPEM, err := encodePublicKey(key.Public())
		if err != nil {
			return l, err
		}
		if err := keyutil.WriteKey(l.SAKey(), keyPEM); err != nil {
			return l, err
		}
		if err := os.WriteFile(l.SAPub(), pubPEM, 0o644); err != nil {
			return l, err
		}
	}
	return l, nil
}

// LoadCA reads a CA pair so it can issue further certificates.
func LoadCA(p Pair) (*Authority, error) {
	a, err := loadCA(p)
	if err != nil {
		return nil, err
	}
	return (*Authority)(a), nil
}

// Authority issues certificates signed by a CA.
type Authority authority

// Issue signs a certificate for the template and returns PEM-encoded cert and key.
func (a *Authority) Issue(tmpl x509.Certificate) (certPEM, keyPEM []byte, err error) {
	return (*authority)(a).Issue(tmpl)
}

// IssueAt signs a certificate for the template as at now (its NotAfter, if set, kept).
func (a *Authority) IssueAt(tmpl x509.Certificate, now time.Time) (certPEM, keyPEM []byte, err error) {
	return (*authority)(a).issueAt(tmpl, now)
}

// Cert is the CA certificate.
func (a *Authority) Cert() *x509.Certificate { return a.cert }

// CertPEM is the CA certificate in PEM form.
func (a *Authority) CertPEM() []byte { return a.certPEM }

type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	// chain follows every certificate issued while a rotation of this CA is under way: the
	// new CA signed by the old one (Pair.CrossSigned), so peers that still trust only the
	// old CA verify what the new one issues.
	chain []byte
}

func ensureCA(p Pair, cn string) (*authority, error) {
	if exists(p.Cert) && exists(p.Key) {
		return loadCA(p)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM := pemBlock("CERTIFICATE", cert.Raw)
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, err
	}
	if err := writePair(p, certPEM, keyPEM); err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, certPEM: certPEM}, nil
}

func loadCA(p Pair) (*authority, error) {
	certPEM, err := os.ReadFile(p.Cert)
	if err != nil {
		return nil, err
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Cert, err)
	}
	key, err := keyutil.PrivateKeyFromFile(p.Key)
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", p.Key)
	}
	// The pair is written as two files (a CA rotation replaces both): refuse a torn one
	// rather than issue certificates no peer can verify.
	if !signerOf(signer, certs[0]) {
		return nil, fmt.Errorf("%s is not the key of the first certificate in %s (an interrupted CA rotation? copy both files from another server of the cluster)", p.Key, p.Cert)
	}
	a := &authority{cert: certs[0], key: signer, certPEM: certPEM}
	if a.chain, err = os.ReadFile(p.CrossSigned()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return a, nil
}

// chainStale says why the certificate file must be issued again for the chain it carries
// after its leaf ("" when that is right): the cross-signed CA while a rotation is under way,
// nothing once it is complete.
func (a *authority) chainStale(certFile string) string {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return a.chainStalePEM(b)
}

func (a *authority) chainStalePEM(certPEM []byte) string {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	var want []*x509.Certificate
	if len(a.chain) > 0 {
		if want, err = certutil.ParseCertsPEM(a.chain); err != nil {
			return "the cross-signed CA is unreadable: " + err.Error()
		}
	}
	got := certs[1:]
	if slices.EqualFunc(got, want, func(a, b *x509.Certificate) bool { return a.Equal(b) }) {
		return ""
	}
	if len(want) > 0 {
		return "lacks the cross-signed CA of the rotation under way"
	}
	return "carries the cross-signed CA of a finished rotation"
}

func (a *authority) Issue(tmpl x509.Certificate) ([]byte, []byte, error) {
	return a.issueAt(tmpl, time.Now())
}

func (a *authority) issueAt(tmpl x509.Certificate, now time.Time) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial()
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = notAfter(now, 0)
	}
	// Valid from a little before now, for machines whose clocks lag ours: an hour, or a tenth
	// of a short lifetime (an hour would put a certificate of minutes in its last quarter,
	// due for renewal, from the moment it is issued).
	tmpl.NotBefore = now.Add(-min(time.Hour, tmpl.NotAfter.Sub(now)/10))
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return append(pemBlock("CERTIFICATE", cert.Raw), a.chain...), keyPEM, nil
}

// writePair replaces a pair, each file whole and the key first: a process loading the pair
// between the two renames finds a key that does not match and keeps the pair it has
// (internal/certfile.Pair, and the API server's own reloading, do).
func writePair(p Pair, certPEM, keyPEM []byte) error {
	if err := certfile.WriteWhole(p.Key, keyPEM, 0o600); err != nil {
		return err
	}
	return certfile.WriteWhole(p.Cert, certPEM, 0o644)
}

// notAfter is when a leaf issued at now expires: after lifetime, or a year when 0.
func notAfter(now time.Time, lifetime time.Duration) time.Time {
	if lifetime <= 0 {
		return now.AddDate(1, 0, 0)
	}
	return now.Add(lifetime)
}

func encodePublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pemBlock("PUBLIC KEY", der), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

// Stale says why the leaf pair must be issued again ("" when it need not): missing or
// unreadable, expiring within RenewBefore of now, not signed by ca (the CA was rotated), or
// without one of ips among its SANs (an address added, as --cluster-init adds the peer's).
func Stale(p Pair, ca *x509.Certificate, ips []net.IP, now time.Time) string {
	if !exists(p.Cert) || !exists(p.Key) {
		return "missing"
	}
	c, err := certfile.Read(p.Cert)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return staleCert(c, ca, ips, now)
}

func staleCert(c *x509.Certificate, ca *x509.Certificate, ips []net.IP, now time.Time) string {
	if certrenew.Due(c, now) {
		return "expires " + c.NotAfter.UTC().Format(time.RFC3339)
	}
	if ca != nil && c.CheckSignatureFrom(ca) != nil {
		return "not signed by the current CA"
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return "lacks the address " + ip.String()
		}
	}
	return ""
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
