package main

import (
	"errors"
	"fmt"
	"net"
	"os"
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
			if err := w.Flush(); err != nil {
				return err
			}
			if under := pki.RotationsUnderway(layout.Server{Dir: dataDir}.PKI()); len(under) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "\nCA rotation under way for %s: old and new CAs are both trusted until `skiff certificate rotate-ca --complete`.\n", strings.Join(under, ", "))
			}
			return nil
		}}
	var names []string
	rotate := &cobra.Command{Use: "rotate", Short: "Remove the server's leaf certificates (all, or --service ones) so its next start issues them again from the CAs", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := serverStopped(clientPort); err != nil {
				return err
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
	var complete bool
	var cas []string
	rotateCA := &cobra.Command{Use: "rotate-ca", Args: cobra.NoArgs,
		Short: "Replace the CAs: a new CA trusted beside the old one (cross-signed by it) until --complete drops the old",
		Long: `Replace the server's CAs in two steps, with the server stopped for each.

skiff certificate rotate-ca makes a new CA for each CA (--ca, all by default). The CA
file becomes a bundle of the new CA and the old, so everything that verifies with it trusts
both; the server's next start issues its certificates from the new CA, each carrying the new
CA signed by the old one, so agents and kubeconfigs that trust only the old CA keep working.
Agents fetch the bundle from /cacerts, restart themselves to trust it and renew their
certificates from the new CA (their cert-rotation part; --cluster-ca-check-interval). The
join token's CA hash changes: give new nodes the token from <data-dir>/token.

skiff certificate rotate-ca --complete, once every agent has renewed (skiff certificate
check lists the rotation; kubectl get csr shows the renewals), drops the old CA: from the
next start on, a certificate of the old CA is refused. Copy admin.kubeconfig out again.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := serverStopped(clientPort); err != nil {
				return err
			}
			l := layout.Server{Dir: dataDir}.PKI()
			var files []string
			var err error
			if complete {
				files, err = pki.CompleteCARotation(l)
			} else {
				files, err = pki.RotateCA(l, cas, time.Now())
			}
			for _, f := range files {
				verb := "wrote"
				if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
					verb = "removed"
				}
				fmt.Fprintln(cmd.OutOrStdout(), verb, f)
			}
			switch {
			case err != nil:
				return err
			case complete && len(files) == 0:
				fmt.Fprintln(cmd.OutOrStdout(), "No CA rotation is under way.")
			case complete:
				fmt.Fprintln(cmd.OutOrStdout(), "Start skiff server: it issues its certificates again without the old CA, and trusts only the new one.")
			default:
				fmt.Fprintln(cmd.OutOrStdout(), "Start skiff server: it issues its certificates from the new CAs. Once every agent has renewed, run skiff certificate rotate-ca --complete.")
			}
			return nil
		}}
	rotateCA.Flags().BoolVar(&complete, "complete", false, "end the rotation under way: trust the new CAs only")
	rotateCA.Flags().StringSliceVar(&cas, "ca", nil, "CAs to rotate: "+strings.Join(pki.CANames, ", ")+" (default: all)")
	for _, c := range []*cobra.Command{rotate, rotateCA} {
		c.Flags().IntVar(&clientPort, "etcd-client-port", system.DefaultServer().EtcdClientPort, "the embedded etcd's client port, to tell a running server")
	}
	cmd.AddCommand(check, rotate, rotateCA)
	return cmd
}

// serverStopped refuses while the server runs (its embedded etcd answers on clientPort):
// the certificate commands change files a running server has loaded.
func serverStopped(clientPort int) error {
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort)), time.Second); err == nil {
		c.Close()
		return fmt.Errorf("the server is running (its etcd answers on 127.0.0.1:%d): stop it before changing its certificates", clientPort)
	}
	return nil
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
