// Package layout names every file and directory skiff keeps, once: the defaults under
// /var/lib/skiff and, for a server or agent data directory, where each thing lives in it
// (the certificates inside pki/ are pki.Layout's). Commands bind flags to these defaults;
// the components ask a Server or Agent for paths instead of joining names of their own.
package layout

import (
	"path/filepath"

	"github.com/skiff-sh/skiff/controlplane/pki"
)

// Defaults: everything skiff keeps on a machine is under Root.
const (
	Root = "/var/lib/skiff"
	// ServerDir is `skiff server`'s --data-dir, AgentDir `skiff agent`'s.
	ServerDir = Root + "/server"
	AgentDir  = Root + "/agent"
	// LabRoot holds each lab's state (<name>/).
	LabRoot = Root + "/lab"
)

// DefaultServer is the server data directory when --data-dir is not given.
var DefaultServer = Server{Dir: ServerDir}

// Server is a server data directory.
type Server struct{ Dir string }

// PKI is the kubeadm-shaped certificate directory.
func (s Server) PKI() pki.Layout { return pki.Layout{Dir: filepath.Join(s.Dir, "pki")} }

// Kubeconfig is one of the kubeconfigs the server writes: "admin", "scheduler",
// "controller-manager", "node" (its own agent's).
func (s Server) Kubeconfig(name string) string { return filepath.Join(s.Dir, name+".kubeconfig") }

// Token is the node join token (K10<CA hash>::<id>.<secret>).
func (s Server) Token() string { return filepath.Join(s.Dir, "token") }

// Etcd is the embedded etcd's data directory.
func (s Server) Etcd() string { return filepath.Join(s.Dir, "etcd") }

// Agent is an agent data directory.
type Agent struct{ Dir string }

// PKI holds a joined agent's credentials: the cluster CA, its client and serving pairs.
func (a Agent) PKI() pki.Layout { return pki.Layout{Dir: filepath.Join(a.Dir, "pki")} }

// Kubeconfig is a joined agent's kubeconfig (system:node:<name>).
func (a Agent) Kubeconfig() string { return filepath.Join(a.Dir, "node.kubeconfig") }

// Containerd is the agent's own containerd's directory (config, state, socket, log).
func (a Agent) Containerd() string { return filepath.Join(a.Dir, "containerd") }

// RegistryConfig is containerd's hosts.toml directory (certs.d).
func (a Agent) RegistryConfig() string { return filepath.Join(a.Containerd(), "certs.d") }

// RegistryLogins is the node's docker config (config.json format): registry logins every pod
// pulls with after its own image pull secrets, as the kubelet's <root-dir>/config.json.
func (a Agent) RegistryLogins() string { return filepath.Join(a.Dir, "config.json") }

// CNIBin and CNIConf are the plugin and network-config directories containerd reads.
func (a Agent) CNIBin() string  { return filepath.Join(a.Dir, "cni", "bin") }
func (a Agent) CNIConf() string { return filepath.Join(a.Dir, "cni", "net.d") }

// CNISocket is where the agent answers skiff-cni.
func (a Agent) CNISocket() string { return filepath.Join(a.Dir, "cni.sock") }

// IPAM is the pod address allocations file.
func (a Agent) IPAM() string { return filepath.Join(a.Dir, "ipam.json") }

// BFDSessions is where the BFD sessions are kept across the agent's restarts.
func (a Agent) BFDSessions() string { return filepath.Join(a.Dir, "bfd-sessions.json") }

// Pods holds each pod's volumes.
func (a Agent) Pods() string { return filepath.Join(a.Dir, "pods") }

// PodResourcesSocket serves the pod resources API (the kubelet's
// /var/lib/kubelet/pod-resources/kubelet.sock).
func (a Agent) PodResourcesSocket() string {
	return filepath.Join(a.Dir, "pod-resources", "kubelet.sock")
}

// Storage holds the local-path volumes provisioned on this node, one directory each.
func (a Agent) Storage() string { return filepath.Join(a.Dir, "storage") }

// Images is the directory of image archives imported at start; EmbeddedImages where the
// images built into the binary are written for import.
func (a Agent) Images() string         { return filepath.Join(a.Dir, "images") }
func (a Agent) EmbeddedImages() string { return filepath.Join(a.Dir, "images-embedded") }
