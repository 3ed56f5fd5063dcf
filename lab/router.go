package lab

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/internal/layout"
)

// frrConfig makes the ToR an iBGP route reflector for every address on the fabric: nodes
// need no per-node router configuration (dynamic neighbors), a node added later just
// connects, and reflected routes keep the originating node as next hop, so traffic between
// nodes crosses the fabric directly. zebra installs what bgpd learns, so the ToR reaches pods.
// bfdd runs a BFD session with every node (labBFDMultiplier x labBFDInterval, as the nodes'
// bfd setting), so a node that hangs or dies leaves the ToR's table in about a second
// rather than after the hold time.
// A restarting agent closes its BGP connection before its BFD falls silent (see bgp.Run),
// so bgpd is already helping it through graceful restart and keeps its routes.
// (check-control-plane-failure is not set: FRR 8.4 then ignores every BFD loss of a peer
// with graceful restart whose C bit is clear, which is every skiff node.)
// (The BIRD lab runs no BFD: the nodes' sessions to it stay Down, which changes nothing.)
func frrConfig(s Spec) string {
	return fmt.Sprintf(`frr defaults traditional
hostname %[1]s
!
bfd
 profile nodes
  transmit-interval %[5]d
  receive-interval %[5]d
  detect-multiplier %[6]d
 !
!
router bgp %[2]d
 bgp router-id %[3]s
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 bgp graceful-restart
 neighbor nodes peer-group
 neighbor nodes remote-as %[2]d
 neighbor nodes bfd profile nodes
 bgp listen range %[4]s peer-group nodes
%[7]s!
`, s.ToRHost().Netns, ASN, torAddr, s.sessionRange(), labBFDInterval.Milliseconds(), labBFDMultiplier, frrFamilies(s))
}

// sessionRange is where the nodes' BGP sessions to the ToR come from: the IPv4 fabric, or
// the IPv6 one in an IPv6-only lab. (A dual-stack lab's sessions are IPv4: MP-BGP carries
// its IPv6 routes, their next hop the node's IPv6 address.) The router id stays the ToR's
// IPv4 address either way: it is a 32-bit name, not an address it needs.
func (s Spec) sessionRange() netip.Prefix {
	if s.HasIPv4() {
		return fabric
	}
	return fabric6
}

// frrFamilies are the unicast families of the lab on the nodes' sessions.
func frrFamilies(s Spec) string {
	var b strings.Builder
	for _, f := range []struct {
		name string
		on   bool
	}{{"ipv4", s.HasIPv4()}, {"ipv6", s.HasIPv6()}} {
		if !f.on {
			continue
		}
		fmt.Fprintf(&b, ` !
 address-family %s unicast
  maximum-paths ibgp 8
  neighbor nodes activate
  neighbor nodes route-reflector-client
 exit-address-family
`, f.name)
	}
	return b.String()
}

// birdConfig is the same role in BIRD 2: a dynamic iBGP range as route-reflector clients,
// and the learned routes exported to the ToR's kernel table.
// A lab with IPv6 has the IPv6 channel on the sessions (IPv4 ones in a dual-stack lab, IPv6
// ones in an IPv6-only lab) and a kernel protocol for it.
func birdConfig(s Spec, logFile string) string {
	ipv4, ipv6, kernel6 := "", "", ""
	if s.HasIPv4() {
		ipv4 = "\n  ipv4 { import all; export where source = RTS_BGP; next hop keep; };"
	}
	if s.HasIPv6() {
		ipv6 = "\n  ipv6 { import all; export where source = RTS_BGP; next hop keep; };"
		kernel6 = `
protocol kernel {
  ipv6 { import none; export where source = RTS_BGP; };
  merge paths on;
}`
	}
	return fmt.Sprintf(`router id %[1]s;
log "%[4]s" all;
protocol device {}
protocol kernel {
  ipv4 { import none; export where source = RTS_BGP; };
  merge paths on;
}%[6]s
protocol bgp nodes {
  local %[7]s as %[2]d;
  neighbor range %[3]s as %[2]d;
  rr client;
  direct;
  graceful restart on;%[8]s%[5]s
}
`, torAddr, ASN, s.sessionRange(), logFile, ipv6, kernel6, s.ToRHost().Addr(), ipv4)
}

// bgpConfigMap is the cluster's BGP configuration when a ToR runs: nodes peer with it
// only, not with each other, at its address of the sessions' family.
func bgpConfigMap(s Spec) string {
	return strings.TrimSpace(fmt.Sprintf(`
asn: %d
nodeMesh: false
peers:
  - address: %s
    asn: %d
    holdTime: 9s
    keepaliveTime: 3s
bfd:
  transmitInterval: %dms
  multiplier: %d
`, ASN, s.ToRHost().Addr(), ASN, labBFDInterval.Milliseconds(), labBFDMultiplier)) + "\n"
}

// labBFDInterval x labBFDMultiplier (1.2 s) is the lab's BFD detection time, four times
// skiff's default (3 x 100 ms). On the shared 2-core VMs the lab runs on, a capture on the
// fabric showed every node's BFD packets, from real-time threads in separate processes,
// held up together for up to 830 ms while a new node's agent started (the kernel at 85%
// system time; packets between namespaces wait for softirq processing), and 300 ms and
// 600 ms sessions flapped. Dedicated hardware keeps the default.
const (
	labBFDInterval   = 300 * time.Millisecond
	labBFDMultiplier = 4
)

// meshConfigMap is the cluster's BGP configuration without a ToR: the default node mesh,
// with BFD between the nodes.
func meshConfigMap() string {
	return fmt.Sprintf("bfd:\n  transmitInterval: %dms\n  multiplier: %d\n", labBFDInterval.Milliseconds(), labBFDMultiplier)
}

// startRouter starts the ToR's routing daemons in its namespace, every path under dir, and
// returns their PIDs by role.
func startRouter(s Spec, dir string) (map[string]int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tor := s.ToRHost()
	pids := map[string]int{}
	switch s.ToR {
	case ToRFRR:
		// vtysh -N <pathspace> looks for the daemons' sockets in /var/run/frr/<pathspace>.
		run := filepath.Join(layout.FRRRunDir, tor.Netns)
		uid, gid, err := frrOwner()
		if err != nil {
			return nil, err
		}
		for _, d := range []string{run, dir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
		// vtysh -N reads /etc/frr/<pathspace>/vtysh.conf and complains when it is missing.
		if err := os.MkdirAll(frrEtc(s), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(frrEtc(s), "vtysh.conf"), nil, 0o644); err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "frr.conf")
		if err := os.WriteFile(conf, []byte(frrConfig(s)), 0o644); err != nil {
			return nil, err
		}
		for _, d := range []string{"zebra", "bgpd", "bfdd"} {
			pid, err := spawn(tor.Netns, filepath.Join(dir, d+".log"), "/usr/lib/frr/"+d,
				"-N", tor.Netns, "-u", "frr", "-g", "frr", "-P", "0", "-f", "/dev/null", "-i", filepath.Join(run, d+".pid"))
			if err != nil {
				return pids, err
			}
			pids["tor-"+map[string]string{"zebra": "zebra", "bgpd": "bgp", "bfdd": "bfd"}[d]] = pid
			// bgpd needs zebra's socket.
			sock := filepath.Join(run, "zserv.api")
			if d == "zebra" {
				if err := waitFile(sock, 20*time.Second); err != nil {
					return pids, fmt.Errorf("zebra: %w (see %s)", err, filepath.Join(dir, "zebra.log"))
				}
			}
		}
		for _, d := range []string{"bgpd", "bfdd"} {
			if err := waitFile(filepath.Join(run, d+".vty"), 20*time.Second); err != nil {
				return pids, fmt.Errorf("%s: %w (see %s)", d, err, filepath.Join(dir, d+".log"))
			}
		}
		// bfdd at real-time priority, as the nodes run theirs and routers run BFD: on this
		// shared machine an ordinary process waits for a CPU longer than 300 ms at times.
		if err := realtime(pids["tor-bfd"]); err != nil {
			return pids, fmt.Errorf("bfdd at real-time priority: %w", err)
		}
		out, err := exec.Command("nsenter", "--net=/run/netns/"+tor.Netns, "--", "vtysh", "-N", tor.Netns, "-f", conf).CombinedOutput()
		if err != nil {
			return pids, fmt.Errorf("configuring FRR: %v: %s", err, strings.TrimSpace(string(out)))
		}
	case ToRBIRD:
		conf := filepath.Join(dir, "bird.conf")
		if err := os.WriteFile(conf, []byte(birdConfig(s, filepath.Join(dir, "bird.log"))), 0o644); err != nil {
			return nil, err
		}
		sock := filepath.Join(dir, "bird.ctl")
		pid, err := spawn(tor.Netns, filepath.Join(dir, "bird.out"), "bird", "-f", "-c", conf, "-s", sock, "-P", filepath.Join(dir, "bird.pid"))
		if err != nil {
			return nil, err
		}
		pids["tor-bgp"] = pid
		if err := waitFile(sock, 20*time.Second); err != nil {
			return pids, fmt.Errorf("bird: %w (see %s)", err, filepath.Join(dir, "bird.out"))
		}
	}
	return pids, nil
}

// RouterCLI is the command that shows the ToR's BGP table in its own CLI.
func RouterCLI(s Spec) []string {
	tor := s.ToRHost()
	switch s.ToR {
	case ToRFRR:
		cli := []string{"vtysh", "-N", tor.Netns}
		if s.HasIPv4() {
			cli = append(cli, "-c", "show bgp ipv4 unicast")
		}
		if s.HasIPv6() {
			cli = append(cli, "-c", "show bgp ipv6 unicast")
		}
		return cli
	case ToRBIRD:
		return []string{"birdc", "-s", filepath.Join(layout.LabOf(s.Name).Router(), "bird.ctl"), "show", "route"}
	}
	return nil
}

func waitFile(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not appear within %s", path, timeout)
}

// frrEtc is the FRR pathspace's configuration directory (removed by Down).
func frrEtc(s Spec) string { return filepath.Join("/etc/frr", s.ToRHost().Netns) }

// realtime puts every thread of pid in SCHED_FIFO at the priority the nodes' BFD uses.
func realtime(pid int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}, 0); err != nil {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return nil
}
