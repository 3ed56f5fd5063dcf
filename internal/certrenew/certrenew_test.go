package certrenew

import (
	"crypto/x509"
	"testing"
	"time"
)

func TestDue(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	year := &x509.Certificate{NotBefore: start, NotAfter: start.AddDate(1, 0, 0)}
	month := &x509.Certificate{NotBefore: start, NotAfter: start.AddDate(0, 0, 28)}
	for _, c := range []struct {
		name string
		c    *x509.Certificate
		at   time.Time
		due  bool
	}{
		{"a year's cert, 91 days left", year, year.NotAfter.Add(-91 * 24 * time.Hour), false},
		{"a year's cert, 89 days left", year, year.NotAfter.Add(-89 * 24 * time.Hour), true},
		{"a year's cert, expired", year, year.NotAfter.Add(time.Hour), true},
		{"28 days, 8 days left", month, month.NotAfter.Add(-8 * 24 * time.Hour), false},
		{"28 days, 6 days left", month, month.NotAfter.Add(-6 * 24 * time.Hour), true},
	} {
		if got := Due(c.c, c.at); got != c.due {
			t.Errorf("%s: due %v, want %v", c.name, got, c.due)
		}
	}
}
