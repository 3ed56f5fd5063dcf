package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // a subject key identifier, as RFC 5280 4.2.1.2 describes it
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/skiff-sh/skiff/internal/certfile"
)

// The CA rotation is Kubernetes' documented manual procedure ("Manual Rotation of CA
// Certificates") made two commands, with a cross-signed certificate so that nothing has to
// trust the new CA before it is used:
//
//  1. RotateCA makes a new CA for each chosen one. Its certificate file becomes a bundle,
//     the new CA then the old, so every verifier that reads it (the API server's client CA,
//     etcd's, kubeconfigs, /cacerts, the pods' kube-root-ca.crt) trusts both; its key is the
//     new one, so every certificate issued from then on (the next start of the server, the
//     CSR signer) comes from the new CA; and the new CA signed by the old key is kept beside
//     it (Pair.CrossSigned) and appended to every leaf the server issues, so a peer that still
//     trusts only the old CA — an agent, a copied kubeconfig — verifies those leaves too.
//     Agents fetch the bundle (agent/join.Renewer) and renew into the new CA.
//  2. CompleteCARotation drops the old CA from the bundles and the cross-signed certificate
//     from the chains: from then on a certificate of the old CA is refused.

// CANames are the cluster's CAs, by the names `skiff certificate check` lists.
var CANames = []string{"ca", "etcd/ca", "front-proxy-ca"}

// CAs are the cluster's CA pairs by CANames.
func CAs(l Layout) map[string]Pair {
	return map[string]Pair{"ca": l.CA(), "etcd/ca": l.EtcdCA(), "front-proxy-ca": l.FrontProxyCA()}
}

// RotateCA starts the rotation of the named CAs (CANames; all when names is empty) as at
// now, and returns the files it wrote. A CA whose previous rotation is not complete is
// refused: its old CA may still be the only one some peers trust.
func RotateCA(l Layout, names []string, now time.Time) ([]string, error) {
	if len(names) == 0 {
		names = CANames
	}
	pairs := CAs(l)
	for _, name := range names { // every name checked before anything is written
		p, ok := pairs[name]
		if !ok {
			return nil, fmt.Errorf("no CA %q; known: %s", name, strings.Join(CANames, ", "))
		}
		if exists(p.CrossSigned()) {
			return nil, fmt.Errorf("the rotation of %s is not complete (%s exists): complete it first", name, p.CrossSigned())
		}
	}
	var wrote []string
	for _, name := range names {
		p := pairs[name]
		old, err := loadCA(p)
		if err != nil {
			return wrote, fmt.Errorf("%s: %w", name, err)
		}
		newPEM, crossPEM, keyPEM, err := successor(old, now)
		if err != nil {
			return wrote, fmt.Errorf("%s: %w", name, err)
		}
		// Cross-signed certificate first: a crash before the pair is replaced leaves the old
		// CA in place and a stray file the next RotateCA refuses, not a bundle without it.
		if err := certfile.WriteWhole(p.CrossSigned(), crossPEM, 0o644); err != nil {
			return wrote, err
		}
		bundle := append(newPEM, pemBlock("CERTIFICATE", old.cert.Raw)...)
		if err := writePair(p, bundle, keyPEM); err != nil {
			return wrote, err
		}
		wrote = append(wrote, p.Cert, p.Key, p.CrossSigned())
	}
	return wrote, nil
}

// successor makes a CA to replace old: a new key, a self-signed certificate named after the
// old one with the time (kubernetes@1765000000, as k3s names its CAs), and the same
// certificate signed by old.
func successor(old *authority, now time.Time) (selfPEM, crossPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, nil, err
	}
	ski := sha1.Sum(pub) //nolint:gosec // an identifier, not a security property
	base, _, _ := strings.Cut(old.cert.Subject.CommonName, "@")
	tmpl := x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: base + "@" + strconv.FormatInt(now.Unix(), 10)},
		SubjectKeyId:          ski[:],
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	self, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, nil, err
	}
	// The cross-signed one is valid no longer than the CA that vouches for it.
	cross := tmpl
	cross.SerialNumber = serial()
	cross.NotAfter = minTime(tmpl.NotAfter, old.cert.NotAfter)
	crossDER, err := x509.CreateCertificate(rand.Reader, &cross, old.cert, key.Public(), old.key)
	if err != nil {
		return nil, nil, nil, err
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pemBlock("CERTIFICATE", self), pemBlock("CERTIFICATE", crossDER), keyPEM, nil
}

// CompleteCARotation ends every rotation under way: each bundle keeps only the new CA and the
// cross-signed certificate is removed, so the next start of the server issues its leaves
// again without it and trusts the old CA no more. It returns the files it changed; with no
// rotation under way it does nothing.
func CompleteCARotation(l Layout) ([]string, error) {
	var changed []string
	for _, name := range CANames {
		p := CAs(l)[name]
		if !exists(p.CrossSigned()) {
			continue
		}
		b, err := os.ReadFile(p.Cert)
		if err != nil {
			return changed, err
		}
		certs, err := certutil.ParseCertsPEM(b)
		if err != nil {
			return changed, fmt.Errorf("%s: %w", p.Cert, err)
		}
		if own := pemBlock("CERTIFICATE", certs[0].Raw); !bytes.Equal(own, b) {
			if err := certfile.WriteWhole(p.Cert, own, 0o644); err != nil {
				return changed, err
			}
			changed = append(changed, p.Cert)
		}
		if err := os.Remove(p.CrossSigned()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return changed, err
		}
		changed = append(changed, p.CrossSigned())
	}
	return changed, nil
}

// RotationsUnderway names the CAs whose rotation is not complete.
func RotationsUnderway(l Layout) []string {
	var names []string
	for _, name := range CANames {
		if exists(CAs(l)[name].CrossSigned()) {
			names = append(names, name)
		}
	}
	return slices.Clip(names)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// CAFiles is one CA as a server holds it: its certificate file (a bundle during a rotation),
// its key, and the cross-signed successor (nil when no rotation is under way).
type CAFiles struct{ Cert, Key, Cross []byte }

// Succeeds says whether next is a later step of a rotation of cur — what another server of
// the cluster holds after `skiff certificate rotate-ca` there: the start of one (next is a
// bundle whose new CA cur's CA signed, as next's cross-signed certificate proves, followed by
// cur's CA) or its completion (next holds cur's new CA alone). Anything else — the same
// files, an unrelated CA, a step back — is not a successor: a server never takes a CA its own
// does not vouch for.
func Succeeds(next, cur CAFiles) bool {
	nextBundle, err1 := certutil.ParseCertsPEM(next.Cert)
	curBundle, err2 := certutil.ParseCertsPEM(cur.Cert)
	if err1 != nil || err2 != nil || !keyMatches(next.Key, nextBundle[0]) {
		return false
	}
	switch {
	case len(cur.Cross) == 0 && len(next.Cross) > 0:
		crosses, err := certutil.ParseCertsPEM(next.Cross)
		if err != nil || len(nextBundle) != 2 || !nextBundle[1].Equal(curBundle[0]) {
			return false
		}
		cross := crosses[0]
		return cross.CheckSignatureFrom(curBundle[0]) == nil &&
			bytes.Equal(cross.RawSubjectPublicKeyInfo, nextBundle[0].RawSubjectPublicKeyInfo)
	case len(cur.Cross) > 0 && len(next.Cross) == 0:
		return len(curBundle) == 2 && len(nextBundle) == 1 && nextBundle[0].Equal(curBundle[0])
	}
	return false
}

// keyMatches says whether keyPEM is the private key of cert.
func keyMatches(keyPEM []byte, cert *x509.Certificate) bool {
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return false
	}
	signer, ok := key.(crypto.Signer)
	return ok && signerOf(signer, cert)
}

// signerOf says whether signer holds the private key of cert.
func signerOf(signer crypto.Signer, cert *x509.Certificate) bool {
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(cert.PublicKey)
}
