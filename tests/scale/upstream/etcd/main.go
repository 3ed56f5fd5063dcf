// Command etcd is upstream's etcd server, built from go.etcd.io/etcd/server/v3 at the version
// skiff embeds, for the scale harness's side-by-side run.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
