// Command genimages builds skiff's own pause and netutil images from their Go sources
// (static, -trimpath, so the archives are the same on every machine with the same Go) and
// writes them where images/embedded embeds them: `go generate ./images/embedded`, run by
// `make generate`; `make verify` fails if they are stale.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/skiff-sh/skiff/images"
)

func main() {
	out := flag.String("out", ".", "directory for pause.tar and netutil.tar")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "genimages:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	tmp, err := os.MkdirTemp("", "skiff-genimages-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bins := map[string]string{}
	for _, name := range []string{"pause", "netutil"} {
		bin := filepath.Join(tmp, name)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -buildid=", "-o", bin, "github.com/skiff-sh/skiff/cmd/"+name)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", name, err, b)
		}
		bins[name] = bin
	}
	_, err = images.Build(bins["pause"], bins["netutil"], out)
	return err
}
