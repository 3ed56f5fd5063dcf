// Package certrenew is when skiff issues a certificate again: the rule the server's PKI
// (at start), the agent's certificates (at start and while it runs, through CSRs) and
// `skiff certificate check` share, so they never disagree about what is due.
package certrenew

import (
	"crypto/x509"
	"time"
)

// Before is how long before expiry a certificate is renewed, as k3s's 90 days — or a
// quarter of its lifetime when that is shorter (a CSR signed for 30 days is renewed a week
// before, not at every start), as the kubelet rotates within the last 10–30 %.
const Before = 90 * 24 * time.Hour

// Window is how long before c's expiry it is renewed.
func Window(c *x509.Certificate) time.Duration {
	return min(Before, c.NotAfter.Sub(c.NotBefore)/4)
}

// DueAt is when c is to be renewed.
func DueAt(c *x509.Certificate) time.Time { return c.NotAfter.Add(-Window(c)) }

// Due says whether c is to be renewed at now.
func Due(c *x509.Certificate, now time.Time) bool { return !now.Before(DueAt(c)) }
