// Package csrapproving auto-approves the CertificateSigningRequests a node needs to join and
// stay in the cluster, as upstream's csrapproving controller does, so kubelet TLS bootstrap
// and certificate rotation work without a human running `kubectl certificate approve`:
//
//   - a kubelet client certificate (signer kubernetes.io/kube-apiserver-client-kubelet)
//     requested with a bootstrap token (group system:bootstrappers[:*]);
//   - the renewal of that certificate, requested by the node itself;
//   - a kubelet serving certificate (signer kubernetes.io/kubelet-serving) requested by the
//     node itself. Upstream leaves these to a human; skiff approves them, as k3s does, so a
//     kubelet with serverTLSBootstrap serves a cluster-CA certificate without manual steps.
//
// Where upstream asks a SubjectAccessReview whether the requester may create node client
// certificates, skiff checks the requester's identity directly. Every other request is left
// pending. Signing is the csrsigning controller's job.
package csrapproving

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
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

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "csrapproving"

// Reason is the reason of every approval condition this controller adds.
const Reason = "AutoApproved"

// Approval messages, as upstream's where upstream approves the same request.
const (
	MessageNodeClient     = "Auto approving kubelet client certificate after SubjectAccessReview."
	MessageSelfNodeClient = "Auto approving self kubelet client certificate after SubjectAccessReview."
	MessageNodeServing    = "Auto approving kubelet serving certificate requested by the node itself."
)

const (
	nodeUserPrefix    = "system:node:"
	nodesGroup        = "system:nodes"
	bootstrapperGroup = "system:bootstrappers"
)

// Controller approves node CSRs.
type Controller struct {
	client kubernetes.Interface
	csrs   certlisters.CertificateSigningRequestLister
	synced cache.InformerSynced
	loop   *loop.Loop
	log    *slog.Logger
	now    func() time.Time
}

// New wires the controller.
func New(client kubernetes.Interface, csrs certinformers.CertificateSigningRequestInformer, log *slog.Logger) *Controller {
	c := &Controller{client: client, csrs: csrs.Lister(), synced: csrs.Informer().HasSynced,
		log: log.With("controller", Name), now: time.Now}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = csrs.Informer().AddEventHandler(c.loop.Handler())
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.loop.Run(ctx, 1)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	csr, err := c.csrs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	approve, why := Decide(csr)
	if !approve {
		c.log.Debug("not auto-approving", "csr", name, "reason", why)
		return nil
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: Reason, Message: why, LastUpdateTime: metav1.NewTime(c.now()),
	})
	_, err = c.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("approving csr %s: %w", name, err)
	}
	c.log.Info("approved", "csr", name, "signer", csr.Spec.SignerName, "requester", csr.Spec.Username)
	return nil
}

// Decide says whether csr is auto-approved: when it is, the string is the approval message;
// when not, why not. It reads nothing but csr.
func Decide(csr *certificatesv1.CertificateSigningRequest) (approve bool, reason string) {
	if why := handled(csr); why != "" {
		return false, why
	}
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return false, err.Error()
	}
	switch csr.Spec.SignerName {
	case certificatesv1.KubeAPIServerClientKubeletSignerName:
		if err := nodeClient(req, csr.Spec.Usages); err != nil {
			return false, err.Error()
		}
		switch {
		case csr.Spec.Username == req.Subject.CommonName:
			return true, MessageSelfNodeClient
		case isBootstrapper(csr.Spec.Groups):
			return true, MessageNodeClient
		}
		return false, fmt.Sprintf("requester %q is neither a bootstrapper nor %s", csr.Spec.Username, req.Subject.CommonName)
	case certificatesv1.KubeletServingSignerName:
		if err := nodeServing(req, csr.Spec.Usages); err != nil {
			return false, err.Error()
		}
		if csr.Spec.Username != req.Subject.CommonName {
			return false, fmt.Sprintf("requester %q is not %s", csr.Spec.Username, req.Subject.CommonName)
		}
		return true, MessageNodeServing
	}
	return false, fmt.Sprintf("signer %q is not auto-approved", csr.Spec.SignerName)
}

// handled says why csr needs no decision any more, or "" when it does.
func handled(csr *certificatesv1.CertificateSigningRequest) string {
	if len(csr.Status.Certificate) > 0 {
		return "already signed"
	}
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return "already " + strings.ToLower(string(c.Type))
		}
	}
	return ""
}

func parseRequest(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing request: %w", err)
	}
	return req, nil
}

// nodeClient checks the shape of a kubelet client certificate request.
func nodeClient(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if err := nodeSubject(req); err != nil {
		return err
	}
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		return errors.New("a client certificate has no subject alternative names")
	}
	return usagesWithin(usages, certificatesv1.UsageClientAuth)
}

// nodeServing checks the shape of a kubelet serving certificate request.
func nodeServing(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if err := nodeSubject(req); err != nil {
		return err
	}
	if len(req.DNSNames)+len(req.IPAddresses) == 0 {
		return errors.New("a serving certificate needs a DNS or IP subject alternative name")
	}
	if len(req.EmailAddresses)+len(req.URIs) > 0 {
		return errors.New("email and URI subject alternative names are not allowed")
	}
	for _, n := range req.DNSNames {
		// A node must not get a certificate pods would accept as the API server's.
		if n == "kubernetes" || strings.HasPrefix(n, "kubernetes.") {
			return fmt.Errorf("DNS name %q belongs to the API server", n)
		}
	}
	return usagesWithin(usages, certificatesv1.UsageServerAuth)
}

// nodeSubject requires CN system:node:<name> and O [system:nodes].
func nodeSubject(req *x509.CertificateRequest) error {
	if name, ok := strings.CutPrefix(req.Subject.CommonName, nodeUserPrefix); !ok || name == "" {
		return fmt.Errorf("common name %q is not %s<node name>", req.Subject.CommonName, nodeUserPrefix)
	}
	if !reflect.DeepEqual(req.Subject.Organization, []string{nodesGroup}) {
		return fmt.Errorf("organization %q is not [%s]", req.Subject.Organization, nodesGroup)
	}
	return nil
}

// usagesWithin requires purpose among usages, and nothing else but digital signature and key
// encipherment.
func usagesWithin(usages []certificatesv1.KeyUsage, purpose certificatesv1.KeyUsage) error {
	found := false
	for _, u := range usages {
		switch u {
		case purpose:
			found = true
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		default:
			return fmt.Errorf("usage %q is not allowed", u)
		}
	}
	if !found {
		return fmt.Errorf("usage %q is missing", purpose)
	}
	return nil
}

func isBootstrapper(groups []string) bool {
	for _, g := range groups {
		if g == bootstrapperGroup || strings.HasPrefix(g, bootstrapperGroup+":") {
			return true
		}
	}
	return false
}
