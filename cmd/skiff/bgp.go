package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/skiff-sh/skiff/bgp"
)

// bgpCommand inspects the node agent's BGP speaker through its GoBGP API, like
// `cilium-dbg bgp peers` (in the lab: skiff lab exec NODE -- skiff bgp peers).
func bgpCommand() *cobra.Command {
	var address string
	cmd := &cobra.Command{Use: "bgp", Short: "Show this node's BGP sessions and routes"}
	cmd.PersistentFlags().StringVar(&address, "api-address", "127.0.0.1:50051", "the agent's GoBGP API (agent flag --bgp-api-address)")
	dial := func(ctx context.Context) (api.GobgpApiClient, func(), error) {
		conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, err
		}
		return api.NewGobgpApiClient(conn), func() { conn.Close() }, nil
	}
	peers := &cobra.Command{Use: "peers", Short: "BGP sessions: peer, AS, state, uptime, prefixes received/accepted/advertised", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			c, closeConn, err := dial(ctx)
			if err != nil {
				return err
			}
			defer closeConn()
			stream, err := c.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true})
			if err != nil {
				return fmt.Errorf("agent BGP API at %s: %w", address, err)
			}
			var list []*api.Peer
			for {
				r, err := stream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					return fmt.Errorf("agent BGP API at %s: %w", address, err)
				}
				list = append(list, r.Peer)
			}
			printPeers(os.Stdout, list, time.Now())
			return nil
		}}
	var family string
	routes := &cobra.Command{Use: "routes", Short: "The unicast RIB, IPv4 then IPv6: prefix, next hop, AS path, best, age", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			families := map[string][]api.Family_Afi{"ipv4": {api.Family_AFI_IP}, "ipv6": {api.Family_AFI_IP6},
				"all": {api.Family_AFI_IP, api.Family_AFI_IP6}}[family]
			if families == nil {
				return fmt.Errorf("--family %q: want ipv4, ipv6 or all", family)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			c, closeConn, err := dial(ctx)
			if err != nil {
				return err
			}
			defer closeConn()
			var dests []*api.Destination
			for _, afi := range families {
				got, err := listPaths(ctx, c, afi)
				if err != nil && (family != "all" || afi == api.Family_AFI_IP) {
					return fmt.Errorf("agent BGP API at %s: %w", address, err)
				}
				// An IPv4-only speaker has no IPv6 table: all of it is the IPv4 one.
				dests = append(dests, got...)
			}
			printRoutes(os.Stdout, dests, time.Now())
			return nil
		}}
	routes.Flags().StringVar(&family, "family", "all", "ipv4, ipv6 or all (a node speaks IPv6 unicast when it has an IPv6 address)")
	cmd.AddCommand(peers, routes)
	return cmd
}

// listPaths is one family's unicast RIB, by prefix.
func listPaths(ctx context.Context, c api.GobgpApiClient, afi api.Family_Afi) ([]*api.Destination, error) {
	stream, err := c.ListPath(ctx, &api.ListPathRequest{TableType: api.TableType_GLOBAL,
		Family: &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST}, SortType: api.ListPathRequest_PREFIX})
	if err != nil {
		return nil, err
	}
	var dests []*api.Destination
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			return dests, nil
		}
		if err != nil {
			return dests, err
		}
		dests = append(dests, r.Destination)
	}
}

func printPeers(w io.Writer, peers []*api.Peer, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tAS\tSTATE\tUPTIME\tRECEIVED\tACCEPTED\tADVERTISED\tDESCRIPTION")
	for _, p := range peers {
		state, uptime := "UNKNOWN", "-"
		if p.State != nil {
			state = strings.TrimPrefix(p.State.SessionState.String(), "SESSION_STATE_")
		}
		if p.Timers != nil && p.Timers.State != nil && p.Timers.State.Uptime != nil && state == "ESTABLISHED" {
			uptime = duration.HumanDuration(now.Sub(p.Timers.State.Uptime.AsTime()))
		}
		var rcv, acc, adv uint64
		for _, af := range p.AfiSafis {
			if af.State != nil {
				rcv, acc, adv = rcv+af.State.Received, acc+af.State.Accepted, adv+af.State.Advertised
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\n", p.Conf.NeighborAddress, p.Conf.PeerAsn, state, uptime, rcv, acc, adv, p.Conf.Description)
	}
	tw.Flush()
}

func printRoutes(w io.Writer, dests []*api.Destination, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PREFIX\tNEXTHOP\tASPATH\tBEST\tFROM\tAGE")
	for _, d := range dests {
		prefix, err := netip.ParsePrefix(d.Prefix)
		if err != nil {
			continue
		}
		for _, p := range d.Paths {
			path, ok := bgp.PathOf(prefix, p)
			nh := "-"
			if ok {
				nh = path.NextHop.String()
			}
			from := p.NeighborIp
			if from == "" || from == "<nil>" {
				from = "local"
			}
			age := "-"
			if p.Age != nil {
				age = duration.HumanDuration(now.Sub(p.Age.AsTime()))
			}
			best := ""
			if p.Best {
				best = "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Prefix, nh, bgp.ASPathString(p), best, from, age)
		}
	}
	tw.Flush()
}
