package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

type countingAuth struct {
	calls int
	fail  bool
}

func (c *countingAuth) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	c.calls++
	if c.fail {
		return nil, false, errors.New("bad certificate")
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: "u"}}, true, nil
}

func reqWithCert(raw string, notAfter time.Time) *http.Request {
	r := &http.Request{TLS: &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Raw: []byte(raw), NotAfter: notAfter}}}}
	return r
}

func TestCertCache(t *testing.T) {
	next := &countingAuth{}
	a := newCachedCertAuthenticator(next, 10*time.Second)
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	far := now.Add(time.Hour)
	for i := 0; i < 3; i++ {
		if resp, ok, err := a.AuthenticateRequest(reqWithCert("A", far)); !ok || err != nil || resp.User.GetName() != "u" {
			t.Fatalf("auth: %v %v", ok, err)
		}
	}
	if next.calls != 1 {
		t.Fatalf("verified %d times, want 1 (cached)", next.calls)
	}
	a.AuthenticateRequest(reqWithCert("B", far))
	if next.calls != 2 {
		t.Fatalf("another certificate must be verified: %d", next.calls)
	}
	now = now.Add(11 * time.Second)
	a.AuthenticateRequest(reqWithCert("A", far))
	if next.calls != 3 {
		t.Fatalf("expired entry not re-verified: %d", next.calls)
	}
	// Never cached past the certificate's NotAfter.
	soon := now.Add(2 * time.Second)
	a.AuthenticateRequest(reqWithCert("C", soon))
	now = now.Add(3 * time.Second)
	a.AuthenticateRequest(reqWithCert("C", soon))
	if next.calls != 5 {
		t.Fatalf("certificate past NotAfter served from cache: %d", next.calls)
	}
	// Failures are not cached.
	next.fail = true
	for i := 0; i < 2; i++ {
		if _, ok, _ := a.AuthenticateRequest(reqWithCert("D", far)); ok {
			t.Fatal("failed verification reported ok")
		}
	}
	if next.calls != 7 {
		t.Fatalf("failures cached: %d calls", next.calls)
	}
	// No certificate: straight through.
	a.AuthenticateRequest(&http.Request{})
	if next.calls != 8 {
		t.Fatalf("certless request not passed through: %d", next.calls)
	}
}
