// Package pcrcleaner deletes PodCertificateRequests 15 minutes after they were made, as
// upstream's PodCertificateRequest cleaner does: a request is a message from a node's agent
// to a signer, answered in seconds; once the agent has read the answer it has no use, and
// without the cleaner every pod would leave one behind per certificate (a day's lifetime
// means a request a day per pod). The pod's ownership of its requests removes them with the
// pod; this removes them while it runs.
package pcrcleaner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Name is the controller's name; its service account is upstream's.
const Name = "podcertificaterequestcleaner"

// Upstream's settings: requests older than maxAge go, looked for every period.
const (
	maxAge = 15 * time.Minute
	period = 5 * time.Minute
)

// Expired picks the requests made more than maxAge before now.
func Expired(reqs []certificatesv1.PodCertificateRequest, now time.Time, maxAge time.Duration) []*certificatesv1.PodCertificateRequest {
	var out []*certificatesv1.PodCertificateRequest
	for i := range reqs {
		if !now.Before(reqs[i].CreationTimestamp.Add(maxAge)) {
			out = append(out, &reqs[i])
		}
	}
	return out
}

// Controller deletes expired requests. It lists rather than watches: requests are few and
// short-lived, and a watch would hold memory in an idle server for a pass every 5 minutes.
type Controller struct {
	client kubernetes.Interface
	log    *slog.Logger
	now    func() time.Time
}

// New wires the controller.
func New(client kubernetes.Interface, log *slog.Logger) *Controller {
	return &Controller{client: client, log: log.With("controller", Name), now: time.Now}
}

// Run cleans every period until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if err := c.clean(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("cleaning PodCertificateRequests", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Controller) clean(ctx context.Context) error {
	list, err := c.client.CertificatesV1().PodCertificateRequests(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range Expired(list.Items, c.now(), maxAge) {
		err := c.client.CertificatesV1().PodCertificateRequests(r.Namespace).Delete(ctx, r.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
			continue
		}
		c.log.Info("deleted PodCertificateRequest", "request", r.Namespace+"/"+r.Name, "signer", r.Spec.SignerName)
	}
	return errors.Join(errs...)
}
