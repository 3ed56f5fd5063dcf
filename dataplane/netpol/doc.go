// Package netpol enforces NetworkPolicy on a node: the Enforcer watches policies, pods and
// namespaces, compiles them (package policy) and writes the result into the maps of the tc
// programs it attaches to each local pod's host-side interface (netpol.go). The same maps
// are read back for `skiff policy trace` and `skiff bpf policy` (netpol_inspect.go).
package netpol
