package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/system"
)

// genDocsCommand writes the command reference (docs/reference/commands, by `make docs`)
// from the command tree itself, as kubectl's reference is made, so it is never written
// twice. Defaults that depend on the machine it runs on (the host name, the binary's
// directory) are written as what they stand for, so the pages are the same everywhere.
func genDocsCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-docs DIR",
		Short:  "Write the command reference as Markdown, one page per command",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			old, _ := filepath.Glob(filepath.Join(dir, "skiff*.md"))
			for _, f := range old {
				if err := os.Remove(f); err != nil {
					return err
				}
			}
			root := newRoot()
			root.DisableAutoGenTag = true
			host, _ := os.Hostname()
			exeDir := system.ExeDir()
			var walk func(*cobra.Command)
			walk = func(c *cobra.Command) {
				c.Flags().VisitAll(func(f *pflag.Flag) {
					switch {
					case host != "" && f.DefValue == host:
						f.DefValue = "<host name>"
					case strings.HasPrefix(f.DefValue, exeDir+string(filepath.Separator)):
						f.DefValue = "<directory of the skiff binary>" + strings.TrimPrefix(f.DefValue, exeDir)
					}
				})
				for _, sub := range c.Commands() {
					walk(sub)
				}
			}
			walk(root)
			if err := doc.GenMarkdownTree(root, dir); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "command reference written to", dir)
			return nil
		},
	}
}
