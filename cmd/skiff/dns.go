package main

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/agent/clusterdns"
	"github.com/skiff-sh/skiff/system"
)

// dnsCommand asks a node's cluster DNS, as dig would.
func dnsCommand() *cobra.Command {
	var server, qtype string
	var tcp bool
	var timeout time.Duration
	cmd := &cobra.Command{Use: "dns", Short: "Ask the cluster DNS an agent serves"}
	query := &cobra.Command{
		Use:   "query NAME",
		Short: "Resolve NAME (a fully qualified name; a trailing dot is added) at a node's cluster DNS",
		Example: `  skiff dns query kubernetes.default.svc.cluster.local
  skiff dns query _http._tcp.web.default.svc.cluster.local --type SRV
  skiff lab exec node1 -- skiff dns query web.default.svc.cluster.local`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, ok := dns.StringToType[strings.ToUpper(qtype)]
			if !ok {
				return fmt.Errorf("--type %q: not a DNS record type (A, AAAA, SRV, PTR, CNAME, TXT …)", qtype)
			}
			name := args[0]
			if t == dns.TypePTR && net.ParseIP(name) != nil {
				name, _ = dns.ReverseAddr(name)
			}
			if _, ok := dns.IsDomainName(name); !ok {
				return fmt.Errorf("%q is not a domain name", name)
			}
			addr := server
			if addr == "" {
				addr = net.JoinHostPort(system.NodeAddress(""), "53")
			} else if _, _, err := net.SplitHostPort(addr); err != nil {
				addr = net.JoinHostPort(addr, "53")
			}
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(name), t)
			m.SetEdns0(dns.DefaultMsgSize, false)
			c := &dns.Client{Net: "udp", Timeout: timeout}
			if tcp {
				c.Net = "tcp"
			}
			r, rtt, err := c.Exchange(m, addr)
			if err != nil {
				return fmt.Errorf("asking %s: %w", addr, err)
			}
			fmt.Print(clusterdns.FormatAnswer(r))
			fmt.Printf(";; from %s over %s in %s\n", addr, c.Net, rtt.Round(time.Microsecond))
			return nil
		},
	}
	query.Flags().StringVar(&qtype, "type", "A", "record type")
	query.Flags().BoolVar(&tcp, "tcp", false, "ask over TCP")
	query.Flags().DurationVar(&timeout, "timeout", 2*time.Second, "how long to wait for the answer")
	cmd.PersistentFlags().StringVar(&server, "server", "", "resolver to ask, HOST[:PORT] (default: this node's address, port 53)")
	cmd.AddCommand(query)
	return cmd
}
