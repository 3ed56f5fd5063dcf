package install

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/internal/configfile"
)

func flags() (*pflag.FlagSet, *[]string, *string, *bool) {
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	sans := fs.StringSlice("tls-san", nil, "")
	token := fs.String("token", "", "")
	init := fs.Bool("cluster-init", false, "")
	fs.String("config", "", "")
	fs.Int("secure-port", 6443, "")
	return fs, sans, token, init
}

// TestConfigYAMLRoundTrip writes the flags given to install as the configuration file, and
// reads them back as the service will: the same values, nothing else set.
func TestConfigYAMLRoundTrip(t *testing.T) {
	fs, _, _, _ := flags()
	if err := fs.Parse([]string{"--tls-san", "a.example,10.0.0.1", "--token", "K10ab::x.y", "--cluster-init", "--config", "/elsewhere"}); err != nil {
		t.Fatal(err)
	}
	b, err := ConfigYAML(fs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "config:") || strings.Contains(string(b), "secure-port") {
		t.Errorf("the file holds a flag not given, or --config itself:\n%s", b)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	back, sans, token, init := flags()
	if err := configfile.Apply(back, []string{path}); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !slices.Equal(*sans, []string{"a.example", "10.0.0.1"}) || *token != "K10ab::x.y" || !*init {
		t.Errorf("read back %v %q %v from:\n%s", *sans, *token, *init, b)
	}
}

func TestInstall(t *testing.T) {
	root := t.TempDir()
	p := Paths{BinDir: filepath.Join(root, "bin"), ConfigFile: filepath.Join(root, "etc", "config.yaml"), UnitDir: filepath.Join(root, "units"),
		ServerDir: filepath.Join(root, "lib", "server"), AgentDir: filepath.Join(root, "lib", "agent"), BPFRoot: filepath.Join(root, "bpf")}
	exe := filepath.Join(root, "skiff-build")
	img := filepath.Join(root, "netutil.tar")
	for _, f := range []string{exe, img} {
		if err := os.WriteFile(f, []byte("content of "+filepath.Base(f)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fs, _, _, _ := flags()
	if err := fs.Parse([]string{"--cluster-init"}); err != nil {
		t.Fatal(err)
	}
	var calls []string
	var out bytes.Buffer
	err := Install(Options{Role: "server", Flags: fs, Exe: exe, Images: []string{img}, Paths: p, Out: &out,
		Systemctl: func(args ...string) error { calls = append(calls, strings.Join(args, " ")); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"daemon-reload", "enable --now skiff.service"}; !slices.Equal(calls, want) {
		t.Errorf("systemctl %q, want %q", calls, want)
	}
	unit, err := os.ReadFile(filepath.Join(p.UnitDir, "skiff.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Type=notify", "ExecStart=" + filepath.Join(p.BinDir, "skiff") + " server", "KillMode=process", "Delegate=yes", "Restart=always"} {
		if !strings.Contains(string(unit), "\n"+line+"\n") {
			t.Errorf("the unit lacks %q:\n%s", line, unit)
		}
	}
	for path, want := range map[string]string{filepath.Join(p.BinDir, "skiff"): "content of skiff-build",
		filepath.Join(p.AgentDir, "images", "netutil.tar"): "content of netutil.tar"} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", path, b, err)
		}
	}
	if b, _ := os.ReadFile(p.ConfigFile); !strings.Contains(string(b), `cluster-init: "true"`) {
		t.Errorf("config file:\n%s", b)
	}
	if err := Install(Options{Role: "router", Flags: fs, Paths: p, Out: &out}); err == nil || !strings.Contains(err.Error(), "want server or agent") {
		t.Errorf("an unknown role: %v", err)
	}
}
