// Package rbac checks authorization as a user meets it, with the real kubectl against a
// real `skiff server`: the bootstrap policy, RBAC grants and refusals with upstream's
// messages, escalation prevention, `kubectl auth can-i`, anonymous access, ClusterRole
// aggregation, and the Node authorizer with NodeRestriction for node credentials.
package rbac

import (
	"testing"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }
