// Command netutil is the program of skiff's test image (localhost/skiff/netutil:1).
package main

import (
	"os"

	"github.com/skiff-sh/skiff/images/netutil"
)

func main() { os.Exit(netutil.Main(os.Args[1:], os.Stdout, os.Stderr)) }
