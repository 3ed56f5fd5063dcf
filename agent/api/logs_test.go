package api

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

const criLog = `2026-11-29T10:00:00.000000001Z stdout F first
2026-11-29T10:00:01.000000001Z stderr P par
2026-11-29T10:00:01.500000001Z stderr F tial
garbage line
2026-11-29T10:00:02.000000001Z stdout F third
2026-11-29T10:00:03.000000001Z stdout F
`

func render(t *testing.T, o LogOptions) string {
	t.Helper()
	var b bytes.Buffer
	if _, _, err := WriteLogs(strings.NewReader(criLog), &b, o, true); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestWriteLogs(t *testing.T) {
	if got := render(t, LogOptions{}); got != "first\npartial\nthird\n\n" {
		t.Errorf("plain: %q", got)
	}
	if got := render(t, LogOptions{TailLines: ptr.To[int64](2)}); got != "third\n\n" {
		t.Errorf("tail 2: %q", got)
	}
	if got := render(t, LogOptions{Timestamps: true, TailLines: ptr.To[int64](1)}); got != "2026-11-29T10:00:03.000000001Z \n" {
		t.Errorf("timestamps: %q", got)
	}
	since, _ := time.Parse(time.RFC3339, "2026-11-29T10:00:01Z")
	if got := render(t, LogOptions{Since: since}); got != "partial\nthird\n\n" {
		t.Errorf("since: %q", got)
	}
	var b bytes.Buffer
	n, cut, _ := WriteLogs(strings.NewReader(criLog), &b, LogOptions{LimitBytes: ptr.To[int64](8)}, true)
	if n != 8 || !cut || b.String() != "first\npa" {
		t.Errorf("limitBytes: %d %v %q", n, cut, b.String())
	}
	// A container that ended without a newline: containerd leaves its last line partial.
	b.Reset()
	unterminated := "2026-11-29T10:00:00.000000001Z stdout F one\n2026-11-29T10:00:01.000000001Z stdout P projtest2secret-value-1\n"
	if _, _, err := WriteLogs(strings.NewReader(unterminated), &b, LogOptions{}, true); err != nil || b.String() != "one\nprojtest2secret-value-1" {
		t.Errorf("unterminated last line: %q %v", b.String(), err)
	}
	if _, err := ParseCRILine([]byte("nonsense")); err == nil {
		t.Error("malformed line accepted")
	}
}
