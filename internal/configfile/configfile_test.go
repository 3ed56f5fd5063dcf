package configfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type flags struct {
	name    string
	port    int
	debug   bool
	every   time.Duration
	labels  []string
	servers []string
}

func newFlags() (*pflag.FlagSet, *flags) {
	f := &flags{name: "default", port: 6443, labels: []string{"base=1"}}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.StringVar(&f.name, "node-name", f.name, "")
	fs.IntVar(&f.port, "secure-port", f.port, "")
	fs.BoolVar(&f.debug, "debug", f.debug, "")
	fs.DurationVar(&f.every, "every", f.every, "")
	fs.StringSliceVar(&f.labels, "node-label", f.labels, "")
	fs.StringSliceVar(&f.servers, "server", f.servers, "")
	var config string
	fs.StringVar(&config, "config", "", "")
	return fs, f
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestApply(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "config.yaml")
	write(t, main, `
node-name: from-file
secure-port: 7443
debug: true
every: 90s
node-label: [rack=a, "zone=x,y"]
server:
  - https://a:6443
  - https://b:6443
`)
	write(t, filepath.Join(dir, "config.yaml.d", "20-more.yaml"), "node-label+: [extra=1]\nsecure-port: 8443\n")
	write(t, filepath.Join(dir, "config.yaml.d", "10-first.yml"), "node-name: from-d\n")
	write(t, filepath.Join(dir, "config.yaml.d", "ignored.txt"), "not: yaml: at all")

	files, err := Files(main, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || !strings.HasSuffix(files[1], "10-first.yml") || !strings.HasSuffix(files[2], "20-more.yaml") {
		t.Fatalf("files %v, want config.yaml then config.yaml.d in name order", files)
	}
	fs, f := newFlags()
	if err := fs.Parse([]string{"--debug=false"}); err != nil {
		t.Fatal(err)
	}
	if err := Apply(fs, files); err != nil {
		t.Fatal(err)
	}
	if f.name != "from-d" || f.port != 8443 || f.every != 90*time.Second {
		t.Errorf("name %q port %d every %v: a later file replaces an earlier key", f.name, f.port, f.every)
	}
	if f.debug {
		t.Error("--debug=false on the command line lost to the file")
	}
	if want := []string{"rack=a", "zone=x,y", "extra=1"}; !slices.Equal(f.labels, want) {
		t.Errorf("labels %q, want %q (the default replaced, a comma kept inside a value, + appended)", f.labels, want)
	}
	if want := []string{"https://a:6443", "https://b:6443"}; !slices.Equal(f.servers, want) {
		t.Errorf("servers %q", f.servers)
	}
	if !fs.Changed("node-name") {
		t.Error("a flag the file set is not marked as given")
	}
}

func TestApplyErrors(t *testing.T) {
	for _, c := range []struct{ content, want string }{
		{"node-nmae: x\n", `c.yaml:1: "node-nmae" is not a flag of this command`},
		{"a: 1\nsecure-port: lots\n", `"a" is not a flag`},
		{"secure-port: lots\n", `config: --secure-port "lots"`},
		{"every: 5\n", `--every "5"`},
		{"node-name: [a, b]\n", "c.yaml:1: --node-name takes one value"},
		{"node-name+: a\n", "takes one value"},
		{"node-name:\n", `c.yaml:1: "node-name" has no value`},
		{"- a\n- b\n", "c.yaml:1: want a mapping"},
		{"node-label: [[a]]\n", "a list of plain values"},
		{"config: /etc/other.yaml\n", "cannot name another"},
		{"node-name: a\n  bad indent: b\n", "c.yaml"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "c.yaml")
		write(t, path, c.content)
		fs, _ := newFlags()
		err := Apply(fs, []string{path})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.content, err, c.want)
		}
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.yaml")
	if files, err := Files(missing, false); err != nil || len(files) != 0 {
		t.Errorf("the default file missing: %v %v, want nothing", files, err)
	}
	if _, err := Files(missing, true); err == nil {
		t.Error("a --config that does not exist is not an error")
	}
	if files, err := Files("", true); err != nil || files != nil {
		t.Errorf(`--config "": %v %v`, files, err)
	}
	// The directory alone (no config.yaml) still applies.
	write(t, filepath.Join(dir, "none.yaml.d", "a.yaml"), "debug: true\n")
	if files, err := Files(missing, false); err != nil || len(files) != 1 {
		t.Errorf("config.yaml.d without config.yaml: %v %v", files, err)
	}
	// An empty file sets nothing.
	write(t, filepath.Join(dir, "empty.yaml"), "")
	fs, f := newFlags()
	if err := Apply(fs, []string{filepath.Join(dir, "empty.yaml")}); err != nil || f.name != "default" {
		t.Errorf("empty file: %v %q", err, f.name)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("node-name: a\nnode-label: [x=1]\nserver+: [b]\n")
	f.Add("labels: {a: b}\n")
	f.Add("- 1\n")
	f.Fuzz(func(t *testing.T, content string) {
		settings, err := Parse(strings.NewReader(content), "fuzz.yaml")
		if err != nil {
			return
		}
		for _, s := range settings {
			if s.Flag == "" && !s.Append {
				t.Errorf("a setting without a flag from %q", content)
			}
		}
	})
}
