// Package policy compiles NetworkPolicies into the entries of the eBPF policy maps, with no
// I/O: pods, namespaces and policies in, map contents out. It is the decision core of
// issue 15's enforcement and is tested exhaustively; the datapath only looks entries up.
//
// The model, after Cilium's and with its known gaps closed:
//
//   - Every pod has a numeric identity, shared by pods with the same namespace, labels and
//     named ports (so a named port resolves per destination even when two pods carry the
//     same labels but number the port differently — cilium#24779).
//   - Every prefix named by an ipBlock (its cidr or an except) has a CIDR identity; an address
//     has one, its longest matching prefix's. A rule admits the CIDR identities of prefixes
//     inside its cidr and outside its excepts. Pods are looked up twice, by pod identity and
//     by CIDR identity, so an ipBlock covering pod addresses admits them, as upstream says
//     (Cilium does not: cilium#9209, #19601).
//   - A policed pod (an endpoint) has, per direction, whether it is isolated and the set of
//     (peer identity, protocol, port prefix) it admits: endPort ranges become aligned port
//     prefixes (cilium#28684 ignored them); a rule without ports admits every protocol.
//
// Lookup (Decide) is what the datapath does: the peer's pod identity, its CIDR identity and
// "any peer", each with the packet's protocol and port and with "any protocol".
package policy
