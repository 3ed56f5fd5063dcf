package csrsigning

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

const (
	clientKubelet = certificatesv1.KubeAPIServerClientKubeletSignerName
	serving       = certificatesv1.KubeletServingSignerName
	client        = certificatesv1.KubeAPIServerClientSignerName
	year          = 365 * 24 * time.Hour
)

var (
	ds, ke = certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment
	ca, sa = certificatesv1.UsageClientAuth, certificatesv1.UsageServerAuth
	// now is whole seconds: certificates carry no finer times.
	now = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
)

type testCA struct {
	cert            *x509.Certificate
	key             crypto.Signer
	certPEM, keyPEM []byte
}

// newCA makes a self-signed CA valid until notAfter, with an ECDSA key unless rsaKey.
func newCA(t *testing.T, notAfter time.Time, rsaKey bool) testCA {
	t.Helper()
	var key crypto.Signer
	var keyPEM []byte
	if rsaKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		key, keyPEM = k, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		key, keyPEM = k, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "skiff-ca"},
		NotBefore: now.Add(-year), NotAfter: notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM: keyPEM}
}

type request struct {
	cn     string
	org    []string
	dns    []string
	ips    []net.IP
	emails []string
	uris   []*url.URL
}

func requestPEM(t *testing.T, r request) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: r.cn, Organization: r.org},
		DNSNames: r.dns, IPAddresses: r.ips, EmailAddresses: r.emails, URIs: r.uris,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func newCSR(t *testing.T, signer string, usages []certificatesv1.KeyUsage, r request) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1"},
		Spec:       certificatesv1.CertificateSigningRequestSpec{Request: requestPEM(t, r), SignerName: signer, Usages: usages},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
			{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved"},
		}},
	}
}

var (
	nodeClientReq  = request{cn: "system:node:worker-1", org: []string{"system:nodes"}}
	nodeServingReq = request{cn: "system:node:worker-1", org: []string{"system:nodes"}, dns: []string{"worker-1", "worker-1.lan"}, ips: []net.IP{net.ParseIP("10.0.0.7").To4()}}
	userReq        = request{cn: "alice", org: []string{"devs", "ops"}}
)

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, rest := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("not one PEM certificate: %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestSignIssues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rsaCA  bool
		signer string
		usages []certificatesv1.KeyUsage
		req    request
		ku     x509.KeyUsage
		eku    x509.ExtKeyUsage
		verify string // DNS name to verify a serving certificate for
	}{
		{"kubelet client", false, clientKubelet, []certificatesv1.KeyUsage{ds, ke, ca}, nodeClientReq,
			x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, x509.ExtKeyUsageClientAuth, ""},
		{"kubelet client, RSA CA", true, clientKubelet, []certificatesv1.KeyUsage{ds, ca}, nodeClientReq,
			x509.KeyUsageDigitalSignature, x509.ExtKeyUsageClientAuth, ""},
		{"kubelet serving", false, serving, []certificatesv1.KeyUsage{ds, ke, sa}, nodeServingReq,
			x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, x509.ExtKeyUsageServerAuth, "worker-1.lan"},
		{"user client", false, client, []certificatesv1.KeyUsage{ca, ds}, userReq,
			x509.KeyUsageDigitalSignature, x509.ExtKeyUsageClientAuth, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testCA := newCA(t, now.Add(10*year), tc.rsaCA)
			csr := newCSR(t, tc.signer, tc.usages, tc.req)
			out, err := Sign(testCA.cert, testCA.key, csr, now, year)
			if err != nil {
				t.Fatal(err)
			}
			cert := parseCert(t, out)
			roots := x509.NewCertPool()
			roots.AddCert(testCA.cert)
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, DNSName: tc.verify,
				KeyUsages: []x509.ExtKeyUsage{tc.eku}}); err != nil {
				t.Fatalf("does not verify against the CA: %v", err)
			}
			// DER sorts a multi-valued RDN, so compare organizations as sets.
			if cert.Subject.CommonName != tc.req.cn || !reflect.DeepEqual(sorted(cert.Subject.Organization), sorted(tc.req.org)) {
				t.Errorf("subject %v, want CN %s O %v", cert.Subject, tc.req.cn, tc.req.org)
			}
			if !reflect.DeepEqual(cert.DNSNames, tc.req.dns) || !ipsEqual(cert.IPAddresses, tc.req.ips) ||
				len(cert.EmailAddresses) != 0 || len(cert.URIs) != 0 {
				t.Errorf("SANs %v %v %v %v, want %v %v", cert.DNSNames, cert.IPAddresses, cert.EmailAddresses, cert.URIs, tc.req.dns, tc.req.ips)
			}
			if cert.KeyUsage != tc.ku || !reflect.DeepEqual(cert.ExtKeyUsage, []x509.ExtKeyUsage{tc.eku}) {
				t.Errorf("usages %v %v, want %v %v", cert.KeyUsage, cert.ExtKeyUsage, tc.ku, tc.eku)
			}
			if !cert.BasicConstraintsValid || cert.IsCA {
				t.Errorf("basic constraints valid=%v CA=%v, want a valid non-CA", cert.BasicConstraintsValid, cert.IsCA)
			}
			if !cert.NotBefore.Equal(now.Add(-5*time.Minute)) || !cert.NotAfter.Equal(now.Add(year)) {
				t.Errorf("valid %s to %s, want %s to %s", cert.NotBefore, cert.NotAfter, now.Add(-5*time.Minute), now.Add(year))
			}
			if cert.SerialNumber.Sign() <= 0 || cert.SerialNumber.BitLen() > 128 {
				t.Errorf("serial %v is not a positive 128-bit number", cert.SerialNumber)
			}
			if cert.Issuer.String() != testCA.cert.Subject.String() {
				t.Errorf("issuer %v, want %v", cert.Issuer, testCA.cert.Subject)
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func ipsEqual(a, b []net.IP) bool {
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

func TestSignSerialsDiffer(t *testing.T) {
	testCA := newCA(t, now.Add(10*year), false)
	csr := newCSR(t, clientKubelet, []certificatesv1.KeyUsage{ds, ca}, nodeClientReq)
	a, err := Sign(testCA.cert, testCA.key, csr, now, year)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Sign(testCA.cert, testCA.key, csr, now, year)
	if err != nil {
		t.Fatal(err)
	}
	if parseCert(t, a).SerialNumber.Cmp(parseCert(t, b).SerialNumber) == 0 {
		t.Fatal("two certificates share a serial number")
	}
}

func TestSignLifetime(t *testing.T) {
	for _, tc := range []struct {
		name       string
		expiration *int32
		max        time.Duration
		caNotAfter time.Time
		want       time.Time
	}{
		{"max duration", nil, year, now.Add(10 * year), now.Add(year)},
		{"custom max duration", nil, 30 * 24 * time.Hour, now.Add(10 * year), now.Add(30 * 24 * time.Hour)},
		{"shorter request", ptr.To[int32](3600), year, now.Add(10 * year), now.Add(time.Hour)},
		{"longer request is capped", ptr.To[int32](int32(2 * year / time.Second)), year, now.Add(10 * year), now.Add(year)},
		{"tiny request is raised to 10m", ptr.To[int32](60), year, now.Add(10 * year), now.Add(10 * time.Minute)},
		{"capped by the CA", nil, year, now.Add(30 * 24 * time.Hour), now.Add(30 * 24 * time.Hour)},
		{"request capped by the CA", ptr.To[int32](7200), year, now.Add(time.Hour), now.Add(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testCA := newCA(t, tc.caNotAfter, false)
			csr := newCSR(t, clientKubelet, []certificatesv1.KeyUsage{ds, ca}, nodeClientReq)
			csr.Spec.ExpirationSeconds = tc.expiration
			out, err := Sign(testCA.cert, testCA.key, csr, now, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if got := parseCert(t, out).NotAfter; !got.Equal(tc.want) {
				t.Fatalf("NotAfter %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSignRefuses(t *testing.T) {
	u := func(us ...certificatesv1.KeyUsage) []certificatesv1.KeyUsage { return us }
	for _, tc := range []struct {
		name   string
		signer string
		usages []certificatesv1.KeyUsage
		req    request
		edit   func(*certificatesv1.CertificateSigningRequest)
		want   string
	}{
		{"user client asking for server auth", client, u(ds, ca, sa), userReq, nil, `usage "server auth" is not allowed for signer kubernetes.io/kube-apiserver-client`},
		{"user client without client auth", client, u(ds, ke), userReq, nil, `requires usage "client auth"`},
		{"kubelet client asking for server auth", clientKubelet, u(ds, ca, sa), nodeClientReq, nil, `usage "server auth" is not allowed`},
		{"kubelet client asking to sign certificates", clientKubelet, u(certificatesv1.UsageCertSign, ca), nodeClientReq, nil, `usage "cert sign" is not allowed`},
		{"kubelet client, wrong O", clientKubelet, u(ds, ca), request{cn: "system:node:worker-1", org: []string{"system:masters"}}, nil, "organization"},
		{"kubelet client, not a node", clientKubelet, u(ds, ca), userReq, nil, `common name "alice"`},
		{"kubelet client with SANs", clientKubelet, u(ds, ca), nodeServingReq, nil, "no subject alternative names"},
		{"kubelet serving asking for client auth", serving, u(ds, sa, ca), nodeServingReq, nil, `usage "client auth" is not allowed`},
		{"kubelet serving without server auth", serving, u(ds, ke), nodeServingReq, nil, `requires usage "server auth"`},
		{"kubelet serving without SANs", serving, u(ds, sa), nodeClientReq, nil, "needs a DNS or IP"},
		{"kubelet serving with a URI", serving, u(ds, sa), request{cn: "system:node:w", org: []string{"system:nodes"}, dns: []string{"w"},
			uris: []*url.URL{{Scheme: "spiffe", Host: "x"}}}, nil, "no email or URI"},
		{"kubelet serving, empty node name", serving, u(ds, sa), request{cn: "system:node:", org: []string{"system:nodes"}, dns: []string{"w"}}, nil, "common name"},
		{"other signer", "example.com/signer", u(ds, ca), userReq, nil, "is not served here"},
		{"bad PEM", clientKubelet, u(ds, ca), nodeClientReq, func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("junk") }, "not a PEM CERTIFICATE REQUEST"},
		{"garbage DER", clientKubelet, u(ds, ca), nodeClientReq, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1, 2, 3}})
		}, "parsing request"},
		{"bad signature", clientKubelet, u(ds, ca), nodeClientReq, func(c *certificatesv1.CertificateSigningRequest) {
			block, _ := pem.Decode(c.Spec.Request)
			block.Bytes[len(block.Bytes)-1] ^= 0xff // the signature ends the DER
			c.Spec.Request = pem.EncodeToMemory(block)
		}, "request signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testCA := newCA(t, now.Add(10*year), false)
			csr := newCSR(t, tc.signer, tc.usages, tc.req)
			if tc.edit != nil {
				tc.edit(csr)
			}
			out, err := Sign(testCA.cert, testCA.key, csr, now, year)
			var refused *RequestError
			if !errors.As(err, &refused) {
				t.Fatalf("Sign = %q, %v; want a RequestError", out, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestSignExpiredCAIsRetried(t *testing.T) {
	testCA := newCA(t, now.Add(-time.Hour), false)
	_, err := Sign(testCA.cert, testCA.key, newCSR(t, clientKubelet, []certificatesv1.KeyUsage{ds, ca}, nodeClientReq), now, year)
	var refused *RequestError
	if err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), "CA expired") {
		t.Fatalf("error %v, want a plain CA-expired error", err)
	}
}

func TestNeedsSigning(t *testing.T) {
	cond := func(t certificatesv1.RequestConditionType, s corev1.ConditionStatus) certificatesv1.CertificateSigningRequestCondition {
		return certificatesv1.CertificateSigningRequestCondition{Type: t, Status: s}
	}
	approved := cond(certificatesv1.CertificateApproved, corev1.ConditionTrue)
	for _, tc := range []struct {
		name   string
		signer string
		conds  []certificatesv1.CertificateSigningRequestCondition
		cert   []byte
		want   bool
	}{
		{"approved kubelet client", clientKubelet, []certificatesv1.CertificateSigningRequestCondition{approved}, nil, true},
		{"approved kubelet serving", serving, []certificatesv1.CertificateSigningRequestCondition{approved}, nil, true},
		{"approved user client", client, []certificatesv1.CertificateSigningRequestCondition{approved}, nil, true},
		{"pending", clientKubelet, nil, nil, false},
		{"approval not true", clientKubelet, []certificatesv1.CertificateSigningRequestCondition{cond(certificatesv1.CertificateApproved, corev1.ConditionFalse)}, nil, false},
		{"denied", clientKubelet, []certificatesv1.CertificateSigningRequestCondition{cond(certificatesv1.CertificateDenied, corev1.ConditionTrue)}, nil, false},
		{"failed", clientKubelet, []certificatesv1.CertificateSigningRequestCondition{approved, cond(certificatesv1.CertificateFailed, corev1.ConditionTrue)}, nil, false},
		{"signed", clientKubelet, []certificatesv1.CertificateSigningRequestCondition{approved}, []byte("cert"), false},
		{"other signer", "example.com/signer", []certificatesv1.CertificateSigningRequestCondition{approved}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: tc.signer},
				Status: certificatesv1.CertificateSigningRequestStatus{Conditions: tc.conds, Certificate: tc.cert}}
			if got := needsSigning(csr); got != tc.want {
				t.Fatalf("needsSigning = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	ecCA, rsaCA := newCA(t, now.Add(year), false), newCA(t, now.Add(year), true)
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name      string
		cert, key []byte
		wantErr   string
	}{
		{"ECDSA", ecCA.certPEM, ecCA.keyPEM, ""},
		{"RSA", rsaCA.certPEM, rsaCA.keyPEM, ""},
		{"mismatched key", ecCA.certPEM, rsaCA.keyPEM, "does not match"},
		{"no certificate", []byte("junk"), ecCA.keyPEM, "CA certificate"},
		{"no key", ecCA.certPEM, []byte("junk"), "CA key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
			c, err := New(fake.NewClientset(), factory.Certificates().V1().CertificateSigningRequests(), tc.cert, tc.key, Options{}, discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.duration != 365*24*time.Hour {
				t.Errorf("duration %s, want 365 days", c.duration)
			}
		})
	}
}

func newController(t *testing.T, testCA testCA, csr *certificatesv1.CertificateSigningRequest) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(csr)
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Certificates().V1().CertificateSigningRequests()
	c, err := New(client, inf, testCA.certPEM, testCA.keyPEM, Options{Duration: 90 * 24 * time.Hour}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.Informer().GetIndexer().Add(csr); err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return now }
	client.ClearActions()
	return c, client
}

// statusUpdate returns the object of the only action, a CSR status update.
func statusUpdate(t *testing.T, client *fake.Clientset) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	acts := client.Actions()
	if len(acts) != 1 || acts[0].GetVerb() != "update" || acts[0].GetSubresource() != "status" ||
		acts[0].GetResource().Resource != "certificatesigningrequests" {
		t.Fatalf("actions %v, want one status update", acts)
	}
	return acts[0].(ktesting.UpdateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
}

func TestSyncSigns(t *testing.T) {
	testCA := newCA(t, now.Add(10*year), true)
	csr := newCSR(t, serving, []certificatesv1.KeyUsage{ds, ke, sa}, nodeServingReq)
	c, client := newController(t, testCA, csr)
	if err := c.sync(context.Background(), "csr-1"); err != nil {
		t.Fatal(err)
	}
	got := statusUpdate(t, client)
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != certificatesv1.CertificateApproved {
		t.Errorf("conditions %+v, want only the approval", got.Status.Conditions)
	}
	cert := parseCert(t, got.Status.Certificate)
	roots := x509.NewCertPool()
	roots.AddCert(testCA.cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, DNSName: "worker-1",
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("issued certificate does not verify: %v", err)
	}
	if want := now.Add(90 * 24 * time.Hour); !cert.NotAfter.Equal(want) {
		t.Errorf("NotAfter %s, want %s (Options.Duration)", cert.NotAfter, want)
	}
	stored, err := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "csr-1", metav1.GetOptions{})
	if err != nil || string(stored.Status.Certificate) != string(got.Status.Certificate) {
		t.Fatalf("stored certificate %q, %v", stored.Status.Certificate, err)
	}
	if len(csr.Status.Certificate) != 0 {
		t.Error("the informer's copy was modified")
	}
}

func TestSyncFailsInvalidRequest(t *testing.T) {
	csr := newCSR(t, client, []certificatesv1.KeyUsage{ds, ca, sa}, userReq)
	c, fakeClient := newController(t, newCA(t, now.Add(10*year), false), csr)
	if err := c.sync(context.Background(), "csr-1"); err != nil {
		t.Fatal(err)
	}
	got := statusUpdate(t, fakeClient)
	if len(got.Status.Certificate) != 0 || len(got.Status.Conditions) != 2 {
		t.Fatalf("certificate %q, conditions %+v; want only a Failed condition added", got.Status.Certificate, got.Status.Conditions)
	}
	f := got.Status.Conditions[1]
	if f.Type != certificatesv1.CertificateFailed || f.Status != corev1.ConditionTrue || f.Reason != "SignerValidationFailure" ||
		f.Message != `usage "server auth" is not allowed for signer kubernetes.io/kube-apiserver-client` || !f.LastUpdateTime.Time.Equal(now) {
		t.Fatalf("condition %+v", f)
	}
}

func TestSyncSkips(t *testing.T) {
	testCA := newCA(t, now.Add(10*year), false)
	for name, edit := range map[string]func(*certificatesv1.CertificateSigningRequest){
		"unapproved": func(c *certificatesv1.CertificateSigningRequest) { c.Status.Conditions = nil },
		"signed":     func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("cert") },
		"failed": func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue})
		},
		"other signer": func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com/signer" },
	} {
		t.Run(name, func(t *testing.T) {
			csr := newCSR(t, clientKubelet, []certificatesv1.KeyUsage{ds, ca}, nodeClientReq)
			edit(csr)
			c, client := newController(t, testCA, csr)
			if err := c.sync(context.Background(), "csr-1"); err != nil {
				t.Fatal(err)
			}
			if acts := client.Actions(); len(acts) != 0 {
				t.Fatalf("actions %v", acts)
			}
		})
	}
}

func TestSyncExpiredCAIsRetried(t *testing.T) {
	csr := newCSR(t, clientKubelet, []certificatesv1.KeyUsage{ds, ca}, nodeClientReq)
	c, client := newController(t, newCA(t, now.Add(-time.Hour), false), csr)
	if err := c.sync(context.Background(), "csr-1"); err == nil {
		t.Fatal("sync succeeded with an expired CA")
	}
	if acts := client.Actions(); len(acts) != 0 {
		t.Fatalf("actions %v, want the CSR left for a retry", acts)
	}
}
