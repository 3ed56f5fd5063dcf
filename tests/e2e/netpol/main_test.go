// Package netpol checks NetworkPolicy enforcement on a real node: a server with its agent,
// pods through containerd and skiff-cni, policies applied with the real kubectl and probed
// from inside pods and from the node.
package netpol

import (
	"testing"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }
