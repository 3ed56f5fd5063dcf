package csrapproving

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
)

const (
	clientSigner  = certificatesv1.KubeAPIServerClientKubeletSignerName
	servingSigner = certificatesv1.KubeletServingSignerName
	node          = "system:node:worker-1"
)

var (
	clientUsages  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	servingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	bootstrapper  = []string{"system:bootstrappers", "system:authenticated"}
	nodeGroups    = []string{"system:nodes", "system:authenticated"}
)

// request is what goes into the x509 certificate request.
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

func newCSR(t *testing.T, signer, user string, groups []string, usages []certificatesv1.KeyUsage, r request) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: requestPEM(t, r), SignerName: signer, Username: user, Groups: groups, Usages: usages,
		},
	}
}

var (
	nodeClientReq  = request{cn: node, org: []string{"system:nodes"}}
	nodeServingReq = request{cn: node, org: []string{"system:nodes"}, dns: []string{"worker-1"}, ips: []net.IP{net.ParseIP("10.0.0.7")}}
)

func with(r request, edit func(*request)) request {
	edit(&r)
	return r
}

func TestDecide(t *testing.T) {
	u := func(us ...certificatesv1.KeyUsage) []certificatesv1.KeyUsage { return us }
	for _, tc := range []struct {
		name    string
		signer  string
		user    string
		groups  []string
		usages  []certificatesv1.KeyUsage
		req     request
		want    bool
		message string // the approval message, or part of the refusal reason
	}{
		// node client bootstrap
		{"bootstrap", clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, nodeClientReq, true, MessageNodeClient},
		{"bootstrap, sub-group", clientSigner, "system:bootstrap:abcdef", []string{"system:bootstrappers:kubeadm:default-node-token"}, clientUsages, nodeClientReq, true, MessageNodeClient},
		{"bootstrap, no RSA usages", clientSigner, "system:bootstrap:abcdef", bootstrapper, u(certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth), nodeClientReq, true, MessageNodeClient},
		{"bootstrap, client auth only", clientSigner, "system:bootstrap:abcdef", bootstrapper, u(certificatesv1.UsageClientAuth), nodeClientReq, true, MessageNodeClient},
		{"bootstrap, group lookalike", clientSigner, "mallory", []string{"system:bootstrappersx"}, clientUsages, nodeClientReq, false, "is neither a bootstrapper"},
		{"bootstrap, not a bootstrapper", clientSigner, "mallory", []string{"system:authenticated"}, clientUsages, nodeClientReq, false, "is neither a bootstrapper"},
		{"bootstrap, wrong O", clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, with(nodeClientReq, func(r *request) { r.org = []string{"system:masters"} }), false, "organization"},
		{"bootstrap, extra O", clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, with(nodeClientReq, func(r *request) { r.org = []string{"system:nodes", "system:masters"} }), false, "organization"},
		{"bootstrap, no O", clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, with(nodeClientReq, func(r *request) { r.org = nil }), false, "organization"},
		{"bootstrap, CN not a node", clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, with(nodeClientReq, func(r *request) { r.cn = "admin" }), false, "common name \"admin\""},
		{"bootstrap, empty node name", clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, with(nodeClientReq, func(r *request) { r.cn = "system:node:" }), false, "common name \"system:node:\""},
		{"bootstrap, DNS SAN", clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, with(nodeClientReq, func(r *request) { r.dns = []string{"worker-1"} }), false, "no subject alternative names"},
		{"bootstrap, IP SAN", clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, with(nodeClientReq, func(r *request) { r.ips = []net.IP{net.ParseIP("10.0.0.7")} }), false, "no subject alternative names"},
		{"bootstrap, email SAN", clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, with(nodeClientReq, func(r *request) { r.emails = []string{"a@b.c"} }), false, "no subject alternative names"},
		{"bootstrap, URI SAN", clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, with(nodeClientReq, func(r *request) { r.uris = []*url.URL{{Scheme: "spiffe", Host: "x"}} }), false, "no subject alternative names"},
		{"bootstrap, server auth", clientSigner, "system:bootstrap:abcdef", bootstrapper, u(certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth, certificatesv1.UsageServerAuth), nodeClientReq, false, "usage \"server auth\" is not allowed"},
		{"bootstrap, no client auth", clientSigner, "system:bootstrap:abcdef", bootstrapper, u(certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment), nodeClientReq, false, "usage \"client auth\" is missing"},
		{"bootstrap, cert sign", clientSigner, "system:bootstrap:abcdef", bootstrapper, u(certificatesv1.UsageCertSign, certificatesv1.UsageClientAuth), nodeClientReq, false, "usage \"cert sign\" is not allowed"},
		{"bootstrap, wrong signer", certificatesv1.KubeAPIServerClientSignerName, "system:bootstrap:abcdef", bootstrapper, clientUsages, nodeClientReq, false, "is not auto-approved"},
		{"bootstrap, custom signer", "example.com/any", "system:bootstrap:abcdef", bootstrapper, clientUsages, nodeClientReq, false, "is not auto-approved"},
		// node client renewal
		{"renewal", clientSigner, node, nodeGroups, clientUsages, nodeClientReq, true, MessageSelfNodeClient},
		{"renewal for another node", clientSigner, "system:node:worker-2", nodeGroups, clientUsages, nodeClientReq, false, "is neither a bootstrapper"},
		{"renewal, wrong O", clientSigner, node, nodeGroups, clientUsages, with(nodeClientReq, func(r *request) { r.org = []string{"system:masters"} }), false, "organization"},
		// node serving
		{"serving", servingSigner, node, nodeGroups, servingUsages, nodeServingReq, true, MessageNodeServing},
		{"serving, IP only", servingSigner, node, nodeGroups, servingUsages, with(nodeServingReq, func(r *request) { r.dns = nil }), true, MessageNodeServing},
		{"serving, DNS only, no RSA usages", servingSigner, node, nodeGroups, u(certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth), with(nodeServingReq, func(r *request) { r.ips = nil }), true, MessageNodeServing},
		{"serving, no SAN", servingSigner, node, nodeGroups, servingUsages, with(nodeServingReq, func(r *request) { r.dns, r.ips = nil, nil }), false, "needs a DNS or IP"},
		{"serving, email SAN", servingSigner, node, nodeGroups, servingUsages, with(nodeServingReq, func(r *request) { r.emails = []string{"a@b.c"} }), false, "email and URI"},
		{"serving, URI SAN", servingSigner, node, nodeGroups, servingUsages, with(nodeServingReq, func(r *request) { r.uris = []*url.URL{{Scheme: "spiffe", Host: "x"}} }), false, "email and URI"},
		{"serving, API server name", servingSigner, node, nodeGroups, servingUsages, with(nodeServingReq, func(r *request) { r.dns = []string{"worker-1", "kubernetes.default.svc"} }), false, "belongs to the API server"},
		{"serving, wrong O", servingSigner, node, nodeGroups, servingUsages, with(nodeServingReq, func(r *request) { r.org = []string{"system:nodes", "x"} }), false, "organization"},
		{"serving, requested by bootstrapper", servingSigner, "system:bootstrap:abcdef", bootstrapper, servingUsages, nodeServingReq, false, "is not system:node:worker-1"},
		{"serving, requested by another node", servingSigner, "system:node:worker-2", nodeGroups, servingUsages, nodeServingReq, false, "is not system:node:worker-1"},
		{"serving, client auth", servingSigner, node, nodeGroups, u(certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth), nodeServingReq, false, "usage \"client auth\" is not allowed"},
		{"serving, no server auth", servingSigner, node, nodeGroups, u(certificatesv1.UsageDigitalSignature), nodeServingReq, false, "usage \"server auth\" is missing"},
		{"serving request to the client signer", clientSigner, node, nodeGroups, servingUsages, nodeServingReq, false, "no subject alternative names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Decide(newCSR(t, tc.signer, tc.user, tc.groups, tc.usages, tc.req))
			if got != tc.want {
				t.Fatalf("Decide = %v (%s), want %v", got, why, tc.want)
			}
			if tc.want && why != tc.message {
				t.Errorf("message %q, want %q", why, tc.message)
			}
			if !tc.want && !strings.Contains(why, tc.message) {
				t.Errorf("reason %q, want it to mention %q", why, tc.message)
			}
		})
	}
}

func TestDecideSkipsHandledOrBroken(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*certificatesv1.CertificateSigningRequest)
		why  string // the reason, or its beginning
	}{
		{"already approved", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = cond(certificatesv1.CertificateApproved)
		}, "already approved"},
		{"denied", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = cond(certificatesv1.CertificateDenied)
		}, "already denied"},
		{"failed", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = cond(certificatesv1.CertificateFailed)
		}, "already failed"},
		{"signed", func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("cert") }, "already signed"},
		{"bad PEM", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("not pem") }, "request is not a PEM CERTIFICATE REQUEST"},
		{"wrong PEM type", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})
		}, "request is not a PEM CERTIFICATE REQUEST"},
		{"garbage DER", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1, 2, 3}})
		}, "parsing request: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			csr := newCSR(t, clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, nodeClientReq)
			tc.edit(csr)
			got, why := Decide(csr)
			if got {
				t.Fatal("approved")
			}
			if !strings.HasPrefix(why, tc.why) {
				t.Errorf("reason %q, want %q", why, tc.why)
			}
		})
	}
}

func cond(t certificatesv1.RequestConditionType) []certificatesv1.CertificateSigningRequestCondition {
	return []certificatesv1.CertificateSigningRequestCondition{{Type: t, Status: corev1.ConditionTrue}}
}

func newController(t *testing.T, csrs ...*certificatesv1.CertificateSigningRequest) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Certificates().V1().CertificateSigningRequests()
	c := New(client, inf, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, csr := range csrs {
		if err := inf.Informer().GetIndexer().Add(csr); err != nil {
			t.Fatal(err)
		}
	}
	return c, client
}

func TestSyncApproves(t *testing.T) {
	csr := newCSR(t, servingSigner, node, nodeGroups, servingUsages, nodeServingReq)
	c, client := newController(t, csr)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c.now = func() time.Time { return now }
	if err := c.sync(context.Background(), "csr-1"); err != nil {
		t.Fatal(err)
	}
	acts := client.Actions()
	if len(acts) != 1 || acts[0].GetVerb() != "update" || acts[0].GetSubresource() != "approval" ||
		acts[0].GetResource().Resource != "certificatesigningrequests" {
		t.Fatalf("actions %v, want one approval update", acts)
	}
	got := acts[0].(ktesting.UpdateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
	if got.Name != "csr-1" || len(got.Status.Conditions) != 1 {
		t.Fatalf("updated %s with conditions %+v", got.Name, got.Status.Conditions)
	}
	want := certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved",
		Message: "Auto approving kubelet serving certificate requested by the node itself.", LastUpdateTime: metav1.NewTime(now),
	}
	if g := got.Status.Conditions[0]; g.Type != want.Type || g.Status != want.Status || g.Reason != want.Reason ||
		g.Message != want.Message || !g.LastUpdateTime.Equal(&want.LastUpdateTime) {
		t.Fatalf("condition %+v, want %+v", g, want)
	}
	if len(csr.Status.Conditions) != 0 {
		t.Error("the informer's copy was modified")
	}
}

func TestSyncLeavesOthersAlone(t *testing.T) {
	approved := newCSR(t, clientSigner, "system:bootstrap:abcdef", bootstrapper, clientUsages, nodeClientReq)
	approved.Status.Conditions = cond(certificatesv1.CertificateApproved)
	foreign := newCSR(t, clientSigner, "mallory", []string{"system:authenticated"}, clientUsages, nodeClientReq)
	for name, csrs := range map[string][]*certificatesv1.CertificateSigningRequest{
		"already approved": {approved},
		"not a node's":     {foreign},
		"gone":             nil,
	} {
		t.Run(name, func(t *testing.T) {
			c, client := newController(t, csrs...)
			if err := c.sync(context.Background(), "csr-1"); err != nil {
				t.Fatal(err)
			}
			if acts := client.Actions(); len(acts) != 0 {
				t.Fatalf("actions %v", acts)
			}
		})
	}
}
