package kubectl

import (
	"context"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// runner runs the real kubectl against s: run fails the test unless the command's outcome
// is the one wanted (an error or not) and returns its output.
func runner(ctx context.Context, t *testing.T, s *framework.Server, kc string) func(wantErr bool, args ...string) string {
	return func(wantErr bool, args ...string) string {
		t.Helper()
		out, err := s.Run(ctx, kc, args...)
		if (err != nil) != wantErr {
			t.Fatalf("kubectl %s: err=%v, want error %v\n%s", strings.Join(args, " "), err, wantErr, out)
		}
		return out
	}
}

// containsAll fails the test unless out holds every wanted piece.
func containsAll(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
}
