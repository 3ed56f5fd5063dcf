package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/dataplane/loader"
	"github.com/skiff-sh/skiff/dataplane/netpol"
	"github.com/skiff-sh/skiff/dataplane/policy"
	"github.com/skiff-sh/skiff/dataplane/programs"
	"github.com/skiff-sh/skiff/dataplane/services"
)

// bpfCommand prints the node's pinned service maps in Service terms, like
// `cilium-dbg bpf lb list` (bpftool map dump pinned … shows the raw entries).
func bpfCommand() *cobra.Command {
	var node, pinDir string
	cmd := &cobra.Command{Use: "bpf", Short: "Show this node's eBPF service maps"}
	cmd.PersistentFlags().StringVar(&node, "node", "", "node whose maps to read (default: the only one pinned on this machine)")
	cmd.PersistentFlags().StringVar(&pinDir, "pin-dir", "", "pin directory to read (default /sys/fs/bpf/skiff/<node>)")
	open := func() (services.Maps, func(), error) {
		dir, err := nodePinDir(node, pinDir)
		if err != nil {
			return services.Maps{}, nil, err
		}
		return loader.OpenPinned(dir)
	}
	// readEntries reads the frontends, sorted by Service.
	readEntries := func() ([]services.Entry, error) {
		m, closeMaps, err := open()
		if err != nil {
			return nil, err
		}
		defer closeMaps()
		out, err := m.Dump()
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, err
	}
	servicesCmd := &cobra.Command{Use: "services", Short: "Service frontends and their backends", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			entries, err := readEntries()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "SERVICE\tFRONTEND\tAFFINITY\tBACKENDS")
			for _, e := range entries {
				aff, backends := "-", "<none: refused>"
				if e.Affinity > 0 {
					aff = "ClientIP " + e.Affinity.String()
				}
				if len(e.Backends) > 0 {
					backends = strings.Join(e.Backends, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, e.Frontend, aff, backends)
			}
			return tw.Flush()
		}}
	backends := &cobra.Command{Use: "backends", Short: "Every backend slot: service id, slot, address", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			entries, err := readEntries()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSLOT\tBACKEND\tSERVICE")
			for _, e := range entries {
				for i, b := range e.Backends {
					fmt.Fprintf(tw, "%d\t%d\t%s\t%s\n", e.ID, i+1, b, e.Name)
				}
			}
			return tw.Flush()
		}}
	conntrack := &cobra.Command{Use: "conntrack", Short: "Live balanced sockets: what each asked for and where it went", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, closeMaps, err := open()
			if err != nil {
				return err
			}
			defer closeMaps()
			socks, err := m.ListSockets()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "SOCKET\tSERVICE\tBACKEND")
			for _, s := range socks {
				fmt.Fprintf(tw, "%d\t%s\t%s\n", s.Cookie, s.Service, s.Backend)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, sockCap, _ := m.SocketCount()
			fmt.Printf("%d entries of %d\n\n", len(socks), sockCap)
			flows, err := services.ListFlows(m.CT, m.CT6, programs.Monotonic())
			if err != nil {
				return err
			}
			tw = tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "NODEPORT FLOW\tDIRECTION\tREWRITE\tPACKETS\tBYTES\tIDLE")
			for _, f := range flows {
				dir := "forward"
				if f.Reverse {
					dir = "reply"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", f.Tuple, dir, f.Rewrite, f.Packets, f.Bytes, f.Idle.Round(time.Second))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, ctCap, _ := services.ConntrackCount(m.CT, m.CT6)
			fmt.Printf("%d entries of %d\n", len(flows), ctCap)
			return nil
		}}
	policyCmd := &cobra.Command{Use: "policy", Short: "Each policed pod's identity, isolation and admitted peers, in Kubernetes terms", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := openPolicyView(node, pinDir)
			if err != nil {
				return err
			}
			defer v.Close()
			eps, err := v.Endpoints()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "POD\tADDRESS\tIDENTITY\tINGRESS\tEGRESS")
			isolation := func(isolated, audit bool) string {
				switch {
				case isolated:
					return "isolated"
				case audit:
					return "open (audit: isolated)"
				}
				return "open"
			}
			for _, e := range eps {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", e.Pod, e.Address, e.Identity, isolation(e.Ingress, e.AuditIngress), isolation(e.Egress, e.AuditEgress))
				for _, r := range e.Rules {
					fmt.Fprintf(tw, "  %s %s\t%s\tports %s\t%s\t\n", r.Direction, map[bool]string{true: "from", false: "to"}[r.Direction&policy.Egress == 0],
						r.Peer, netpol.ProtocolName(r.Protocol)+" "+r.PortRange(), r.Policy)
				}
			}
			return tw.Flush()
		}}
	cmd.AddCommand(servicesCmd, backends, conntrack, policyCmd)
	return cmd
}

// nodePinDir is --pin-dir, or --node's pin directory, or the only one pinned here.
func nodePinDir(node, pinDir string) (string, error) {
	if pinDir != "" {
		return pinDir, nil
	}
	if node != "" {
		return loader.PinDir(node), nil
	}
	dirs, _ := filepath.Glob(filepath.Join(loader.BPFFS, "skiff", "*"))
	if len(dirs) != 1 {
		return "", fmt.Errorf("%d nodes have maps pinned here (%s): name one with --node", len(dirs), strings.Join(dirs, ", "))
	}
	return dirs[0], nil
}
