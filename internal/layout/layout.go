// Package layout names every file and directory skiff keeps, once: the defaults under
// /var/lib/skiff and, for a server or agent data directory, where each thing lives in it.
// Commands bind flags to these defaults; the components ask a Server or Agent for paths
// instead of joining names of their own.
package layout

import "path/filepath"

// Root holds everything skiff keeps on a machine by default.
const Root = "/var/lib/skiff"

// Defaults of the data directories.
var (
	// ServerDir is `skiff server`'s --data-dir, AgentDir `skiff agent`'s.
	ServerDir = filepath.Join(Root, "server")
	AgentDir  = filepath.Join(Root, "agent")
	// LabRoot holds each lab's state (<name>/).
	LabRoot = filepath.Join(Root, "lab")
)

// Server is a server data directory.
type Server struct{ Dir string }

// PKI is the kubeadm-shaped certificate directory (pki.Layout's Dir).
func (s Server) PKI() string { return filepath.Join(s.Dir, "pki") }

// CACert and CAKey are the cluster CA.
func (s Server) CACert() string { return filepath.Join(s.PKI(), "ca.crt") }
func (s Server) CAKey() string  { return filepath.Join(s.PKI(), "ca.key") }

// AgentServingCert and AgentServingKey are the serving pair of the server's own agent.
func (s Server) AgentServingCert() string { return filepath.Join(s.PKI(), "agent.crt") }
func (s Server) AgentServingKey() string  { return filepath.Join(s.PKI(), "agent.key") }

// Kubeconfig is one of the kubeconfigs the server writes: "admin", "scheduler",
// "controller-manager", "node" (its own agent's).
func (s Server) Kubeconfig(name string) string { return filepath.Join(s.Dir, name+".kubeconfig") }

// Token is the node join token (K10<CA hash>::<id>.<secret>).
func (s Server) Token() string { return filepath.Join(s.Dir, "token") }

// Etcd is the embedded etcd's data directory.
func (s Server) Etcd() string { return filepath.Join(s.Dir, "etcd") }

// Agent is an agent data directory.
type Agent struct{ Dir string }

// Containerd is the agent's own containerd's directory (config, state, socket, log).
func (a Agent) Containerd() string { return filepath.Join(a.Dir, "containerd") }

// RegistryConfig is containerd's hosts.toml directory (certs.d).
func (a Agent) RegistryConfig() string { return filepath.Join(a.Containerd(), "certs.d") }

// CNIBin and CNIConf are the plugin and network-config directories containerd reads.
func (a Agent) CNIBin() string  { return filepath.Join(a.Dir, "cni", "bin") }
func (a Agent) CNIConf() string { return filepath.Join(a.Dir, "cni", "net.d") }

// CNISocket is where the agent answers skiff-cni.
func (a Agent) CNISocket() string { return filepath.Join(a.Dir, "cni.sock") }

// IPAM is the pod address allocations file.
func (a Agent) IPAM() string { return filepath.Join(a.Dir, "ipam.json") }

// Pods holds each pod's volumes.
func (a Agent) Pods() string { return filepath.Join(a.Dir, "pods") }

// Images is the directory of image archives imported at start; EmbeddedImages where the
// images built into the binary are written for import.
func (a Agent) Images() string         { return filepath.Join(a.Dir, "images") }
func (a Agent) EmbeddedImages() string { return filepath.Join(a.Dir, "images-embedded") }
