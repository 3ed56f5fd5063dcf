// Command coredns is upstream CoreDNS with only the plugins BenchmarkClusterDNS's
// side-by-side run needs (kubernetes, errors), built in this throwaway module so skiff's
// go.mod never holds CoreDNS (`make coredns`; CI never builds it).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func main() {
	dnsserver.Directives = []string{"errors", "kubernetes"}
	coremain.Run()
}
