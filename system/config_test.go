package system

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/dataplane/services"
)

func TestBGPOptions(t *testing.T) {
	if o, err := (Agent{}).BGPOptions(); o != nil || err != nil {
		t.Errorf("BGP off: %v %v", o, err)
	}
	o, err := Agent{BGP: true, BGPASN: 65001, BGPNodeMesh: "false", BGPPeers: []string{"198.18.0.254:64512"}, BGPAPI: "127.0.0.1:50051"}.BGPOptions()
	if err != nil || *o.Overrides.ASN != 65001 || *o.Overrides.NodeMesh || len(o.Overrides.Peers) != 1 ||
		o.Overrides.Peers[0].Address.String() != "198.18.0.254" || o.Overrides.Peers[0].ASN != 64512 || o.APIAddress != "127.0.0.1:50051" {
		t.Fatalf("overrides: %+v %v", o, err)
	}
	if o, _ := (Agent{BGP: true}).BGPOptions(); o.Overrides.ASN != nil || o.Overrides.NodeMesh != nil || o.Overrides.Peers != nil {
		t.Errorf("no overrides: %+v", o.Overrides)
	}
	for _, bad := range []Agent{
		{BGP: true, BGPNodeMesh: "yes"},
		{BGP: true, BGPPeers: []string{"198.18.0.254"}},
		{BGP: true, BGPPeers: []string{"router:64512"}},
		{BGP: true, BGPPeers: []string{"198.18.0.254:0"}},
		{BGP: true, BGPPeers: []string{"198.18.0.254:4294967296"}},
	} {
		if _, err := bad.BGPOptions(); err == nil || !strings.HasPrefix(err.Error(), "--bgp-") {
			t.Errorf("%+v accepted or unclear: %v", bad, err)
		}
	}
}

func TestAgentOptions(t *testing.T) {
	o, err := Agent{DataDir: "/var/lib/skiff/agent", NodeName: "n1", NodeIP: "192.0.2.7", Port: 10250}.Options(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.InternalIPs, []string{"192.0.2.7"}) || o.APIAddress != ":10250" || o.APIPort != 10250 || o.BGP != nil ||
		len(o.ImageDirs) != 2 || o.ImageDirs[0] != "/var/lib/skiff/agent/images" {
		t.Errorf("options %+v", o)
	}
	if _, err := (Agent{BGP: true, BGPNodeMesh: "maybe"}).Options(nil); err == nil {
		t.Error("a bad BGP flag did not fail the agent's options")
	}
	if _, err := (Agent{BPFMapSizes: services.MapSizes{Backends: -1}}).Options(nil); err == nil || !strings.Contains(err.Error(), "--bpf-map-backends: -1 entries") {
		t.Errorf("a negative map size: %v", err)
	}
	if o, err := (Agent{BPFMapSizes: services.MapSizes{Services: 1000}}).Options(nil); err != nil || o.BPFMapSizes.Services != 1000 {
		t.Errorf("a map size is not passed on: %+v %v", o.BPFMapSizes, err)
	}
	o, err = Agent{EvictionHard: "memory.available<200Mi", EvictionSoft: "memory.available<1Gi", EvictionSoftGracePeriod: "memory.available=1m",
		EvictionMaxPodGracePeriod: 30, ImageGCHighThreshold: 90, ImageGCLowThreshold: 70}.Options(nil)
	if err != nil || len(o.EvictionHard) != 1 || len(o.EvictionSoft) != 1 || !o.EvictionSoft[0].Soft || o.EvictionMaxPodGracePeriod != 30 ||
		o.ImageGC.HighThresholdPercent != 90 || o.ImageGC.LowThresholdPercent != 70 {
		t.Errorf("eviction and image GC options: %+v %v", o, err)
	}
	o, err = Agent{EvictionHard: "memory.available<100Mi", EvictionSoft: "memory.available<1Gi", EvictionSoftGracePeriod: "memory.available=1m",
		EvictionMinimumReclaim: "memory.available=50Mi"}.Options(nil)
	if err != nil || o.EvictionHard[0].MinReclaim.String() != "50Mi" || o.EvictionSoft[0].MinReclaim.String() != "50Mi" || !o.EvictionSoft[0].Soft {
		t.Errorf("minimum reclaim: %+v %+v %v", o.EvictionHard, o.EvictionSoft, err)
	}
	o, err = Agent{KubeReserved: "cpu=100m,memory=256Mi", SystemReserved: "pid=1000", EnforceNodeAllocatable: "pods"}.Options(nil)
	if err != nil || len(o.Reserved) != 2 || !o.EnforceNodeAllocatable || o.Reserved[0].Memory().Value() != 256<<20 ||
		o.Reserved[1].Name("pid", "").Value() != 1000 {
		t.Errorf("reserved options: %+v %v", o.Reserved, err)
	}
	if o, err := (Agent{EnforceNodeAllocatable: "none"}).Options(nil); err != nil || o.EnforceNodeAllocatable {
		t.Errorf("--enforce-node-allocatable none: %v %v", o.EnforceNodeAllocatable, err)
	}
	if o, err := (Agent{CgroupsPerQOS: true, PodMaxPIDs: 1024, CPUCFSQuota: true}).Options(nil); err != nil || o.FlatCgroups || o.PodMaxPIDs != 1024 || o.NoCFSQuota {
		t.Errorf("--cgroups-per-qos --pod-max-pids 1024 --cpu-cfs-quota: %v %v %v %v", o.FlatCgroups, o.PodMaxPIDs, o.NoCFSQuota, err)
	}
	if o, err := (Agent{CPUCFSQuota: false}).Options(nil); err != nil || !o.NoCFSQuota {
		t.Errorf("--cpu-cfs-quota=false: %v %v", o.NoCFSQuota, err)
	}
	o, err = Agent{CPUManagerPolicy: "static", ReservedCPUs: "0,2", KubeReserved: "cpu=100m,memory=256Mi", SystemReserved: "cpu=3"}.Options(nil)
	if err != nil || o.CPUManagerPolicy != "static" || o.ReservedCPUs.String() != "0,2" {
		t.Errorf("--cpu-manager-policy static --reserved-cpus 0,2: %q %s %v", o.CPUManagerPolicy, o.ReservedCPUs, err)
	} else if _, kube := o.Reserved[0]["cpu"]; kube || o.Reserved[1].Cpu().MilliValue() != 2000 || o.Reserved[0].Memory().Value() != 256<<20 {
		// The list stands for the reserved cpu: two CPUs, none of --kube-reserved's 100m.
		t.Errorf("--reserved-cpus 0,2 in the reservations: %+v", o.Reserved)
	}
	if o, err := (Agent{}).Options(nil); err != nil || o.CPUManagerPolicy != "none" || !o.ReservedCPUs.IsEmpty() {
		t.Errorf("default CPU manager policy: %q %s %v", o.CPUManagerPolicy, o.ReservedCPUs, err)
	}
	if o, err := (Agent{PodMaxPIDs: -1}).Options(nil); err != nil || !o.FlatCgroups {
		t.Errorf("--cgroups-per-qos=false: %v %v", o.FlatCgroups, err)
	}
	for _, bad := range []Agent{{PodMaxPIDs: -2}, {EvictionHard: "memory.available>1"}, {EvictionSoft: "memory.available<1Gi"},
		{EvictionMaxPodGracePeriod: -1}, {ImageGCHighThreshold: 50, ImageGCLowThreshold: 60},
		{EvictionMinimumReclaim: "pid.available=100"}, {EvictionMinimumReclaim: "memory.available"},
		{KubeReserved: "memory=lots"}, {SystemReserved: "gpu=1"}, {EnforceNodeAllocatable: "system-reserved"}, {EnforceNodeAllocatable: "all"},
		{CPUManagerPolicy: "dynamic"}, {ReservedCPUs: "0-"}, {ReservedCPUs: "two"}, {CPUManagerReconcilePeriod: -time.Second},
		{NodeIP: "10.1.2.3,10.1.2.4"}, {NodeIP: "10.1.2.3,fd00::1,fd00::2"}, {NodeIP: "node1"}, {NodeIP: "fe80::1%eth0"}, {NodeIP: "0.0.0.0"}} {
		if _, err := bad.Options(nil); err == nil || !strings.HasPrefix(err.Error(), "--") {
			t.Errorf("%+v accepted or unclear: %v", bad, err)
		}
	}
	if ip := net.ParseIP(NodeAddress("")); ip == nil {
		t.Errorf("NodeAddress(\"\") = %q", NodeAddress(""))
	}
	if NodeAddress("10.1.2.3") != "10.1.2.3" {
		t.Error("the address asked for is not used")
	}
	// Dual-stack: one address per family, the first the primary (either family first).
	for asked, want := range map[string][]string{
		"198.18.0.2,2001:2::2":  {"198.18.0.2", "2001:2::2"},
		"2001:2::2, 198.18.0.2": {"2001:2::2", "198.18.0.2"},
		"2001:2::2":             {"2001:2::2"},
	} {
		got, err := NodeAddresses(asked)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("NodeAddresses(%q) = %q, %v; want %q", asked, got, err, want)
		}
	}
	o, err = Agent{NodeIP: "198.18.0.2,2001:2::2"}.Options(nil)
	if err != nil || !slices.Equal(o.InternalIPs, []string{"198.18.0.2", "2001:2::2"}) {
		t.Errorf("a dual-stack --node-ip: InternalIPs %q, %v", o.InternalIPs, err)
	}
}

func TestLogPolicy(t *testing.T) {
	p, err := Agent{}.LogPolicy()
	if err != nil || p.MaxSize != 10<<20 || p.MaxFiles != 5 {
		t.Errorf("defaults: %+v %v", p, err)
	}
	p, err = Agent{ContainerLogMaxSize: "1Mi", ContainerLogMaxFiles: 2}.LogPolicy()
	if err != nil || p.MaxSize != 1<<20 || p.MaxFiles != 2 {
		t.Errorf("1Mi x 2: %+v %v", p, err)
	}
	for _, bad := range []Agent{{ContainerLogMaxSize: "ten megs"}, {ContainerLogMaxSize: "0"}, {ContainerLogMaxFiles: 1}, {ContainerLogMaxFiles: -3}} {
		if _, err := bad.LogPolicy(); err == nil || !strings.HasPrefix(err.Error(), "--container-log-max-") {
			t.Errorf("%+v accepted or unclear: %v", bad, err)
		}
	}
}

func TestServerOptions(t *testing.T) {
	s := DefaultServer()
	s.DataDir, s.AdvertiseAddress, s.TLSSANs, s.Agent.NodeName, s.Agent.NodeIP = "/d", "192.0.2.9", []string{"10.0.0.5", "api.example"}, "m", "192.0.2.1"
	b, o, err := s.Plan(true)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.APIServerIPs) != 2 || b.APIServerIPs[0].String() != "192.0.2.9" || b.APIServerIPs[1].String() != "10.0.0.5" ||
		len(b.APIServerNames) != 1 || o.NodeName != "m" || b.NodeName != "m" || len(b.NodeIPs) != 1 || b.NodeIPs[0].String() != "192.0.2.1" ||
		b.ServiceIP.String() != "10.96.0.1" || b.APIServerURL != "https://127.0.0.1:6443" || !b.EmbeddedEtcd || b.Dirs.Dir != "/d" {
		t.Errorf("bootstrap %+v, options %+v", b, o)
	}
	if b, o, _ := s.Plan(false); o.NodeName != "" || b.NodeName != "" || b.NodeIPs != nil {
		t.Errorf("without the agent: %+v %+v", b, o)
	}
	s.BindAddress, s.SecurePort, s.EtcdServers, s.SecretsEncryption = "192.0.2.9", 7443, []string{"https://etcd:2379"}, true
	if b, _, _ := s.Plan(false); b.APIServerURL != "https://192.0.2.9:7443" || b.EmbeddedEtcd || !b.SecretsEncryption {
		t.Errorf("bound to one address, external etcd: %+v", b)
	}
	s.EncryptionProviderConfig = "/etc/enc.yaml"
	if b, o, _ := s.Plan(false); b.SecretsEncryption || o.EncryptionProviderConfig != "/etc/enc.yaml" {
		t.Errorf("the operator's own encryption configuration: %+v %+v", b, o)
	}
	if _, _, err := (Server{BindAddress: "everywhere"}).Plan(false); err == nil || !strings.Contains(err.Error(), "--bind-address") {
		t.Errorf("bad bind address: %v", err)
	}
	// IPv6-first or IPv6-only: the advertised address is IPv6, by default this machine's.
	v6 := DefaultServer()
	v6.ServiceCIDR = "fd00:10:96::/108,10.96.0.0/12"
	if b, o, err := v6.Plan(false); err != nil || o.AdvertiseAddress.To4() != nil || b.ServiceIP.String() != "fd00:10:96::1" {
		t.Errorf("IPv6-first: advertising %v, kubernetes Service %v, %v", o.AdvertiseAddress, b.ServiceIP, err)
	}
	v6.AdvertiseAddress = "192.0.2.9"
	if _, _, err := v6.Plan(false); err == nil || err.Error() != "--advertise-address 192.0.2.9 and the first --service-cidr fd00:10:96::/108 are of different IP families: the kubernetes Service takes the first range's family, and its endpoint is the advertised address" {
		t.Errorf("an IPv4 address advertised for an IPv6-first cluster: %v", err)
	}
	opts, err := Server{DataDir: "/d", Agent: Agent{NodeName: "m"}}.serverAgent()
	// The role label is the API server's to set (NodeRestriction refuses it from the node).
	_, role := opts.Labels["node-role.kubernetes.io/control-plane"]
	if err != nil || len(opts.Taints) != 1 || opts.Taints[0] != ControlPlaneTaint || role ||
		opts.ServingCert != "/d/pki/agent.crt" {
		t.Errorf("server agent %+v %v", opts, err)
	}
}

// TestClusterDNSAddress: the cluster DNS Service's address follows the primary Service range
// when the flag is left at its default, and is the flag's otherwise.
func TestClusterDNSAddress(t *testing.T) {
	for _, tc := range []struct{ serviceCIDR, flag, want string }{
		{DefaultServiceCIDR, DefaultClusterDNS, "10.96.0.10"},
		{"10.96.0.0/12,fd00:10:96::/108", DefaultClusterDNS, "10.96.0.10"},
		{"fd00:10:96::/108", DefaultClusterDNS, "fd00:10:96::a"},
		{"fd00:10:96::/108,10.96.0.0/12", DefaultClusterDNS, "fd00:10:96::a"},
		{"172.20.0.0/16", DefaultClusterDNS, "172.20.0.10"},
		{"fd00:10:96::/108", "fd00:10:96::35", "fd00:10:96::35"},
		{"fd00:10:96::/108", "", ""},
	} {
		s := DefaultServer()
		s.ServiceCIDR, s.ControllerManager.ClusterDNS = tc.serviceCIDR, tc.flag
		if got := s.clusterDNS(); got != tc.want {
			t.Errorf("--service-cidr %s --cluster-dns-address %q: %q, want %q", tc.serviceCIDR, tc.flag, got, tc.want)
		}
	}
}
