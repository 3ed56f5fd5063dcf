// Package protocol is what skiff-cni and the node agent say to each other over the agent's
// Unix socket: the plugin asks for a pod sandbox's address on ADD and gives it back on DEL.
// The agent owns IPAM; the plugin owns the interfaces.
package protocol

// DefaultSocket is where the agent listens.
const DefaultSocket = "/run/skiff/agent/cni.sock"

// Paths of the agent's CNI endpoints.
const (
	AddPath    = "/v1/cni/add"
	DelPath    = "/v1/cni/del"
	AttachPath = "/v1/cni/attach"
)

// AddRequest asks for a sandbox's address.
type AddRequest struct {
	ContainerID  string `json:"containerID"`
	Netns        string `json:"netns"`
	IfName       string `json:"ifName"`
	PodNamespace string `json:"podNamespace,omitempty"`
	PodName      string `json:"podName,omitempty"`
	PodUID       string `json:"podUID,omitempty"`
}

// AddResponse is the sandbox's addresses and gateways.
type AddResponse struct {
	// IP is the pod's primary address (IPs[0]), kept for plugins older than IPs.
	IP string `json:"ip"`
	// IPs are the pod's addresses, one per block of the node (a dual-stack node has one per
	// family), the primary family's first: a /32 or a /128 each.
	IPs []string `json:"ips,omitempty"`
	// Gateway is the link-local next hop pods route IPv4 through (169.254.1.1).
	Gateway string `json:"gateway"`
	// GatewayIPv6 is the link-local next hop pods route IPv6 through (fe80::1).
	GatewayIPv6 string `json:"gatewayIPv6,omitempty"`
	// MTU of the pod interface; 0 means the kernel default.
	MTU int `json:"mtu,omitempty"`
}

// AttachRequest says a sandbox's veth is up: the agent puts the pod's network policy on its
// host side before the plugin returns, so the pod's first packet meets it.
type AttachRequest struct {
	ContainerID string `json:"containerID"`
	// HostIf is the host side of the pod's veth.
	HostIf string `json:"hostIf"`
}

// DelRequest releases a sandbox's address.
type DelRequest struct {
	ContainerID string `json:"containerID"`
	// HostIf, if known, is the host side of the pod's veth (its policy programs go).
	HostIf string `json:"hostIf,omitempty"`
}

// Error is the body of a non-2xx answer.
type Error struct {
	Message string `json:"message"`
}
