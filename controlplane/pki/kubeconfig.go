package pki

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/skiff-sh/skiff/internal/certfile"
)

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// Kubeconfig is a kubeconfig for one client of the API server, with a client certificate
// for User (CN) in Groups (O).
type Kubeconfig struct {
	Path, Server string
	User         string
	Groups       []string
	// Files, if set, is where the client certificate and key are kept, the kubeconfig naming
	// them (as k3s's control-plane kubeconfigs do), so a client-go client loads them again
	// when they are renewed while it runs. Otherwise they are embedded: a kubeconfig to copy
	// elsewhere or hand to a person.
	Files *Pair
	// Lifetime is how long the certificate lasts (a year when zero).
	Lifetime time.Duration
}

// WriteKubeconfig issues a client certificate for user (CN) in groups (O) and writes a
// kubeconfig for server at path, unless one is there whose certificate is still good.
func WriteKubeconfig(path, server string, ca *Authority, user string, groups []string) error {
	_, err := Kubeconfig{Path: path, Server: server, User: user, Groups: groups}.Write(ca, time.Now())
	return err
}

// Write writes the kubeconfig as at now unless the one there is still good (its certificate
// not due for renewal, signed by ca, where Files says) and says why it wrote it ("" when it
// did not). Each file is written whole: a process reading one meanwhile sees the old one.
func (k Kubeconfig) Write(ca *Authority, now time.Time) (string, error) {
	reason := k.stale(ca, now)
	if reason == "" {
		return "", nil
	}
	certPEM, keyPEM, err := (*authority)(ca).issueAt(x509.Certificate{
		Subject:     pkix.Name{CommonName: k.User, Organization: k.Groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotAfter:    notAfter(now, k.Lifetime),
	}, now)
	if err != nil {
		return "", err
	}
	auth := &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	if k.Files != nil {
		if err := writePair(*k.Files, certPEM, keyPEM); err != nil {
			return "", err
		}
		auth = &clientcmdapi.AuthInfo{ClientCertificate: k.Files.Cert, ClientKey: k.Files.Key}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["skiff"] = &clientcmdapi.Cluster{Server: k.Server, CertificateAuthorityData: ca.CertPEM()}
	cfg.AuthInfos[k.User] = auth
	cfg.Contexts[k.User+"@skiff"] = &clientcmdapi.Context{Cluster: "skiff", AuthInfo: k.User}
	cfg.CurrentContext = k.User + "@skiff"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return "", err
	}
	return reason, certfile.WriteWhole(k.Path, b, 0o600)
}

// stale says why the kubeconfig must be written again ("" when it need not).
func (k Kubeconfig) stale(ca *Authority, now time.Time) string {
	if !exists(k.Path) {
		return "missing"
	}
	cfg, err := clientcmd.LoadFromFile(k.Path)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	var auth *clientcmdapi.AuthInfo
	if c := cfg.Contexts[cfg.CurrentContext]; c != nil {
		auth = cfg.AuthInfos[c.AuthInfo]
	}
	var caData []byte
	if c := cfg.Contexts[cfg.CurrentContext]; c != nil && cfg.Clusters[c.Cluster] != nil {
		caData = cfg.Clusters[c.Cluster].CertificateAuthorityData
	}
	switch {
	case auth == nil:
		return "no user"
	case !bytes.Equal(caData, ca.CertPEM()):
		return "the cluster CA bundle changed"
	case k.Files != nil && auth.ClientCertificate != k.Files.Cert:
		return "its certificate moves to " + k.Files.Cert
	case k.Files == nil && len(auth.ClientCertificateData) == 0:
		return "its certificate moves into it"
	case k.Files != nil:
		if why := Stale(*k.Files, ca.cert, nil, now); why != "" {
			return why
		}
		return (*authority)(ca).chainStale(k.Files.Cert)
	}
	c, err := kubeconfigCert(k.Path)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	if why := staleCert(c, ca.cert, nil, now); why != "" {
		return why
	}
	return (*authority)(ca).chainStalePEM(auth.ClientCertificateData)
}
