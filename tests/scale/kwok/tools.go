//go:build tools

// Package kwok pins sigs.k8s.io/kwok for `make kwok`; nothing here is compiled into skiff.
package kwok

import _ "sigs.k8s.io/kwok/cmd/kwok"
