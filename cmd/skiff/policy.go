package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/dataplane/netpol"
	"github.com/skiff-sh/skiff/dataplane/policy"
)

// policyCommand answers questions about NetworkPolicy from a node's live maps.
func policyCommand() *cobra.Command {
	var node, pinDir, proto string
	var port uint16
	cmd := &cobra.Command{Use: "policy", Short: "Ask a node's NetworkPolicy datapath"}
	trace := &cobra.Command{
		Use:   "trace FROM TO",
		Short: "Would a new connection from FROM to TO (pod addresses) pass, and which policy decides",
		Example: `  skiff policy trace 10.244.1.5 10.244.2.7 --proto tcp --port 80
  skiff lab exec node1 -- skiff policy trace 10.244.1.5 10.244.1.9 --port 8080`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := netip.ParseAddr(args[0])
			if err != nil {
				return fmt.Errorf("FROM: %w", err)
			}
			dst, err := netip.ParseAddr(args[1])
			if err != nil {
				return fmt.Errorf("TO: %w", err)
			}
			p, ok := map[string]uint8{"tcp": policy.TCP, "udp": policy.UDP, "sctp": policy.SCTP}[strings.ToLower(proto)]
			if !ok {
				return fmt.Errorf("--proto %q: want tcp, udp or sctp", proto)
			}
			v, err := openPolicyView(node, pinDir)
			if err != nil {
				return err
			}
			defer v.Close()
			steps, allowed, err := v.Trace(src, dst, p, port)
			if err != nil {
				return err
			}
			if len(steps) == 0 {
				fmt.Printf("neither %s nor %s is a pod of this node: nothing here decides (trace on their nodes)\n", src, dst)
				return nil
			}
			for _, st := range steps {
				fmt.Printf("%-8s at %s: %s (%s)\n", st.Direction, st.Endpoint, st.Verdict, st.Why)
			}
			if allowed {
				fmt.Println("verdict: ALLOWED")
			} else {
				fmt.Println("verdict: DENIED")
			}
			return nil
		},
	}
	trace.Flags().StringVar(&proto, "proto", "tcp", "protocol: tcp, udp or sctp")
	trace.Flags().Uint16Var(&port, "port", 80, "destination port")
	cmd.PersistentFlags().StringVar(&node, "node", "", "node whose maps to read (default: the only one pinned on this machine)")
	cmd.PersistentFlags().StringVar(&pinDir, "pin-dir", "", "pin directory to read (default /sys/fs/bpf/skiff/<node>)")
	cmd.AddCommand(trace)
	return cmd
}

// openPolicyView opens a node's pinned NetworkPolicy maps (skiff bpf policy, skiff policy trace).
func openPolicyView(node, pinDir string) (*netpol.PolicyView, error) {
	dir, err := nodePinDir(node, pinDir)
	if err != nil {
		return nil, err
	}
	return netpol.OpenPolicyPinned(dir)
}
