// Package csrsigning issues certificates for approved CertificateSigningRequests of the
// built-in kubernetes.io signers a cluster needs (kube-apiserver-client-kubelet,
// kubelet-serving and kube-apiserver-client) with the cluster CA, as upstream's csrsigning
// controller does. Without it approved kubelet bootstrap, rotation and serving requests, and
// user client certificates, would wait forever.
//
// A request the signer can never honour (wrong subject or usages for its signer, a broken
// request) gets a Failed condition instead of being retried.
package csrsigning

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"reflect"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "csrsigning"

// DefaultDuration is the longest lifetime of an issued certificate unless Options say otherwise.
const DefaultDuration = 365 * 24 * time.Hour

// FailureReason is the reason of the Failed condition on a request the signer refuses.
const FailureReason = "SignerValidationFailure"

const (
	// backdate covers clocks slightly behind the signer's.
	backdate = 5 * time.Minute
	// minDuration is upstream's floor on a requested lifetime (twice the backdate).
	minDuration = 10 * time.Minute
)

// Options configure the signer.
type Options struct {
	// Duration is the longest lifetime of an issued certificate (DefaultDuration when zero);
	// spec.expirationSeconds may ask for less.
	Duration time.Duration
}

// Controller signs approved CSRs.
type Controller struct {
	client   kubernetes.Interface
	csrs     certlisters.CertificateSigningRequestLister
	synced   cache.InformerSynced
	loop     *loop.Loop
	log      *slog.Logger
	ca       *x509.Certificate
	key      crypto.Signer
	duration time.Duration
	now      func() time.Time
}

// New wires the controller; caCertPEM and caKeyPEM are the cluster CA and its RSA or ECDSA key.
func New(client kubernetes.Interface, csrs certinformers.CertificateSigningRequestInformer, caCertPEM, caKeyPEM []byte, o Options, log *slog.Logger) (*Controller, error) {
	ca, key, err := loadCA(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, err
	}
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	c := &Controller{client: client, csrs: csrs.Lister(), synced: csrs.Informer().HasSynced,
		log: log.With("controller", Name), ca: ca, key: key, duration: o.Duration, now: time.Now}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = csrs.Informer().AddEventHandler(c.loop.Handler())
	return c, nil
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.loop.Run(ctx, 1)
}

func loadCA(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	k, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	key, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("CA key: %T cannot sign", k)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(certs[0].PublicKey) {
		return nil, nil, errors.New("CA key does not match the CA certificate")
	}
	return certs[0], key, nil
}

func (c *Controller) sync(ctx context.Context, name string) error {
	csr, err := c.csrs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !needsSigning(csr) {
		return nil
	}
	now := c.now()
	certPEM, err := Sign(c.ca, c.key, csr, now, c.duration)
	var refused *RequestError
	switch {
	case errors.As(err, &refused):
		c.log.Info("refusing", "csr", name, "signer", csr.Spec.SignerName, "reason", refused)
		csr = csr.DeepCopy()
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue,
			Reason: FailureReason, Message: refused.Error(), LastUpdateTime: metav1.NewTime(now),
		})
	case err != nil:
		return fmt.Errorf("signing csr %s: %w", name, err)
	default:
		csr = csr.DeepCopy()
		csr.Status.Certificate = certPEM
	}
	_, err = c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating csr %s: %w", name, err)
	}
	if refused == nil {
		c.log.Info("signed", "csr", name, "signer", csr.Spec.SignerName)
	}
	return nil
}

// needsSigning says whether csr is for one of our signers, approved, and neither signed nor
// failed yet.
func needsSigning(csr *certificatesv1.CertificateSigningRequest) bool {
	if _, ok := signers[csr.Spec.SignerName]; !ok || len(csr.Status.Certificate) > 0 {
		return false
	}
	approved := false
	for _, c := range csr.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return false
		}
	}
	return approved
}

// RequestError is a request the signer will never honour; the CSR gets a Failed condition.
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

func refuse(format string, args ...any) error {
	return &RequestError{Err: fmt.Errorf(format, args...)}
}

// Sign issues the certificate csr asks for, PEM-encoded, signed by ca with key. It refuses
// with a *RequestError a request that is not one of our signers', is broken, or breaks its
// signer's rules; any other error is worth retrying.
func Sign(ca *x509.Certificate, key crypto.Signer, csr *certificatesv1.CertificateSigningRequest, now time.Time, maxDuration time.Duration) ([]byte, error) {
	validate, ok := signers[csr.Spec.SignerName]
	if !ok {
		return nil, refuse("signer %q is not served here", csr.Spec.SignerName)
	}
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return nil, err
	}
	if err := validate(req); err != nil {
		return nil, &RequestError{Err: err}
	}
	ku, eku, err := keyUsages(csr.Spec.SignerName, csr.Spec.Usages)
	if err != nil {
		return nil, err
	}
	if !now.Before(ca.NotAfter) {
		return nil, fmt.Errorf("the CA expired at %s", ca.NotAfter.UTC().Format(time.RFC3339))
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      req.Subject,
		DNSNames:     req.DNSNames, IPAddresses: req.IPAddresses, EmailAddresses: req.EmailAddresses, URIs: req.URIs,
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter(now, lifetime(csr.Spec.ExpirationSeconds, maxDuration), ca.NotAfter),
		KeyUsage:              ku,
		ExtKeyUsage:           eku,
		BasicConstraintsValid: true,
		IsCA:                  false,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, req.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func parseRequest(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, refuse("request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, refuse("parsing request: %v", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, refuse("request signature: %v", err)
	}
	return req, nil
}

// lifetime is the requested lifetime within [minDuration, limit], or limit when none is
// requested.
func lifetime(expirationSeconds *int32, limit time.Duration) time.Duration {
	if expirationSeconds == nil {
		return limit
	}
	return min(max(time.Duration(*expirationSeconds)*time.Second, minDuration), limit)
}

// notAfter ends the certificate after d, but not after the CA.
func notAfter(now time.Time, d time.Duration, caNotAfter time.Time) time.Time {
	if end := now.Add(d); end.Before(caNotAfter) {
		return end
	}
	return caNotAfter
}

// purpose is the extended key usage each signer issues for.
var purpose = map[string]certificatesv1.KeyUsage{
	certificatesv1.KubeAPIServerClientKubeletSignerName: certificatesv1.UsageClientAuth,
	certificatesv1.KubeletServingSignerName:             certificatesv1.UsageServerAuth,
	certificatesv1.KubeAPIServerClientSignerName:        certificatesv1.UsageClientAuth,
}

// keyUsages maps spec.usages to x509 usages: the signer's purpose is required, digital
// signature and key encipherment are optional, anything else is refused.
func keyUsages(signer string, usages []certificatesv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	want := purpose[signer]
	var ku x509.KeyUsage
	var eku []x509.ExtKeyUsage
	found := false
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature:
			ku |= x509.KeyUsageDigitalSignature
		case certificatesv1.UsageKeyEncipherment:
			ku |= x509.KeyUsageKeyEncipherment
		case want:
			if !found {
				eku = append(eku, extKeyUsage[want])
			}
			found = true
		default:
			return 0, nil, refuse("usage %q is not allowed for signer %s", u, signer)
		}
	}
	if !found {
		return 0, nil, refuse("signer %s requires usage %q", signer, want)
	}
	return ku, eku, nil
}

var extKeyUsage = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
	certificatesv1.UsageClientAuth: x509.ExtKeyUsageClientAuth,
	certificatesv1.UsageServerAuth: x509.ExtKeyUsageServerAuth,
}

// signers holds each served signer's rules on the request's subject and names.
var signers = map[string]func(*x509.CertificateRequest) error{
	certificatesv1.KubeAPIServerClientKubeletSignerName: nodeClient,
	certificatesv1.KubeletServingSignerName:             nodeServing,
	certificatesv1.KubeAPIServerClientSignerName:        func(*x509.CertificateRequest) error { return nil },
}

func nodeClient(req *x509.CertificateRequest) error {
	if err := nodeSubject(req); err != nil {
		return err
	}
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		return errors.New("a kubelet client certificate has no subject alternative names")
	}
	return nil
}

func nodeServing(req *x509.CertificateRequest) error {
	if err := nodeSubject(req); err != nil {
		return err
	}
	if len(req.DNSNames)+len(req.IPAddresses) == 0 {
		return errors.New("a kubelet serving certificate needs a DNS or IP subject alternative name")
	}
	if len(req.EmailAddresses)+len(req.URIs) > 0 {
		return errors.New("a kubelet serving certificate has no email or URI subject alternative names")
	}
	return nil
}

// nodeSubject requires CN system:node:<name> and O [system:nodes].
func nodeSubject(req *x509.CertificateRequest) error {
	if name, ok := strings.CutPrefix(req.Subject.CommonName, "system:node:"); !ok || name == "" {
		return fmt.Errorf("common name %q is not system:node:<node name>", req.Subject.CommonName)
	}
	if !reflect.DeepEqual(req.Subject.Organization, []string{"system:nodes"}) {
		return fmt.Errorf("organization %q is not [system:nodes]", req.Subject.Organization)
	}
	return nil
}
