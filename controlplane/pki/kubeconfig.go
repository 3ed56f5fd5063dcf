package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// WriteKubeconfig issues a client certificate for user (CN) in groups (O) and writes a
// kubeconfig for server at path, unless one is there whose certificate is still good.
func WriteKubeconfig(path, server string, ca *Authority, user string, groups []string) error {
	return WriteKubeconfigAt(path, server, ca, user, groups, time.Now())
}

// WriteKubeconfigAt is WriteKubeconfig at now: a kubeconfig whose certificate is still good
// (not within RenewBefore of expiry, signed by ca) is kept; otherwise it is written anew.
func WriteKubeconfigAt(path, server string, ca *Authority, user string, groups []string, now time.Time) error {
	if c, err := kubeconfigCert(path); err == nil && staleCert(c, ca.cert, nil, now) == "" {
		return nil
	} else if err != nil && exists(path) {
		return err
	}
	certPEM, keyPEM, err := (*authority)(ca).issueAt(x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["skiff"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca.CertPEM()}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[user+"@skiff"] = &clientcmdapi.Context{Cluster: "skiff", AuthInfo: user}
	cfg.CurrentContext = user + "@skiff"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}
