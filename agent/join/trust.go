package join

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/skiff-sh/skiff/internal/bootstraptoken"
	"github.com/skiff-sh/skiff/internal/certfile"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/internal/supervisor"
)

// ErrTrustChanged ends an agent whose cluster CA bundle changed (a CA rotation began or was
// completed on the server: controlplane/pki RotateCA): the bundle is written, and the agent
// starts again so that every client and the agent API load it — as the kubelet is restarted
// after its CA file changes. Pods keep running across it, as across any restart of the agent.
var ErrTrustChanged = fmt.Errorf("the cluster CA bundle changed: %w", supervisor.ErrRestartProcess)

// TrustWatcher keeps a joined agent's CA bundle the server's: every Interval it reads the
// server's /cacerts through the node's client — over TLS verified by the bundle it has, so
// the new one is as trusted as the connection — and when it differs, writes it (and the
// kubeconfig's copy) and returns ErrTrustChanged.
type TrustWatcher struct {
	// Dir is the agent's data directory; Node a client with the node's credentials.
	Dir  string
	Node kubernetes.Interface
	// Interval is how often it looks (10 minutes when zero).
	Interval time.Duration
	Log      *slog.Logger
}

// Run looks until the bundle changes (ErrTrustChanged) or ctx ends; a server that does not
// answer is asked again at the next interval.
func (w TrustWatcher) Run(ctx context.Context) error {
	if w.Interval <= 0 {
		w.Interval = 10 * time.Minute
	}
	for {
		changed, err := w.check(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			w.Log.Warn("reading the cluster CA bundle", "err", err, "again in", w.Interval)
		case changed:
			return ErrTrustChanged
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.Interval):
		}
	}
}

func (w TrustWatcher) check(ctx context.Context) (bool, error) {
	res := Paths(w.Dir)
	have, err := os.ReadFile(res.CAFile)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := w.Node.Discovery().RESTClient().Get().AbsPath("/cacerts").DoRaw(ctx)
	if err != nil {
		return false, fmt.Errorf("GET /cacerts: %w", err)
	}
	if bytes.Equal(have, got) {
		return false, nil
	}
	if _, err := certutil.ParseCertsPEM(got); err != nil {
		return false, fmt.Errorf("the server's /cacerts: %w", err)
	}
	w.Log.Info("the cluster CA bundle changed; writing it and restarting the agent to trust it", "file", res.CAFile,
		"was", caNames(have), "now", caNames(got))
	// The join token's pin is of the bundle the agent first trusted: keep it so a restart
	// with the same token trusts the new bundle (ensureCA).
	pinFile := layout.Agent{Dir: w.Dir}.PKI().CAPin()
	if _, err := os.Stat(pinFile); errors.Is(err, os.ErrNotExist) {
		if err := certfile.WriteWhole(pinFile, []byte(bootstraptoken.CAHash(have)+"\n"), 0o644); err != nil {
			return false, err
		}
	}
	if err := certfile.WriteWhole(res.CAFile, got, 0o644); err != nil {
		return false, err
	}
	return true, setKubeconfigCA(res.Kubeconfig, got)
}

// setKubeconfigCA replaces the CA data of every cluster of the kubeconfig at path.
func setKubeconfigCA(path string, caPEM []byte) error {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return err
	}
	for _, c := range cfg.Clusters {
		c.CertificateAuthorityData, c.CertificateAuthority = caPEM, ""
	}
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return certfile.WriteWhole(path, b, 0o600)
}

// caNames lists the common names of a bundle's certificates, for the log.
func caNames(bundle []byte) []string {
	certs, _ := certutil.ParseCertsPEM(bundle)
	names := make([]string, 0, len(certs))
	for _, c := range certs {
		names = append(names, c.Subject.CommonName)
	}
	return names
}

// fromOldCA says whether cert comes from a CA the cluster is rotating away from: the bundle
// holds more than one CA (a rotation is under way) and the first — the new one, that issues
// now — did not sign cert. With one CA it is false: a bundle not yet brought up to date by
// TrustWatcher is no reason to renew.
func fromOldCA(cert *x509.Certificate, bundle []*x509.Certificate) bool {
	return len(bundle) > 1 && cert.CheckSignatureFrom(bundle[0]) != nil
}

// readBundle reads the CA bundle at caFile.
func readBundle(caFile string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	bundle, err := certutil.ParseCertsPEM(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", caFile, err)
	}
	return bundle, nil
}
