package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/skiff-sh/skiff/internal/certfile"
)

// Cert is one certificate a server keeps: a CA, a leaf pair, or a kubeconfig's client
// certificate.
type Cert struct {
	// Name is what `skiff certificate` calls it: "apiserver", "etcd/peer", "admin.kubeconfig".
	Name string
	// Path is its file; a kubeconfig's certificate is inside the kubeconfig.
	Path      string
	NotAfter  time.Time
	Authority string // the issuer's common name
	IsCA      bool
	// Renews says why the next start issues it again ("" when it will not); CAs are never
	// issued again by a start.
	Renews string
}

// leafNames are the leaf pairs of the PKI by their `skiff certificate` names.
func leafNames(l Layout) map[string]Pair {
	return map[string]Pair{
		"apiserver": l.APIServer(), "apiserver-kubelet-client": l.APIServerKubeletClient(),
		"apiserver-etcd-client": l.APIServerEtcdClient(), "etcd/server": l.EtcdServer(), "etcd/peer": l.EtcdPeer(),
		"etcd/healthcheck-client": l.EtcdHealthcheckClient(), "front-proxy-client": l.FrontProxyClient(),
		"agent": l.AgentServing(),
	}
}

// Inventory lists the certificates of the PKI and of the kubeconfigs beside it, as they would
// look to a start at now.
func Inventory(l Layout, kubeconfigs []string, now time.Time) ([]Cert, error) {
	var out []Cert
	cas := map[string]*x509.Certificate{}
	for name, p := range CAs(l) {
		c, err := certfile.Read(p.Cert)
		if err != nil {
			return nil, err
		}
		cas[c.Subject.CommonName] = c
		out = append(out, Cert{Name: name, Path: p.Cert, NotAfter: c.NotAfter, Authority: c.Issuer.CommonName, IsCA: true})
	}
	for name, p := range leafNames(l) {
		c, err := certfile.Read(p.Cert)
		if errors.Is(err, os.ErrNotExist) && name == "agent" {
			continue // a server without an agent beside it
		} else if err != nil {
			return nil, err
		}
		why := Stale(p, cas[c.Issuer.CommonName], nil, now)
		out = append(out, Cert{Name: name, Path: p.Cert, NotAfter: c.NotAfter, Authority: c.Issuer.CommonName, Renews: why})
	}
	for _, path := range kubeconfigs {
		c, err := kubeconfigCert(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, err
		}
		why := staleCert(c, cas[c.Issuer.CommonName], nil, now)
		out = append(out, Cert{Name: filepath.Base(path), Path: path, NotAfter: c.NotAfter, Authority: c.Issuer.CommonName, Renews: why})
	}
	return out, nil
}

// Rotate removes the named leaf certificates (all leaves and kubeconfigs when names is empty)
// so that the next start of the server issues them again from the CAs, as k3s's
// `certificate rotate`; the CAs stay. It returns what it removed.
func Rotate(l Layout, kubeconfigs []string, names []string) ([]string, error) {
	leaves := leafNames(l)
	byName := map[string][]string{}
	for name, p := range leaves {
		byName[name] = []string{p.Cert, p.Key}
	}
	for _, k := range kubeconfigs {
		byName[filepath.Base(k)] = []string{k}
	}
	if len(names) == 0 {
		for name := range byName {
			names = append(names, name)
		}
	}
	for _, name := range names { // every name checked before anything is removed
		if _, ok := byName[name]; !ok {
			known := make([]string, 0, len(byName))
			for n := range byName {
				known = append(known, n)
			}
			return nil, fmt.Errorf("no certificate %q (the CAs are not rotated this way); known: %s", name, strings.Join(sortedCopy(known), ", "))
		}
	}
	var removed []string
	for _, name := range names {
		for _, f := range byName[name] {
			if err := os.Remove(f); err == nil {
				removed = append(removed, f)
			} else if !errors.Is(err, os.ErrNotExist) {
				return removed, err
			}
		}
	}
	return removed, nil
}

func kubeconfigCert(path string) (*x509.Certificate, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	for _, a := range cfg.AuthInfos {
		if a.ClientCertificate != "" {
			return certfile.Read(a.ClientCertificate)
		}
		if len(a.ClientCertificateData) > 0 {
			certs, err := certutil.ParseCertsPEM(a.ClientCertificateData)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return certs[0], nil
		}
	}
	return nil, fmt.Errorf("%s holds no client certificate", path)
}
