package lab

import "testing"

func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		ok   bool
	}{
		{Spec{Name: "lab", Nodes: 2, ToR: ToRFRR}, true},
		{Spec{Name: "a1", Nodes: 0, ToR: ToRNone}, true},
		{Spec{Name: "lab", Nodes: 100, ToR: ToRBIRD}, true},
		{Spec{Name: "", Nodes: 2, ToR: ToRFRR}, false},
		{Spec{Name: "Lab", Nodes: 2, ToR: ToRFRR}, false},
		{Spec{Name: "toolongname", Nodes: 2, ToR: ToRFRR}, false},
		{Spec{Name: "1lab", Nodes: 2, ToR: ToRFRR}, false},
		{Spec{Name: "la-b", Nodes: 2, ToR: ToRFRR}, false},
		{Spec{Name: "lab", Nodes: -1, ToR: ToRFRR}, false},
		{Spec{Name: "lab", Nodes: 101, ToR: ToRFRR}, false},
		{Spec{Name: "lab", Nodes: 2, ToR: "quagga"}, false},
	} {
		if err := tc.spec.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: err = %v, want ok=%v", tc.spec, err, tc.ok)
		}
	}
}

func TestAddresses(t *testing.T) {
	s := Spec{Name: "lab", Nodes: 3, ToR: ToRFRR}
	hosts := s.Hosts()
	want := []struct{ netns, node, ip string }{
		{"lab-master", "lab-master", "198.18.0.1"}, {"lab-node1", "lab-node1", "198.18.0.2"},
		{"lab-node2", "lab-node2", "198.18.0.3"}, {"lab-node3", "lab-node3", "198.18.0.4"},
	}
	if len(hosts) != len(want) {
		t.Fatalf("%d hosts", len(hosts))
	}
	for i, w := range want {
		if h := hosts[i]; h.Netns != w.netns || h.NodeName != w.node || h.IP.String() != w.ip {
			t.Errorf("host %d = %+v, want %+v", i, h, w)
		}
	}
	if tor := s.ToRHost(); tor.Netns != "lab-tor" || tor.IP.String() != "198.18.0.254" || tor.NodeName != "" {
		t.Errorf("tor %+v", tor)
	}
	if s.APIServer() != "https://198.18.0.1:6443" || s.HostAPIServer() != "https://198.19.0.2:6443" {
		t.Errorf("API servers %s %s", s.APIServer(), s.HostAPIServer())
	}
	for _, h := range append(hosts, s.ToRHost()) {
		if !fabric.Contains(h.IP) {
			t.Errorf("%s outside the fabric", h.IP)
		}
	}
}
