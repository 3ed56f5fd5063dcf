// Package cni is skiff-cni, the CNI plugin containerd runs for every pod sandbox (CNI spec
// 1.0: ADD, DEL, CHECK, VERSION). skiff's network is routed, with no bridge: each pod gets a
// veth whose pod end (eth0) carries the pod's /32 from the node's block and a default route
// through the link-local gateway 169.254.1.1, pinned to the host end's MAC; the host end gets
// a /32 route to the pod. Addresses come from the node agent over its Unix socket.
package cni

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/skiff-sh/skiff/cni/protocol"
)

// NetConf is skiff-cni's network configuration.
type NetConf struct {
	types.NetConf
	// AgentSocket is the node agent's Unix socket (default /run/skiff/agent/cni.sock).
	AgentSocket string `json:"agentSocket,omitempty"`
	// MTU of pod interfaces; 0 leaves the kernel default (or what the agent says).
	MTU int `json:"mtu,omitempty"`
}

// K8sArgs are the CNI_ARGS containerd passes for Kubernetes pods.
type K8sArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive // names fixed by containerd
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive
	K8S_POD_UID                types.UnmarshallableString //nolint:revive
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// ParseConfig parses and checks a network configuration, with a precise error for bad input.
func ParseConfig(b []byte) (*NetConf, error) {
	var c NetConf
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("skiff-cni: bad network configuration: %w", err)
	}
	if c.CNIVersion == "" {
		return nil, fmt.Errorf("skiff-cni: network configuration lacks cniVersion")
	}
	if ok, err := version.GreaterThanOrEqualTo(c.CNIVersion, "0.3.0"); err != nil || !ok {
		return nil, fmt.Errorf("skiff-cni: unsupported cniVersion %q (want 0.3.0 or later)", c.CNIVersion)
	}
	if c.Name == "" {
		return nil, fmt.Errorf("skiff-cni: network configuration lacks name")
	}
	if c.AgentSocket == "" {
		c.AgentSocket = protocol.DefaultSocket
	}
	if !filepath.IsAbs(c.AgentSocket) || strings.Contains(c.AgentSocket, "\x00") {
		return nil, fmt.Errorf("skiff-cni: agentSocket %q must be an absolute path", c.AgentSocket)
	}
	if c.MTU < 0 || (c.MTU > 0 && c.MTU < 576) || c.MTU > 65535 {
		return nil, fmt.Errorf("skiff-cni: mtu %d out of range (576-65535, or 0 for the default)", c.MTU)
	}
	return &c, nil
}

// HostVethName is the host end's name for a sandbox: short (kernel limit 15) and stable, so
// DEL finds it without state.
func HostVethName(containerID string) string {
	h := fnv32(containerID)
	return fmt.Sprintf("sk%08x%s", h, sanitize(containerID, 5))
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

func sanitize(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() == n {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}
