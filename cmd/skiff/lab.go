package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/lab"
)

// labCommand builds and tears down the multi-node lab on this machine (see package lab).
func labCommand() *cobra.Command {
	var name, tor, logLevel, clusterCIDR, ipFamily string
	var nodes, servers int
	var serviceProxy, networkPolicy bool
	var timeout time.Duration
	cmd := &cobra.Command{Use: "lab", Short: "A multi-node cluster on this machine: namespaces, a fabric, a ToR router"}
	cmd.PersistentFlags().StringVar(&name, "name", "lab", "lab name (1-8 lowercase letters and digits); prefixes its namespaces")
	up := &cobra.Command{Use: "up", Short: "Build the lab and wait until every node is Ready", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			spec := lab.Spec{Name: name, Nodes: nodes, Servers: servers, ToR: tor, NoServiceProxy: !serviceProxy, NoNetworkPolicy: !networkPolicy, IPFamily: ipFamily}
			if clusterCIDR != "" {
				p, err := netip.ParsePrefix(clusterCIDR)
				if err != nil {
					return fmt.Errorf("--cluster-cidr %q: %w", clusterCIDR, err)
				}
				spec.ClusterCIDR = p
			}
			start := time.Now()
			if err := lab.Up(ctx, lab.Options{Spec: spec, Timeout: timeout, Out: os.Stdout}, newLogger(logLevel)); err != nil {
				return fmt.Errorf("%w\n(inspect the logs under %s/%s, then: skiff lab down --name %s)", err, lab.Root, name, name)
			}
			fmt.Printf("\nlab %s is up in %s: %d nodes Ready.\n\nTry:\n", name, time.Since(start).Round(time.Second), nodes+1)
			kc := lab.Kubeconfig(name)
			fmt.Printf("  export KUBECONFIG=%s\n", kc)
			fmt.Printf("  kubectl get nodes -o wide\n")
			fmt.Printf("  kubectl create deployment web --image=localhost/skiff/netutil:1 --replicas=3\n")
			fmt.Printf("  kubectl get pods -o wide\n")
			switch {
			case spec.Dual():
				fmt.Printf("  skiff lab exec node1 -- ip route            # other nodes' pod blocks, proto bgp\n")
				fmt.Printf("  skiff lab exec node1 -- ip -6 route         # and their IPv6 blocks\n")
			case spec.HasIPv6():
				fmt.Printf("  skiff lab exec node1 -- ip -6 route         # other nodes' pod blocks, proto bgp\n")
			default:
				fmt.Printf("  skiff lab exec node1 -- ip route            # other nodes' pod blocks, proto bgp\n")
			}
			fmt.Printf("  skiff lab exec node1 -- skiff bgp peers\n")
			if cli := lab.RouterCLI(spec); cli != nil {
				fmt.Printf("  skiff lab exec tor -- %s\n", strings.Join(quote(cli), " "))
			}
			fmt.Printf("  skiff lab status --name %s\n  skiff lab down --name %s\n", name, name)
			return nil
		}}
	up.Flags().IntVar(&nodes, "nodes", 2, "worker nodes beside the master")
	up.Flags().IntVar(&servers, "servers", 1, "hosts running skiff server (HA with embedded etcd): the master with --cluster-init and node1 … joining it; 1, 3 or 5")
	up.Flags().StringVar(&tor, "tor", "frr", "top-of-rack router: frr, bird or none (nodes then peer in a full mesh)")
	up.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for every node to be Ready")
	up.Flags().BoolVar(&serviceProxy, "service-proxy", true, "load-balance Services with skiff's eBPF programs (false leaves Services to another proxy, such as kube-proxy)")
	up.Flags().BoolVar(&networkPolicy, "network-policy", true, "enforce NetworkPolicies with skiff's eBPF programs (false leaves pods unpoliced)")
	up.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	up.Flags().StringVar(&ipFamily, "ip-family", lab.IPv4, "ipv4; dual: every host also gets an IPv6 address on the fabric (2001:2::/64), the cluster IPv6 pod and Service ranges (fd00:10:244::/56, fd00:10:96::/108), and the ToR both BGP tables; or ipv6: IPv6's addresses and ranges only, BGP sessions over IPv6")
	up.Flags().StringVar(&clusterCIDR, "cluster-cidr", "", "the server's --cluster-cidr (default 10.244.0.0/16: 256 nodes; the scale harness's simulated nodes need more)")
	var grow int
	add := &cobra.Command{Use: "add-node", Short: "Add worker nodes to a running lab", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return lab.Grow(cmd.Context(), lab.Options{Spec: lab.Spec{Name: name}, Out: os.Stdout, Timeout: timeout}, grow)
		}}
	add.Flags().IntVar(&grow, "nodes", 3, "total worker nodes wanted")
	add.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the new nodes to be Ready")
	down := &cobra.Command{Use: "down", Short: "Remove every process, namespace, cgroup and file of the lab", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return lab.Down(name, os.Stdout) }}
	status := &cobra.Command{Use: "status", Short: "Show the lab's hosts, processes and node readiness", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return lab.Status(cmd.Context(), name, os.Stdout) }}
	execCmd := &cobra.Command{Use: "exec HOST -- COMMAND [ARGS...]", Short: "Run a command in a lab host's network namespace (master, node1, tor)",
		Args: cobra.MinimumNArgs(2), DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			err := lab.Exec(name, args[0], args[1:])
			if ee, ok := err.(interface{ ExitCode() int }); ok && ee.ExitCode() > 0 {
				os.Exit(ee.ExitCode())
			}
			return err
		}}
	restart := &cobra.Command{Use: "restart-agent NODE", Short: "Restart a worker's skiff (its agent, or its server in a lab of --servers 3) with SIGTERM, then start it again, as an upgrade does",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid, err := lab.RestartAgent(lab.Options{Spec: lab.Spec{Name: name}}, args[0])
			if err == nil {
				fmt.Printf("%s: restarted (pid %d)\n", args[0], pid)
			}
			return err
		}}
	var to string
	upgrade := &cobra.Command{Use: "upgrade --to BIN", Short: "Upgrade every node of the lab to another skiff binary: servers first, then agents, one at a time, each node Ready before the next",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return fmt.Errorf("--to: the skiff binary to upgrade to")
			}
			bin, err := filepath.Abs(to)
			if err != nil {
				return err
			}
			if err := lab.Upgrade(cmd.Context(), lab.Options{Spec: lab.Spec{Name: name}, Out: os.Stdout}, bin); err != nil {
				return err
			}
			fmt.Printf("lab %s upgraded to %s\n", name, bin)
			return nil
		}}
	upgrade.Flags().StringVar(&to, "to", "", "the skiff binary to run on every node")
	cmd.AddCommand(up, add, down, status, execCmd, restart, upgrade)
	return cmd
}

func quote(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}
