package nldump

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestRetry(t *testing.T) {
	for _, tc := range []struct {
		name        string
		interrupted int // dumps interrupted before one completes
		wantCalls   int
		wantErr     bool
	}{
		{"whole at once", 0, 1, false},
		{"interrupted twice", 2, 3, false},
		{"interrupted every time", Attempts, Attempts, true},
	} {
		calls := 0
		got, err := Retry(func() ([]int, error) {
			calls++
			if calls <= tc.interrupted {
				return []int{1}, netlink.ErrDumpInterrupted // a partial list
			}
			return []int{1, 2}, nil
		})
		if calls != tc.wantCalls || (err != nil) != tc.wantErr {
			t.Errorf("%s: %d calls, err %v", tc.name, calls, err)
		}
		if tc.wantErr && (got != nil || !errors.Is(err, netlink.ErrDumpInterrupted)) {
			t.Errorf("%s: a partial list escaped: %v %v", tc.name, got, err)
		}
		if !tc.wantErr && len(got) != 2 {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
	// Other errors are not retried.
	calls := 0
	if _, err := Retry(func() (int, error) { calls++; return 0, errors.New("no such device") }); err == nil || calls != 1 {
		t.Errorf("another error: %d calls, %v", calls, err)
	}
}
