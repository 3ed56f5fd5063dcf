package pcrcleaner

import (
	"context"
	"log/slog"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func req(name string, made time.Time) *certificatesv1.PodCertificateRequest {
	return &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(made)}}
}

func TestExpired(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	reqs := []certificatesv1.PodCertificateRequest{*req("fresh", now.Add(-14*time.Minute)), *req("old", now.Add(-16*time.Minute)), *req("edge", now.Add(-15*time.Minute))}
	got := Expired(reqs, now, 15*time.Minute)
	if len(got) != 2 || got[0].Name != "old" || got[1].Name != "edge" {
		t.Fatalf("got %v", got)
	}
	if Expired(nil, now, time.Minute) != nil {
		t.Fatal("nothing to expire")
	}
}

func TestClean(t *testing.T) {
	now := time.Now()
	c := fake.NewClientset(req("fresh", now.Add(-time.Minute)), req("old", now.Add(-time.Hour)))
	ctl := New(c, slog.New(slog.DiscardHandler))
	if err := ctl.clean(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, _ := c.CertificatesV1().PodCertificateRequests("").List(context.Background(), metav1.ListOptions{})
	if len(l.Items) != 1 || l.Items[0].Name != "fresh" {
		t.Fatalf("left %v", l.Items)
	}
}
