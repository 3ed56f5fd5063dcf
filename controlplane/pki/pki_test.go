package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

func allFiles(l Layout) []string {
	files := []string{l.SAKey(), l.SAPub()}
	for _, p := range []Pair{l.CA(), l.APIServer(), l.APIServerKubeletClient(), l.APIServerEtcdClient(),
		l.EtcdCA(), l.EtcdServer(), l.EtcdPeer(), l.EtcdHealthcheckClient(), l.FrontProxyCA(), l.FrontProxyClient()} {
		files = append(files, p.Cert, p.Key)
	}
	return files
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := certutil.ParseCertsPEM(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(certs) != 1 {
		t.Fatalf("%s holds %d certificates", path, len(certs))
	}
	return certs[0]
}

func pool(t *testing.T, caFile string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	p.AddCert(readCert(t, caFile))
	return p
}

func ensure(t *testing.T, o Options) Layout {
	t.Helper()
	l, err := Ensure(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLayout(t *testing.T) {
	l := Layout{Dir: "/p"}
	for got, want := range map[string]string{
		l.CA().Cert: "/p/ca.crt", l.CA().Key: "/p/ca.key",
		l.APIServer().Cert: "/p/apiserver.crt", l.APIServerKubeletClient().Key: "/p/apiserver-kubelet-client.key",
		l.APIServerEtcdClient().Cert: "/p/apiserver-etcd-client.crt", l.EtcdCA().Cert: "/p/etcd/ca.crt",
		l.EtcdServer().Key: "/p/etcd/server.key", l.EtcdPeer().Cert: "/p/etcd/peer.crt",
		l.EtcdHealthcheckClient().Cert: "/p/etcd/healthcheck-client.crt", l.SAKey(): "/p/sa.key", l.SAPub(): "/p/sa.pub",
		l.FrontProxyCA().Cert: "/p/front-proxy-ca.crt", l.FrontProxyClient().Key: "/p/front-proxy-client.key",
	} {
		if got != want {
			t.Errorf("path %s, want %s", got, want)
		}
	}
}

func TestEnsureCreatesLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	l := ensure(t, Options{Dir: dir, ServiceIP: net.ParseIP("10.96.0.1")})
	if l.Dir != dir {
		t.Errorf("layout dir = %s", l.Dir)
	}
	for _, f := range allFiles(l) {
		st, err := os.Stat(f)
		if err != nil {
			t.Errorf("missing %s: %v", f, err)
			continue
		}
		if st.Size() == 0 {
			t.Errorf("%s is empty", f)
		}
		if filepath.Ext(f) == ".key" && st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode %v, want no group/other access", f, st.Mode().Perm())
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// ca, apiserver, apiserver-kubelet-client, apiserver-etcd-client, front-proxy-ca,
	// front-proxy-client pairs, sa.key, sa.pub, etcd/
	if len(entries) != 6*2+2+1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("pki dir holds %v", names)
	}

	key, err := keyutil.PrivateKeyFromFile(l.SAKey())
	if err != nil {
		t.Fatal(err)
	}
	pubs, err := keyutil.PublicKeysFromFile(l.SAPub())
	if err != nil {
		t.Fatal(err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || len(pubs) != 1 || !ec.PublicKey.Equal(pubs[0]) {
		t.Errorf("sa.pub does not match sa.key (%T)", key)
	}
}

func TestEnsureIsIdempotent(t *testing.T) {
	o := Options{Dir: t.TempDir(), ServiceIP: net.ParseIP("10.96.0.1")}
	l := ensure(t, o)
	before := map[string][]byte{}
	for _, f := range allFiles(l) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		before[f] = b
	}
	ensure(t, o)
	for f, b := range before {
		after, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, after) {
			t.Errorf("%s changed on the second Ensure", f)
		}
	}
}

func TestEnsureRegeneratesMissingLeaf(t *testing.T) {
	o := Options{Dir: t.TempDir()}
	l := ensure(t, o)
	ca, err := os.ReadFile(l.CA().Cert)
	if err != nil {
		t.Fatal(err)
	}
	old := readCert(t, l.APIServer().Cert)
	if err := os.Remove(l.APIServer().Key); err != nil {
		t.Fatal(err)
	}
	ensure(t, o)
	if b, _ := os.ReadFile(l.CA().Cert); !bytes.Equal(b, ca) {
		t.Error("the CA was regenerated")
	}
	fresh := readCert(t, l.APIServer().Cert)
	if fresh.SerialNumber.Cmp(old.SerialNumber) == 0 {
		t.Error("a pair with a missing key must be reissued")
	}
	if _, err := fresh.Verify(x509.VerifyOptions{Roots: pool(t, l.CA().Cert), DNSName: "kubernetes"}); err != nil {
		t.Errorf("reissued apiserver cert does not verify against the kept CA: %v", err)
	}
}

func TestAPIServerCertificate(t *testing.T) {
	l := ensure(t, Options{
		Dir:            t.TempDir(),
		ServiceIP:      net.ParseIP("10.96.0.1"),
		APIServerIPs:   []net.IP{net.ParseIP("192.168.1.10")},
		APIServerNames: []string{"api.example.com"},
	})
	cert := readCert(t, l.APIServer().Cert)
	roots := pool(t, l.CA().Cert)
	for _, name := range []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
		"localhost", "api.example.com", "10.96.0.1", "127.0.0.1", "::1", "192.168.1.10"} {
		_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if err != nil {
			t.Errorf("apiserver cert for %s: %v", name, err)
		}
	}
	for _, name := range []string{"evil.example.com", "10.96.0.2"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err == nil {
			t.Errorf("apiserver cert verifies for %s", name)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("apiserver serving cert is usable for client auth")
	}
	if cert.Subject.CommonName != "kube-apiserver" || cert.IsCA {
		t.Errorf("subject %v isCA %v", cert.Subject, cert.IsCA)
	}

	ca := readCert(t, l.CA().Cert)
	if !ca.IsCA || ca.Subject.CommonName != "kubernetes" || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("ca.crt: isCA %v subject %v usage %v", ca.IsCA, ca.Subject, ca.KeyUsage)
	}
}

func TestAPIServerCertificateWithoutServiceIP(t *testing.T) {
	l := ensure(t, Options{Dir: t.TempDir()})
	cert := readCert(t, l.APIServer().Cert)
	if slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("10.96.0.1")) }) {
		t.Errorf("IP SANs %v include a service IP that was not given", cert.IPAddresses)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool(t, l.CA().Cert), DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("loopback SAN missing: %v", err)
	}
}

func TestEtcdCertificates(t *testing.T) {
	l := ensure(t, Options{Dir: t.TempDir(), ServiceIP: net.ParseIP("10.96.0.1")})
	etcdRoots := pool(t, l.EtcdCA().Cert)
	clusterRoots := pool(t, l.CA().Cert)
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name  string
		pair  Pair
		usage x509.ExtKeyUsage
		dns   string
		cn    string
	}{
		{"server", l.EtcdServer(), x509.ExtKeyUsageServerAuth, "localhost", host},
		{"server as client", l.EtcdServer(), x509.ExtKeyUsageClientAuth, "127.0.0.1", host},
		{"peer", l.EtcdPeer(), x509.ExtKeyUsageServerAuth, "127.0.0.1", host},
		{"healthcheck client", l.EtcdHealthcheckClient(), x509.ExtKeyUsageClientAuth, "", "kube-etcd-healthcheck-client"},
		{"apiserver etcd client", l.APIServerEtcdClient(), x509.ExtKeyUsageClientAuth, "", "kube-apiserver-etcd-client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert := readCert(t, tc.pair.Cert)
			opts := x509.VerifyOptions{Roots: etcdRoots, DNSName: tc.dns, KeyUsages: []x509.ExtKeyUsage{tc.usage}}
			if _, err := cert.Verify(opts); err != nil {
				t.Errorf("does not verify against etcd/ca.crt: %v", err)
			}
			opts.Roots = clusterRoots
			if _, err := cert.Verify(opts); err == nil {
				t.Error("verifies against the cluster ca.crt")
			}
			if cert.Subject.CommonName != tc.cn {
				t.Errorf("CN = %q, want %q", cert.Subject.CommonName, tc.cn)
			}
		})
	}

	kc := readCert(t, l.APIServerKubeletClient().Cert)
	if _, err := kc.Verify(x509.VerifyOptions{Roots: clusterRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("kubelet client cert: %v", err)
	}
	if _, err := kc.Verify(x509.VerifyOptions{Roots: etcdRoots}); err == nil {
		t.Error("kubelet client cert verifies against the etcd CA")
	}
	if !slices.Equal(kc.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("kubelet client O = %v", kc.Subject.Organization)
	}
	if bytes.Equal(readCert(t, l.EtcdCA().Cert).Raw, readCert(t, l.CA().Cert).Raw) {
		t.Error("etcd CA is the cluster CA")
	}
}

func TestLoadCAIssues(t *testing.T) {
	l := ensure(t, Options{Dir: t.TempDir()})
	ca, err := LoadCA(l.CA())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(l.CA().Cert)
	if !bytes.Equal(ca.CertPEM(), want) {
		t.Error("CertPEM differs from ca.crt")
	}
	certPEM, keyPEM, err := ca.Issue(x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool(t, l.CA().Cert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Error(err)
	}
	if _, err := keyutil.ParsePrivateKeyPEM(keyPEM); err != nil {
		t.Error(err)
	}
	if _, err := LoadCA(Pair{Cert: filepath.Join(t.TempDir(), "none.crt"), Key: l.CA().Key}); err == nil {
		t.Error("LoadCA of a missing file succeeded")
	}
}

func TestWriteKubeconfig(t *testing.T) {
	l := ensure(t, Options{Dir: t.TempDir()})
	ca, err := LoadCA(l.CA())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "admin.conf")
	if err := WriteKubeconfig(path, "https://127.0.0.1:6443", ca, "kubernetes-admin", []string{"system:masters"}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v", st.Mode().Perm())
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "kubernetes-admin@skiff" {
		t.Errorf("current context %q", cfg.CurrentContext)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || ctx.Cluster != "skiff" || ctx.AuthInfo != "kubernetes-admin" {
		t.Fatalf("context %+v", ctx)
	}
	cluster := cfg.Clusters["skiff"]
	if cluster == nil || cluster.Server != "https://127.0.0.1:6443" || !bytes.Equal(cluster.CertificateAuthorityData, ca.CertPEM()) {
		t.Fatalf("cluster %+v", cluster)
	}
	auth := cfg.AuthInfos["kubernetes-admin"]
	if auth == nil {
		t.Fatal("no user")
	}
	certs, err := certutil.ParseCertsPEM(auth.ClientCertificateData)
	if err != nil {
		t.Fatal(err)
	}
	cert := certs[0]
	if cert.Subject.CommonName != "kubernetes-admin" || !slices.Equal(cert.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("client subject = %v", cert.Subject)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool(t, l.CA().Cert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client cert: %v", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(auth.ClientKeyData)
	if err != nil {
		t.Fatal(err)
	}
	if ec, ok := key.(*ecdsa.PrivateKey); !ok || !ec.PublicKey.Equal(cert.PublicKey) {
		t.Error("client key does not match the certificate")
	}
	// The generated config must be usable by client-go as is.
	if _, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig(); err != nil {
		t.Errorf("client config: %v", err)
	}

	first, _ := os.ReadFile(path)
	if err := WriteKubeconfig(path, "https://other:6443", ca, "someone-else", nil); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(path); !bytes.Equal(first, second) {
		t.Error("an existing kubeconfig was overwritten")
	}
}

// TestEnsureRenews moves the clock: a start within RenewBefore of the leaves' expiry issues
// them again (the CAs are kept, so every credential the cluster holds stays trusted), a start
// before that keeps them, and an address added to etcd's peers reissues only the peer pair.
func TestEnsureRenews(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	issued := map[string]string{}
	o := Options{Dir: dir, Now: now, Issued: func(cert, why string) { issued[filepath.Base(cert)] = why }}
	l := ensure(t, o)
	caBefore := readCert(t, l.CA().Cert)
	apiBefore := readCert(t, l.APIServer().Cert)

	clear(issued)
	o.Now = apiBefore.NotAfter.Add(-RenewBefore - 24*time.Hour)
	ensure(t, o)
	if len(issued) != 0 {
		t.Errorf("issued %v more than %v before expiry", issued, RenewBefore)
	}

	o.Now = apiBefore.NotAfter.Add(-RenewBefore + 24*time.Hour)
	ensure(t, o)
	for _, name := range []string{"apiserver.crt", "apiserver-kubelet-client.crt", "apiserver-etcd-client.crt", "server.crt", "peer.crt",
		"healthcheck-client.crt", "front-proxy-client.crt"} {
		if why := issued[name]; !strings.HasPrefix(why, "expires ") {
			t.Errorf("%s: renewed because %q, want its expiry", name, why)
		}
	}
	apiAfter := readCert(t, l.APIServer().Cert)
	if !apiAfter.NotAfter.After(apiBefore.NotAfter) {
		t.Errorf("the API server certificate still expires %v", apiAfter.NotAfter)
	}
	if _, err := apiAfter.Verify(x509.VerifyOptions{Roots: pool(t, l.CA().Cert), CurrentTime: o.Now}); err != nil {
		t.Errorf("the renewed certificate does not verify against the kept CA: %v", err)
	}
	if !readCert(t, l.CA().Cert).Equal(caBefore) {
		t.Error("the CA was issued again")
	}

	clear(issued)
	o.EtcdPeerIPs = []net.IP{net.ParseIP("10.0.0.1")}
	ensure(t, o)
	if len(issued) != 1 || issued["peer.crt"] != "lacks the address 10.0.0.1" {
		t.Errorf("adding a peer address issued %v, want peer.crt alone", issued)
	}
}

func TestRotate(t *testing.T) {
	l := ensure(t, Options{Dir: t.TempDir()})
	if _, err := Rotate(l, nil, []string{"apiserver", "bogus"}); err == nil || !strings.Contains(err.Error(), `no certificate "bogus"`) {
		t.Fatalf("an unknown name: %v", err)
	}
	if !exists(l.APIServer().Cert) {
		t.Fatal("a rotate refused for an unknown name removed the names before it")
	}
	removed, err := Rotate(l, nil, []string{"apiserver", "etcd/peer"})
	if err != nil || len(removed) != 4 {
		t.Fatalf("removed %v: %v", removed, err)
	}
	if !exists(l.CA().Key) || exists(l.EtcdPeer().Key) {
		t.Error("rotate removed a CA or kept what it was asked to remove")
	}
	certs, err := Inventory(ensure(t, Options{Dir: l.Dir}), nil, time.Now())
	if err != nil || len(certs) != 10 {
		t.Errorf("inventory after the next start: %d certificates, %v", len(certs), err)
	}
}

// TestShortLifetime: leaves issued for minutes (--certificate-lifetime) last that long and are
// not due for renewal the moment they are issued (their NotBefore is not an hour back).
func TestShortLifetime(t *testing.T) {
	now := time.Now()
	l := ensure(t, Options{Dir: t.TempDir(), Lifetime: 3 * time.Minute, Now: now})
	c := readCert(t, l.APIServer().Cert)
	if got := c.NotAfter.Sub(now); got < 2*time.Minute+50*time.Second || got > 3*time.Minute {
		t.Errorf("apiserver certificate lasts %v from now, want 3m", got)
	}
	if why := Stale(l.APIServer(), nil, nil, now.Add(time.Minute)); why != "" {
		t.Errorf("a minute after issue: %q, want not due", why)
	}
	if why := Stale(l.APIServer(), nil, nil, now.Add(150*time.Second)); !strings.HasPrefix(why, "expires") {
		t.Errorf("in its last quarter: %q, want due", why)
	}
	ca := readCert(t, l.CA().Cert)
	if ca.NotAfter.Sub(now) < 9*365*24*time.Hour {
		t.Errorf("the CA lasts until %v: CAs keep ten years whatever the leaves' lifetime", ca.NotAfter)
	}
}
