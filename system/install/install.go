// Package install puts skiff on a machine and takes it off again, as k3s's install script,
// k3s-killall.sh and k3s-uninstall.sh do: the binary in /usr/local/bin, the role's flags in
// /etc/skiff/config.yaml, a systemd unit of Type=notify (skiff.service for a server,
// skiff-agent.service for an agent) that restarts on failure and leaves pods running when it
// stops (KillMode=process, Delegate=yes), image archives for an air-gapped start; Killall
// stops everything skiff runs and removes what it made in the kernel; Uninstall does both
// and removes the files, the data only when asked. CheckConfig reports what the kernel and
// the host give skiff.
package install

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/skiff-sh/skiff/internal/layout"
)

// Paths are where an installation goes; DefaultPaths is the real machine's.
type Paths struct {
	BinDir, ConfigFile, UnitDir, ServerDir, AgentDir, BPFRoot string
}

// DefaultPaths are k3s's places, in skiff's names.
var DefaultPaths = Paths{BinDir: "/usr/local/bin", ConfigFile: layout.ConfigFile, UnitDir: "/etc/systemd/system",
	ServerDir: layout.ServerDir, AgentDir: layout.AgentDir, BPFRoot: layout.BPFRoot}

// Units are the unit names by role.
var Units = map[string]string{"server": "skiff.service", "agent": "skiff-agent.service"}

// Unit is the systemd unit of role ("server" or "agent") running bin.
func Unit(role, bin string) string {
	what := map[string]string{"server": "the control plane and a node agent", "agent": "a node agent"}[role]
	return fmt.Sprintf(`[Unit]
Description=skiff %[1]s: %[2]s
Documentation=https://github.com/skiff-sh/skiff/tree/main/docs
Wants=network-online.target
After=network-online.target

[Service]
# skiff tells systemd when it serves (sd_notify READY=1): the API server ready, the agent healthy.
Type=notify
NotifyAccess=main
EnvironmentFile=-/etc/default/skiff
ExecStart=%[3]s %[1]s
# Only skiff itself is stopped: the containers' shims and the pods stay, and a restarted
# agent takes them over again (their traffic never stops: the dataplane is pinned).
KillMode=process
# skiff makes the pods' cgroups below its own.
Delegate=yes
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
TimeoutStartSec=0
Restart=always
RestartSec=5s

[Install]
WantedBy=multi-user.target
`, role, what, bin)
}

// ConfigYAML is the configuration file of the flags set in fs (flag names as keys, lists as
// lists), as internal/configfile reads it back.
func ConfigYAML(fs *pflag.FlagSet) ([]byte, error) {
	values := map[string]any{}
	fs.Visit(func(f *pflag.Flag) {
		if f.Name == "config" {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			values[f.Name] = sv.GetSlice()
			return
		}
		values[f.Name] = f.Value.String()
	})
	if len(values) == 0 {
		return nil, nil
	}
	b, err := yaml.Marshal(values)
	if err != nil {
		return nil, err
	}
	return append([]byte("# written by `skiff install`; flag names as keys (docs/operations/configuration.md)\n"), b...), nil
}

// Options are one installation.
type Options struct {
	Role string
	// Flags are the role's parsed flags: those set are written to the configuration file.
	Flags *pflag.FlagSet
	// Exe is the binary to install; Images are image archives for the agent's first start
	// (an air-gapped install: nothing is pulled).
	Exe    string
	Images []string
	Paths  Paths
	// Systemctl runs systemctl (exec by default).
	Systemctl func(args ...string) error
	Out       io.Writer
}

// Install writes the binary, the configuration file, the unit and the images, then enables
// and starts the unit.
func Install(o Options) error {
	unit, ok := Units[o.Role]
	if !ok {
		return fmt.Errorf("install what? %q: want server or agent", o.Role)
	}
	if o.Systemctl == nil {
		o.Systemctl = systemctl
	}
	bin := filepath.Join(o.Paths.BinDir, "skiff")
	if err := copyFile(o.Exe, bin, 0o755); err != nil {
		return fmt.Errorf("installing the binary: %w", err)
	}
	fmt.Fprintln(o.Out, "installed", bin)
	config, err := ConfigYAML(o.Flags)
	if err != nil {
		return err
	}
	if config != nil {
		if err := writeFile(o.Paths.ConfigFile, config, 0o600); err != nil {
			return err
		}
		fmt.Fprintln(o.Out, "wrote", o.Paths.ConfigFile)
	}
	// The server's agent keeps its data where an agent's is (--agent-data-dir).
	for _, img := range o.Images {
		to := filepath.Join(o.Paths.AgentDir, "images", filepath.Base(img))
		if err := copyFile(img, to, 0o644); err != nil {
			return fmt.Errorf("image archive: %w", err)
		}
		fmt.Fprintln(o.Out, "copied", to)
	}
	unitPath := filepath.Join(o.Paths.UnitDir, unit)
	if err := writeFile(unitPath, []byte(Unit(o.Role, bin)), 0o644); err != nil {
		return err
	}
	fmt.Fprintln(o.Out, "wrote", unitPath)
	if err := o.Systemctl("daemon-reload"); err != nil {
		return err
	}
	if err := o.Systemctl("enable", "--now", unit); err != nil {
		return fmt.Errorf("starting %s (journalctl -u %s says why): %w", unit, unit, err)
	}
	fmt.Fprintf(o.Out, "%s enabled and started\n", unit)
	return nil
}

// Uninstall stops and disables the units, runs Killall, and removes the binary, the units and
// the configuration — and the data directories, pod logs and snapshots when data is true.
func Uninstall(p Paths, data bool, run func(args ...string) error, out io.Writer) error {
	if run == nil {
		run = systemctl
	}
	var errs []error
	var units []string
	for _, u := range Units {
		units = append(units, u)
	}
	slices.Sort(units)
	for _, u := range units {
		path := filepath.Join(p.UnitDir, u)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		if err := run("disable", "--now", u); err != nil {
			errs = append(errs, err)
		}
		if err := os.Remove(path); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintln(out, "removed", path)
		}
	}
	_ = run("daemon-reload")
	errs = append(errs, Killall(p, out))
	remove := []string{filepath.Join(p.BinDir, "skiff"), p.ConfigFile, p.ConfigFile + ".d"}
	if data {
		remove = append(remove, filepath.Dir(p.ServerDir), layout.PodLogDir)
	}
	for _, r := range remove {
		if _, err := os.Lstat(r); err != nil {
			continue
		}
		if err := os.RemoveAll(r); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintln(out, "removed", r)
		}
	}
	if dir := filepath.Dir(p.ConfigFile); isEmptyDir(dir) {
		_ = os.Remove(dir)
	}
	return errors.Join(errs...)
}

func isEmptyDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) == 0
}

func systemctl(args ...string) error {
	out, err := exec.Command("systemctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func writeFile(path string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// copyFile copies from to to (replacing it whole: a running binary is not written over).
func copyFile(from, to string, mode os.FileMode) error {
	if same, _ := sameFile(from, to); same {
		return nil
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return writeFile(to, b, mode)
}

func sameFile(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}
