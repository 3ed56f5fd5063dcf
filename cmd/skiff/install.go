package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/system"
	"github.com/skiff-sh/skiff/system/install"
)

// installCommand is k3s's install script as a command: `skiff install server|agent [flags]`
// writes the binary, the role's flags as /etc/skiff/config.yaml and a systemd unit, and
// starts it (system/install).
func installCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "install", Short: "Install skiff on this machine as a systemd service: server or agent"}
	for _, role := range []struct {
		name string
		cmd  func() *cobra.Command
	}{{"server", func() *cobra.Command { return serverCommand("server", "") }}, {"agent", agentCommand}} {
		cmd.AddCommand(&cobra.Command{
			Use:                role.name + " [flags of skiff " + role.name + "]",
			Short:              "Install and start skiff " + role.name + " (" + install.Units[role.name] + ") with these flags in the configuration file",
			DisableFlagParsing: true, // the role's flags, parsed (and checked) by the role's own flag set
			RunE: func(c *cobra.Command, args []string) error {
				roleCmd := role.cmd()
				if slices.Contains(args, "-h") || slices.Contains(args, "--help") {
					c.Printf("Usage: skiff install %s [flags of skiff %s]\n\n%s", role.name, role.name, roleCmd.Flags().FlagUsages())
					return nil
				}
				fs := roleCmd.Flags()
				if err := fs.Parse(args); err != nil {
					return err
				}
				if fs.NArg() > 0 {
					return errors.New("skiff install " + role.name + " takes flags only")
				}
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				images, _ := filepath.Glob(filepath.Join(system.ExeDir(), "images", "*.tar"))
				return install.Install(install.Options{Role: role.name, Flags: fs, Exe: exe, Images: images, Paths: install.DefaultPaths, Out: c.OutOrStdout()})
			},
		})
	}
	return cmd
}

func uninstallCommand() *cobra.Command {
	var data bool
	cmd := &cobra.Command{Use: "uninstall", Short: "Stop skiff, remove what it made and its files (k3s-uninstall.sh); its data only with --data", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return install.Uninstall(install.DefaultPaths, data, nil, c.OutOrStdout())
		}}
	cmd.Flags().BoolVar(&data, "data", false, "remove the data too: /var/lib/skiff (etcd, certificates, images, snapshots) and the pod logs")
	return cmd
}

func killallCommand() *cobra.Command {
	return &cobra.Command{Use: "killall", Short: "Stop every skiff process, container and pod, and remove skiff's BPF pins and routes (k3s-killall.sh); files stay", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return install.Killall(install.DefaultPaths, c.OutOrStdout())
		}}
}

func checkConfigCommand() *cobra.Command {
	return &cobra.Command{Use: "check-config", Short: "Report what this machine's kernel and host give skiff (k3s check-config); non-zero when something required is missing", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !install.PrintChecks(c.OutOrStdout(), install.CheckConfig()) {
				return errors.New("something skiff requires is missing (above)")
			}
			return nil
		}}
}
