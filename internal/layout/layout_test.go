package layout

import "testing"

// TestPathsStayPut: these paths are on operators' disks and in the docs; moving one breaks
// an upgrade, so the test pins them.
func TestPathsStayPut(t *testing.T) {
	s, a := DefaultServer, Agent{Dir: AgentDir}
	for got, want := range map[string]string{
		s.PKI().CA().Cert:                "/var/lib/skiff/server/pki/ca.crt",
		s.PKI().CA().Key:                 "/var/lib/skiff/server/pki/ca.key",
		s.PKI().AgentServing().Cert:      "/var/lib/skiff/server/pki/agent.crt",
		s.Kubeconfig("admin"):            "/var/lib/skiff/server/admin.kubeconfig",
		s.Kubeconfig("node"):             "/var/lib/skiff/server/node.kubeconfig",
		s.Token():                        "/var/lib/skiff/server/token",
		s.Etcd():                         "/var/lib/skiff/server/etcd",
		a.Kubeconfig():                   "/var/lib/skiff/agent/node.kubeconfig",
		a.PKI().CA().Cert:                "/var/lib/skiff/agent/pki/ca.crt",
		a.PKI().AgentClient().Key:        "/var/lib/skiff/agent/pki/client.key",
		a.PKI().AgentServing().Key:       "/var/lib/skiff/agent/pki/agent.key",
		a.Containerd():                   "/var/lib/skiff/agent/containerd",
		a.RegistryConfig():               "/var/lib/skiff/agent/containerd/certs.d",
		a.RegistryLogins():               "/var/lib/skiff/agent/config.json",
		a.CNIBin():                       "/var/lib/skiff/agent/cni/bin",
		a.CNIConf():                      "/var/lib/skiff/agent/cni/net.d",
		a.CNISocket():                    "/var/lib/skiff/agent/cni.sock",
		a.IPAM():                         "/var/lib/skiff/agent/ipam.json",
		a.Pods():                         "/var/lib/skiff/agent/pods",
		a.Images():                       "/var/lib/skiff/agent/images",
		a.EmbeddedImages():               "/var/lib/skiff/agent/images-embedded",
		LabRoot:                          "/var/lib/skiff/lab",
		s.EtcdLog():                      "/var/lib/skiff/server/etcd/etcd.log",
		s.Snapshots():                    "/var/lib/skiff/server/db/snapshots",
		s.EncryptionConfig():             "/var/lib/skiff/server/cred/encryption-config.json",
		a.ContainerdSocket():             "/var/lib/skiff/agent/containerd/containerd.sock",
		a.CNIConflist():                  "/var/lib/skiff/agent/cni/net.d/10-skiff.conflist",
		a.CPUManagerCheckpoint():         "/var/lib/skiff/agent/cpu_manager_state",
		PinDir("lab-node1"):              "/sys/fs/bpf/skiff/lab-node1",
		LabOf("lab").Kubeconfig():        "/var/lib/skiff/lab/lab/admin.kubeconfig",
		LabOf("lab").Agent("master").Dir: "/var/lib/skiff/lab/lab/master/agent",
		LabOf("lab").Agent("node1").Dir:  "/var/lib/skiff/lab/lab/node1",
		LabOf("lab").Log("node1"):        "/var/lib/skiff/lab/lab/node1.log",
		LabOf("lab").Master().Token():    "/var/lib/skiff/lab/lab/master/token",
	} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
}
