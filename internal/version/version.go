// Package version reports skiff's own version and the Kubernetes API version it serves.
package version

import (
	"fmt"
	"runtime"

	kubeversion "k8s.io/component-base/version"
)

// Version is skiff's release, set by the Makefile with -ldflags -X.
var Version = "dev"

// String is what `skiff version` prints.
func String() string {
	k := kubeversion.Get()
	return fmt.Sprintf("skiff %s (Kubernetes API %s, %s, %s/%s)", Version, k.GitVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
