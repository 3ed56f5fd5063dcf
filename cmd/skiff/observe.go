package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/dataplane/flows"
	"github.com/skiff-sh/skiff/internal/layout"
)

// observeCommand is `hubble observe` for skiff: the flows the nodes' eBPF programs reported,
// read from each agent through the API server's node proxy.
func observeCommand() *cobra.Command {
	var (
		kubeconfig, output string
		nodes              []string
		last               int
		follow             bool
		f                  struct{ pods, namespaces, labels, verdicts, ports, protocols, services, types []string }
	)
	cmd := &cobra.Command{
		Use:   "observe",
		Short: "Show the network's flows: policy verdicts, Service translations and drops, from every node",
		Long: `Prints the flows the nodes' eBPF programs reported — connections admitted or dropped by
NetworkPolicy (with the policy that decided), those an audit-mode policy would drop, Service
frontends translated to backends, and drops for want of a backend — newest last, then exits;
-f follows. Flows are read from each node's agent through the API server's node proxy
(GET nodes/proxy, which RBAC grants to cluster-admin), so this runs wherever kubectl does.`,
		Example: `  skiff observe --verdict dropped
  skiff observe -f --namespace default --port 80
  skiff observe --node node2 --pod default/web --last 100 -o json
  skiff observe --verdict audit        # what audit-mode policies would drop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := map[string][]string{"pod": f.pods, "namespace": f.namespaces, "label": f.labels, "verdict": f.verdicts,
				"port": f.ports, "protocol": f.protocols, "service": f.services, "type": f.types}
			filter, err := flows.ParseFilter(q)
			if err != nil {
				return err
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("output %q: want text or json", output)
			}
			if last < 0 {
				return fmt.Errorf("--last %d: want 0 or more", last)
			}
			if follow && !cmd.Flags().Changed("last") {
				last = 0 // -f alone prints from now on, as hubble observe -f
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", observeKubeconfig(kubeconfig))
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if len(nodes) == 0 {
				list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
				if err != nil {
					return err
				}
				for _, n := range list.Items {
					if n.Annotations["kwok.x-k8s.io/node"] == "fake" {
						continue // simulated nodes have no agent
					}
					nodes = append(nodes, n.Name)
				}
			}
			out := cmd.OutOrStdout()
			enc := json.NewEncoder(out)
			print := func(r flows.Response) {
				switch {
				case output == "json":
					_ = enc.Encode(r)
				case r.Flow != nil:
					fmt.Fprintln(out, flows.Line(r.Flow))
				case r.LostEvents != nil:
					fmt.Fprintf(out, "EVENTS LOST: %d flows (%s fell behind)\n", r.LostEvents.Num, r.LostEvents.Source)
				}
			}
			var errs []error
			if follow {
				errs = flows.Follow(ctx, client.CoreV1().RESTClient(), nodes, filter, last, func(node string, r flows.Response) {
					if r.LostEvents != nil {
						r.LostEvents.Source = node + " " + r.LostEvents.Source
					}
					print(r)
				})
			} else {
				var got []flows.Flow
				got, errs = flows.Fetch(ctx, client.CoreV1().RESTClient(), nodes, filter, last)
				for i := range got {
					print(flows.Response{Flow: &got[i]})
				}
			}
			return errors.Join(errs...)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, else the server's admin.kubeconfig when run on it, else ~/.kube/config)")
	fl.StringSliceVar(&nodes, "node", nil, "nodes to read (default: every node with an agent)")
	fl.IntVar(&last, "last", 20, "how many of the newest flows to print (with -f: before following; none unless given)")
	fl.BoolVarP(&follow, "follow", "f", false, "follow new flows as they come")
	fl.StringVarP(&output, "output", "o", "text", "text, or json (one object per line, as the agents serve them)")
	fl.StringSliceVar(&f.pods, "pod", nil, "flows to or from a pod: namespace/name, or a name in any namespace")
	fl.StringSliceVar(&f.namespaces, "namespace", nil, "flows to or from pods of a namespace")
	fl.StringArrayVar(&f.labels, "label", nil, "flows to or from pods a label selector picks (app=web)")
	fl.StringSliceVar(&f.verdicts, "verdict", nil, "forwarded, dropped or audit (an audit-mode policy would have dropped it)")
	fl.StringSliceVar(&f.ports, "port", nil, "flows with this source or destination port (or a Service frontend's)")
	fl.StringSliceVar(&f.protocols, "protocol", nil, "tcp, udp, sctp, icmpv4 or icmpv6")
	fl.StringSliceVar(&f.services, "service", nil, "flows translated from or dropped at a Service: namespace/name")
	fl.StringSliceVar(&f.types, "type", nil, "policy-verdict, translation or drop")
	return cmd
}

// observeKubeconfig is --kubeconfig, else $KUBECONFIG, else the admin kubeconfig of a server
// on this machine, else ~/.kube/config.
func observeKubeconfig(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv("KUBECONFIG"); env != "" {
		return strings.Split(env, string(os.PathListSeparator))[0]
	}
	admin := layout.Server{Dir: layout.ServerDir}.Kubeconfig("admin")
	if _, err := os.Stat(admin); err == nil {
		return admin
	}
	return clientcmd.RecommendedHomeFile
}
