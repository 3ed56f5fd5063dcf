package plainhost

import (
	"testing"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }
