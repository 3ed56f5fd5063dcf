// Package wellknown holds the names skiff's parts agree on across the API: annotations one
// part writes and another reads. Keeping them here (below both) lets the control plane read
// what an agent publishes without importing the agent.
package wellknown

// DNSAddressAnnotation is where an agent publishes its cluster DNS resolver's address
// (IP:port) on its Node; the control plane's clusterdns controller points the kube-dns
// Service's endpoints at it.
const DNSAddressAnnotation = "dns.skiff.sh/address"
