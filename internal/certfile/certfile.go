// Package certfile is certificates kept in files that are renewed in place while the
// processes using them run: reading one, writing one whole (a reader never sees half a file),
// and a pair served or presented from the files' current contents. The server renews its PKI
// this way (system: the cert-renewal part) and an agent its own (agent/join.Renewer); client-go
// reloads the client pairs its kubeconfigs name by itself.
package certfile

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// Read parses the first certificate of a PEM file.
func Read(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	certs, err := certutil.ParseCertsPEM(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return certs[0], nil
}

// WriteWhole replaces path with data by writing a temporary file beside it and renaming it
// over path, so a process reading path sees the old contents or the new, never a part.
func WriteWhole(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".new-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Pair is a certificate and key file pair loaded again whenever either file changed: a
// handshake after a renewal presents the new pair. A pair that fails to load (caught between
// the key's and the certificate's replacement) leaves the one loaded before in use.
type Pair struct {
	certFile, keyFile string
	mu                sync.Mutex
	cert              *tls.Certificate
	certMod, keyMod   time.Time
}

// NewPair loads the pair once, so a missing or broken pair is an error at start.
func NewPair(certFile, keyFile string) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile}
	if _, err := p.Current(); err != nil {
		return nil, err
	}
	return p, nil
}

// Current is the pair as the files hold it now.
func (p *Pair) Current() (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cm, err1 := os.Stat(p.certFile)
	km, err2 := os.Stat(p.keyFile)
	if err1 == nil && err2 == nil && p.cert != nil && cm.ModTime().Equal(p.certMod) && km.ModTime().Equal(p.keyMod) {
		return p.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		if p.cert != nil {
			return p.cert, nil
		}
		return nil, err
	}
	p.cert = &cert
	if err1 == nil && err2 == nil {
		p.certMod, p.keyMod = cm.ModTime(), km.ModTime()
	}
	return p.cert, nil
}

// GetCertificate is tls.Config.GetCertificate for a server presenting the pair.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return p.Current() }

// GetClientCertificate is tls.Config.GetClientCertificate for a client presenting the pair.
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.Current()
}
