package main

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/system"
)

// certificateCommand is k3s's `certificate` and kubeadm's `certs check-expiration`: what the
// server's certificates are, when they expire, and rotating them at the next start.
func certificateCommand() *cobra.Command {
	var dataDir string
	var clientPort int
	cmd := &cobra.Command{Use: "certificate", Short: "The server's certificates: check their expiry, rotate them"}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", layout.ServerDir, "the server's data directory")
	kubeconfigs := func() []string {
		d := layout.Server{Dir: dataDir}
		return []string{d.Kubeconfig("admin"), d.Kubeconfig("scheduler"), d.Kubeconfig("controller-manager"), d.Kubeconfig("node")}
	}
	check := &cobra.Command{Use: "check", Short: "List every certificate with its expiry and whether the next start renews it", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			certs, err := pki.Inventory(layout.Server{Dir: dataDir}.PKI(), kubeconfigs(), now)
			if err != nil {
				return err
			}
			// Leaves and kubeconfigs by name, then the CAs.
			slices.SortFunc(certs, func(a, b pki.Cert) int {
				if a.IsCA != b.IsCA && a.IsCA {
					return 1
				} else if a.IsCA != b.IsCA {
					return -1
				}
				return strings.Compare(a.Name, b.Name)
			})
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
			fmt.Fprintln(w, "CERTIFICATE\tEXPIRES\tRESIDUAL TIME\tCERTIFICATE AUTHORITY\tRENEWED AT NEXT START")
			for _, c := range certs {
				renews := "no"
				if c.IsCA {
					renews = "no (a CA)"
				} else if c.Renews != "" {
					renews = "yes: " + c.Renews
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.NotAfter.UTC().Format("Jan 02, 2006 15:04 UTC"), residual(c.NotAfter.Sub(now)), c.Authority, renews)
			}
			return w.Flush()
		}}
	var names []string
	rotate := &cobra.Command{Use: "rotate", Short: "Remove the server's leaf certificates (all, or --service ones) so its next start issues them again from the CAs", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort)), time.Second); err == nil {
				c.Close()
				return fmt.Errorf("the server is running (its etcd answers on 127.0.0.1:%d): stop it before rotating its certificates", clientPort)
			}
			removed, err := pki.Rotate(layout.Server{Dir: dataDir}.PKI(), kubeconfigs(), names)
			for _, f := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), "removed", f)
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "Start skiff server to issue them again; agents joined with a token keep working (the CAs are unchanged).")
			return nil
		}}
	rotate.Flags().StringSliceVar(&names, "service", nil, "certificates to rotate, by the names `skiff certificate check` lists (default: every leaf and kubeconfig)")
	rotate.Flags().IntVar(&clientPort, "etcd-client-port", system.DefaultServer().EtcdClientPort, "the embedded etcd's client port, to tell a running server")
	cmd.AddCommand(check, rotate)
	return cmd
}

// residual is kubeadm's RESIDUAL TIME: 364d, 23h, or "expired".
func residual(d time.Duration) string {
	switch {
	case d <= 0:
		return "expired"
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	default:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
}
