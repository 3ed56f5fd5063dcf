// Package nldump reads netlink dumps whole. The kernel marks a dump during which the table
// changed (NLM_F_DUMP_INTR), and vishvananda/netlink then returns what it read with
// netlink.ErrDumpInterrupted: acting on that partial list would, say, withdraw a route the
// dump missed, so every dump skiff acts on goes through Retry.
package nldump

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// Attempts is how many times a dump is read before an interrupted one is an error.
const Attempts = 5

// Retry runs dump until it is not interrupted, at most Attempts times.
func Retry[T any](dump func() (T, error)) (T, error) {
	var out T
	var err error
	for range Attempts {
		if out, err = dump(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	var zero T
	return zero, fmt.Errorf("netlink dump interrupted %d times in a row: %w", Attempts, err)
}
