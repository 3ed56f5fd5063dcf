// Package layout names every file and directory skiff keeps, once: the defaults under
// /var/lib/skiff and, for a server or agent data directory, where each thing lives in it
// (the certificates inside pki/ are PKI's). Commands bind flags to these defaults;
// the components ask a Server or Agent for paths instead of joining names of their own.
package layout

import (
	"path/filepath"
	"strings"
)

// Defaults: everything skiff keeps on a machine is under Root.
const (
	Root = "/var/lib/skiff"
	// ServerDir is `skiff server`'s --data-dir, AgentDir `skiff agent`'s.
	ServerDir = Root + "/server"
	AgentDir  = Root + "/agent"
	// LabRoot holds each lab's state (<name>/).
	LabRoot = Root + "/lab"
	// ConfigFile is the long-running commands' configuration file (--config), with
	// ConfigFile + ".d/" beside it (k3s: /etc/rancher/k3s/config.yaml).
	ConfigFile = "/etc/skiff/config.yaml"

	// PodLogDir holds container logs, <ns>_<pod>_<uid>/<container>/<n>.log, as the kubelet's.
	PodLogDir = "/var/log/pods"
	// PodManifestDir holds static pod manifests (k3s: /var/lib/rancher/k3s/agent/pod-manifests).
	PodManifestDir = "/etc/skiff/manifests"
	// ResolvConf is the node's resolver configuration (pods with dnsPolicy Default).
	ResolvConf = "/etc/resolv.conf"

	// BPFFS is the BPF file system; BPFRoot holds every node's pinned programs and maps,
	// one directory per node (PinDir), so several lab nodes share a host.
	BPFFS   = "/sys/fs/bpf"
	BPFRoot = BPFFS + "/skiff"

	// NetnsDir is where named network namespaces are bound (`ip netns`), FRRRunDir where
	// FRR keeps each instance's sockets (the lab's top-of-rack routers).
	NetnsDir  = "/run/netns"
	FRRRunDir = "/var/run/frr"
)

// PinDir is where a node's BPF programs, links and maps are pinned.
func PinDir(node string) string { return filepath.Join(BPFRoot, node) }

// DefaultServer is the server data directory when --data-dir is not given.
var DefaultServer = Server{Dir: ServerDir}

// Server is a server data directory.
type Server struct{ Dir string }

// PKI is the kubeadm-shaped certificate directory.
func (s Server) PKI() PKI { return PKI{Dir: filepath.Join(s.Dir, "pki")} }

// Kubeconfig is one of the kubeconfigs the server writes: "admin", "scheduler",
// "controller-manager", "node" (its own agent's).
func (s Server) Kubeconfig(name string) string { return filepath.Join(s.Dir, name+".kubeconfig") }

// Token is the node join token (K10<CA hash>::<id>.<secret>).
func (s Server) Token() string { return filepath.Join(s.Dir, "token") }

// AgentToken is the agent-only join token of --agent-token (K10<CA hash>::<id>.<secret>):
// it joins agents, never servers.
func (s Server) AgentToken() string { return filepath.Join(s.Dir, "agent-token") }

// Etcd is the embedded etcd's data directory; EtcdLog its log file.
func (s Server) Etcd() string    { return filepath.Join(s.Dir, "etcd") }
func (s Server) EtcdLog() string { return filepath.Join(s.Etcd(), "etcd.log") }

// EtcdPeerURL records the peer URL of a member that has peers (--cluster-init, or joined with
// --server): such a server stays one of a cluster across restarts without those flags.
func (s Server) EtcdPeerURL() string { return filepath.Join(s.Etcd(), "peer-url") }

// Snapshots holds `skiff etcd-snapshot save`'s files (k3s: <data-dir>/db/snapshots).
func (s Server) Snapshots() string { return filepath.Join(s.Dir, "db", "snapshots") }

// EncryptionConfig is where --secrets-encryption keeps its EncryptionConfiguration, as k3s.
func (s Server) EncryptionConfig() string {
	return filepath.Join(s.Dir, "cred", "encryption-config.json")
}

// Shared are the files every server of one cluster holds the same copy of: the three CAs
// (with their cross-signed successors while a rotation is under way), the service-account
// keys and the encryption configuration. A joining server receives them from a running one
// (controlplane/serverjoin); every other credential it issues itself.
func (s Server) Shared() []string {
	p := s.PKI()
	return []string{p.CA().Cert, p.CA().Key, p.CA().CrossSigned(), p.EtcdCA().Cert, p.EtcdCA().Key, p.EtcdCA().CrossSigned(),
		p.FrontProxyCA().Cert, p.FrontProxyCA().Key, p.FrontProxyCA().CrossSigned(), p.SAKey(), p.SAPub(), s.EncryptionConfig()}
}

// Agent is an agent data directory.
type Agent struct{ Dir string }

// PKI holds a joined agent's credentials: the cluster CA, its client and serving pairs.
func (a Agent) PKI() PKI { return PKI{Dir: filepath.Join(a.Dir, "pki")} }

// Kubeconfig is a joined agent's kubeconfig (system:node:<name>).
func (a Agent) Kubeconfig() string { return filepath.Join(a.Dir, "node.kubeconfig") }

// Containerd is the agent's own containerd's directory (config, state, socket, log).
func (a Agent) Containerd() string { return filepath.Join(a.Dir, "containerd") }

// ContainerdSocket is the CRI socket of the agent's own containerd.
func (a Agent) ContainerdSocket() string { return filepath.Join(a.Containerd(), "containerd.sock") }

// RegistryConfig is containerd's hosts.toml directory (certs.d).
func (a Agent) RegistryConfig() string { return filepath.Join(a.Containerd(), "certs.d") }

// RegistryLogins is the node's docker config (config.json format): registry logins every pod
// pulls with after its own image pull secrets, as the kubelet's <root-dir>/config.json.
func (a Agent) RegistryLogins() string { return filepath.Join(a.Dir, "config.json") }

// CNIBin and CNIConf are the plugin and network-config directories containerd reads.
func (a Agent) CNIBin() string  { return filepath.Join(a.Dir, "cni", "bin") }
func (a Agent) CNIConf() string { return filepath.Join(a.Dir, "cni", "net.d") }

// CNIConflist is the network configuration the agent installs in CNIConf.
func (a Agent) CNIConflist() string { return filepath.Join(a.CNIConf(), "10-skiff.conflist") }

// CPUManagerCheckpoint is the static CPU manager's checkpoint (the kubelet's
// <root-dir>/cpu_manager_state).
func (a Agent) CPUManagerCheckpoint() string { return filepath.Join(a.Dir, "cpu_manager_state") }

// CNISocket is where the agent answers skiff-cni.
func (a Agent) CNISocket() string { return filepath.Join(a.Dir, "cni.sock") }

// IPAM is the pod address allocations file.
func (a Agent) IPAM() string { return filepath.Join(a.Dir, "ipam.json") }

// IPAMv6 is the IPv6 block's allocations (a dual-stack or IPv6-only node); IPAM keeps IPv4's,
// where an IPv4-only node has always kept them.
func (a Agent) IPAMv6() string { return filepath.Join(a.Dir, "ipam-ipv6.json") }

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

// Lab is one lab's directory (LabRoot/<name>): its state, the master's server data, each
// node's agent data and log, the router's files.
type Lab struct{ Dir string }

// LabOf is the lab of that name under LabRoot.
func LabOf(name string) Lab { return Lab{Dir: filepath.Join(LabRoot, name)} }

// State is what `lab down` needs even after a crash.
func (l Lab) State() string { return filepath.Join(l.Dir, "state.json") }

// Master is the master's server data directory.
func (l Lab) Master() Server { return Server{Dir: filepath.Join(l.Dir, "master")} }

// Server is a server's data directory: the master's (Master), or that of a worker that runs
// `skiff server` joined to it (`lab up --servers 3`), beside its agent's.
func (l Lab) Server(role string) Server {
	if role == "master" {
		return l.Master()
	}
	return Server{Dir: l.Node(role) + "-server"}
}

// Node is a node's directory; role is "master", "node1", ... A worker's is its agent's data
// directory; the master's is its server's (Master), with its agent's inside (Agent).
func (l Lab) Node(role string) string { return filepath.Join(l.Dir, role) }

// Agent is a node's agent data directory.
func (l Lab) Agent(role string) Agent {
	if role == "master" {
		return Agent{Dir: filepath.Join(l.Master().Dir, "agent")}
	}
	return Agent{Dir: l.Node(role)}
}

// Log is a node's log file.
func (l Lab) Log(role string) string { return filepath.Join(l.Dir, role+".log") }

// Router holds the top-of-rack router's configuration.
func (l Lab) Router() string { return filepath.Join(l.Dir, "tor") }

// Kubeconfig is the admin kubeconfig the host uses to reach the lab.
func (l Lab) Kubeconfig() string { return filepath.Join(l.Dir, "admin.kubeconfig") }

// PodLogs and Manifests are a lab node's --pod-log-dir and --pod-manifest-path.
func (l Lab) PodLogs(role string) string   { return filepath.Join(l.Node(role), "logs") }
func (l Lab) Manifests(role string) string { return filepath.Join(l.Node(role), "manifests") }

// Pair is a certificate and key file pair.
type Pair struct{ Cert, Key string }

// CrossSigned is, for a CA pair, where the new CA of an unfinished rotation is kept signed by
// the CA it replaces (ca-cross.crt beside ca.crt): leaves append it so that peers still
// trusting only the old CA verify them (controlplane/pki RotateCA).
func (p Pair) CrossSigned() string { return strings.TrimSuffix(p.Cert, ".crt") + "-cross.crt" }

// PKI names every file of the kubeadm-shaped certificate directory, relative to Dir.
type PKI struct {
	Dir string
}

func (l PKI) pair(name string) Pair {
	return Pair{Cert: filepath.Join(l.Dir, name+".crt"), Key: filepath.Join(l.Dir, name+".key")}
}

// CA is the cluster CA that signs API server, kubelet and user certificates.
func (l PKI) CA() Pair { return l.pair("ca") }

// CAPin is, on a joined agent, the join token's CA hash its CA bundle was first trusted
// under: the bundle changes when the cluster's CA is rotated, the token the agent restarts
// with does not.
func (l PKI) CAPin() string { return filepath.Join(l.Dir, "ca.pin") }

// AgentServing is a node agent's serving pair (its API on :10250), AgentClient a joined
// agent's client pair (system:node:<name>).
func (l PKI) AgentServing() Pair { return l.pair("agent") }
func (l PKI) AgentClient() Pair  { return l.pair("client") }

// KubeconfigClient is the client pair the server's kubeconfig of that name (scheduler,
// controller-manager, node) refers to, as k3s keeps client-<name>.crt: in files, so the
// clients reading them (client-go) load them again when they are renewed.
func (l PKI) KubeconfigClient(name string) Pair { return l.pair("client-" + name) }

// APIServer is the API server's serving certificate.
func (l PKI) APIServer() Pair { return l.pair("apiserver") }

// APIServerKubeletClient is the API server's client certificate towards node agents.
func (l PKI) APIServerKubeletClient() Pair { return l.pair("apiserver-kubelet-client") }

// APIServerEtcdClient is the API server's client certificate towards etcd.
func (l PKI) APIServerEtcdClient() Pair { return l.pair("apiserver-etcd-client") }

// EtcdCA signs every etcd certificate.
func (l PKI) EtcdCA() Pair { return l.pair("etcd/ca") }

// EtcdServer is etcd's client-facing serving certificate.
func (l PKI) EtcdServer() Pair { return l.pair("etcd/server") }

// EtcdPeer is etcd's peer certificate.
func (l PKI) EtcdPeer() Pair { return l.pair("etcd/peer") }

// EtcdHealthcheckClient is the client certificate that etcdctl and probes use.
func (l PKI) EtcdHealthcheckClient() Pair { return l.pair("etcd/healthcheck-client") }

// FrontProxyCA signs the client certificate the aggregation layer presents to extension
// API servers (kubeadm's front-proxy-ca).
func (l PKI) FrontProxyCA() Pair { return l.pair("front-proxy-ca") }

// FrontProxyClient is that client certificate (CN=front-proxy-client).
func (l PKI) FrontProxyClient() Pair { return l.pair("front-proxy-client") }

// SAKey and SAPub are the service-account token signing key pair.
func (l PKI) SAKey() string { return filepath.Join(l.Dir, "sa.key") }

// SAPub is the public half of SAKey.
func (l PKI) SAPub() string { return filepath.Join(l.Dir, "sa.pub") }
