package loader

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/dataplane/programs"
	"github.com/skiff-sh/skiff/dataplane/services"
)

// Layout 1's connection-tracking values, as the build before layout 2 pinned them: ct_value
// without its packet and byte counters (24 bytes), ct6_value likewise (48).
const (
	ctValueV1Size  = 24
	ct6ValueV1Size = 48
)

// pinLayout1 pins, under pinDir, what a layout-1 build left: its version record and its
// connection-tracking tables holding a forward and a reverse entry (IPv4) and a forward one
// (IPv6), and returns the IPv4 keys.
func pinLayout1(t *testing.T, pinDir string) (fwd, rev programs.NodeportCtKey) {
	t.Helper()
	if err := os.MkdirAll(pinDir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock, err := programs.LoadSock()
	if err != nil {
		t.Fatal(err)
	}
	meta, err := ebpf.NewMapWithOptions(sock.Maps["skiff_meta"].Copy(), ebpf.MapOptions{PinPath: pinDir})
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	if err := meta.Put(uint32(0), uint32(1)); err != nil {
		t.Fatal(err)
	}
	np, err := programs.LoadNodeport()
	if err != nil {
		t.Fatal(err)
	}
	v1 := func(name string, valueSize uint32) *ebpf.Map {
		spec := np.Maps[name].Copy()
		spec.ValueSize, spec.Value = valueSize, nil
		m, err := ebpf.NewMapWithOptions(spec, ebpf.MapOptions{PinPath: pinDir})
		if err != nil {
			t.Fatalf("pinning layout 1's %s: %v", name, err)
		}
		return m
	}
	ct, ct6 := v1("skiff_ct", ctValueV1Size), v1("skiff_ct6", ct6ValueV1Size)
	defer ct.Close()
	defer ct6.Close()
	// A client's flow to node port 30080 sent to backend 10.244.2.5:8080 and SNATed to port
	// 40000, and the reverse entry its replies take.
	fwd = programs.NodeportCtKey{Saddr: programs.Addr4(netip.MustParseAddr("192.0.2.7")), Daddr: programs.Addr4(netip.MustParseAddr("198.18.0.2")),
		Sport: programs.Port(51000), Dport: programs.Port(30080), Proto: 6}
	rev = programs.NodeportCtKey{Saddr: programs.Addr4(netip.MustParseAddr("10.244.2.5")), Daddr: programs.Addr4(netip.MustParseAddr("198.18.0.2")),
		Sport: programs.Port(8080), Dport: programs.Port(40000), Proto: 6}
	value := func(kind uint8, port1, port2 uint16, addr1, addr2 uint32, lastNs uint64) []byte {
		b := make([]byte, ctValueV1Size)
		b[0] = kind
		binary.NativeEndian.PutUint16(b[2:], port1)
		binary.NativeEndian.PutUint16(b[4:], port2)
		binary.NativeEndian.PutUint32(b[8:], addr1)
		binary.NativeEndian.PutUint32(b[12:], addr2)
		binary.NativeEndian.PutUint64(b[16:], lastNs)
		return b
	}
	if err := ct.Put(fwd, value(1, programs.Port(8080), programs.Port(40000), programs.Addr4(netip.MustParseAddr("10.244.2.5")), 0, 111)); err != nil {
		t.Fatal(err)
	}
	if err := ct.Put(rev, value(2, programs.Port(30080), programs.Port(51000), programs.Addr4(netip.MustParseAddr("198.18.0.2")),
		programs.Addr4(netip.MustParseAddr("192.0.2.7")), 222)); err != nil {
		t.Fatal(err)
	}
	var k6 programs.NodeportCt6Key
	k6.Saddr = programs.Addr6(netip.MustParseAddr("2001:db8::7"))
	k6.Sport, k6.Dport, k6.Proto = programs.Port(51000), programs.Port(30080), 6
	v6 := make([]byte, ct6ValueV1Size)
	v6[0] = 1
	binary.NativeEndian.PutUint64(v6[40:], 333)
	if err := ct6.Put(k6, v6); err != nil {
		t.Fatal(err)
	}
	return fwd, rev
}

// TestPrivilegedMigrateKeepsConnectionTracking loads this build over the maps a layout-1
// build pinned: the connection-tracking tables are converted — every entry kept, its
// counters zero — not rebuilt, so NodePort flows outlive the upgrade; the version record
// says 2; and a flow the old programs begin between the conversion and the links' update is
// carried over too.
func TestPrivilegedMigrateKeepsConnectionTracking(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root and BPF: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	cgroup := filepath.Join(cgroups.Unified(), fmt.Sprintf("skiff-dp-migrate-%d", os.Getpid()))
	pinDir := filepath.Join(BPFFS, "skiff", fmt.Sprintf("migrate-%d", os.Getpid()))
	t.Cleanup(func() {
		_ = Remove(pinDir)
		_ = os.Remove(cgroup)
	})
	fwd, rev := pinLayout1(t, pinDir)

	d, err := Load(pinDir, cgroup, "", nil, services.MapSizes{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if v, err := PinnedVersion(pinDir); err != nil || v != programs.MapVersion || programs.MapVersion != 2 {
		t.Fatalf("version after loading: %d (%v), want %d = 2", v, err, programs.MapVersion)
	}
	var got programs.NodeportCtValue
	if err := d.Maps.CT.Lookup(fwd, &got); err != nil {
		t.Fatalf("the forward entry did not survive the migration: %v", err)
	}
	if got.Kind != 1 || programs.FromPort(got.Port1) != 8080 || programs.FromPort(got.Port2) != 40000 ||
		programs.FromAddr4(got.Addr1) != netip.MustParseAddr("10.244.2.5") || got.LastNs != 111 || got.Packets != 0 || got.Bytes != 0 {
		t.Errorf("forward entry after the migration: %+v", got)
	}
	if err := d.Maps.CT.Lookup(rev, &got); err != nil || got.Kind != 2 || programs.FromAddr4(got.Addr2) != netip.MustParseAddr("192.0.2.7") || got.LastNs != 222 {
		t.Errorf("reverse entry after the migration: %+v (%v)", got, err)
	}
	if n, _, err := services.ConntrackCount(d.Maps.CT, d.Maps.CT6); err != nil || n != 3 {
		t.Errorf("%d entries after the migration (%v), want the 3 pinned", n, err)
	}
	// bpftool reads the converted table by its BTF: layout 2's field names, the counters among them.
	if out, err := exec.Command("bpftool", "map", "dump", "pinned", filepath.Join(pinDir, "skiff_ct")).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), `"packets": 0`) || !strings.Contains(string(out), `"last_ns": 111`) {
		t.Errorf("bpftool map dump of the converted skiff_ct: %v\n%s", err, out)
	}
	var v6 programs.NodeportCt6Value
	var k6 programs.NodeportCt6Key
	for it := d.Maps.CT6.Iterate(); it.Next(&k6, &v6); {
		if v6.Kind != 1 || v6.LastNs != 333 {
			t.Errorf("IPv6 entry after the migration: %+v", v6)
		}
	}
	d.Close()

	// The carry-over: a layout-1 table converted, then an entry added to the old one (as the
	// still-attached old programs would), then carried.
	if err := Remove(pinDir); err != nil {
		t.Fatal(err)
	}
	fwd, _ = pinLayout1(t, pinDir)
	sock, _ := programs.LoadSock()
	np, _ := programs.LoadNodeport()
	c, err := migrate(pinDir, programs.MapVersion, sock, np)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if len(c.moves) != 2 {
		t.Fatalf("%d maps converted, want skiff_ct and skiff_ct6", len(c.moves))
	}
	late := fwd
	late.Sport = programs.Port(51001)
	for _, mv := range c.moves {
		if mv.old.ValueSize() == ctValueV1Size {
			if err := mv.old.Put(late, make([]byte, ctValueV1Size)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.again(); err != nil {
		t.Fatal(err)
	}
	pinned, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, "skiff_ct"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	if pinned.ValueSize() != ctValueV1Size+16 {
		t.Errorf("the pinned skiff_ct has values of %d bytes, want layout 2's %d", pinned.ValueSize(), ctValueV1Size+16)
	}
	if err := pinned.Lookup(late, &got); err != nil {
		t.Errorf("an entry added to the old table after the conversion was not carried over: %v", err)
	}
}
