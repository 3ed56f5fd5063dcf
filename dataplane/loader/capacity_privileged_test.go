package loader

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/dataplane/services"
)

// TestPrivilegedFullMaps loads the maps small, programs more Services than fit, and checks
// that what fits is in the maps and works, what does not is named (never a half-written
// frontend), and that loading again with other sizes replaces the pinned maps with maps of
// the new size and on-demand allocation, which the next sync fills.
func TestPrivilegedFullMaps(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root and BPF: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	cgroup := filepath.Join(cgroups.Unified(), fmt.Sprintf("skiff-dp-full-%d", os.Getpid()))
	pinDir := filepath.Join(BPFFS, "skiff", fmt.Sprintf("test-full-%d", os.Getpid()))
	t.Cleanup(func() {
		_ = Remove(pinDir)
		_ = os.Remove(cgroup)
	})
	small := services.MapSizes{Services: 4, Backends: 6, Maglev: services.MaglevSize}
	d, err := Load(pinDir, cgroup, "", nil, small)
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Maps.Capacity(); c != small {
		t.Fatalf("capacity %+v, want %+v", c, small)
	}
	var svcs []services.Service
	for i := 1; i <= 5; i++ {
		svcs = append(svcs, fitSvc(fmt.Sprintf("ns/s%d:80/TCP", i), uint32(i), fmt.Sprintf("10.96.0.%d", i), 80, 2, false))
	}
	p := &services.Programmer{Maps: d.Maps}
	if err := p.Apply(svcs, true); err != nil {
		t.Fatalf("a full map failed the sync: %v", err)
	}
	// 5 Services × 2 backends into 6 slots: the first three (by name) fit.
	if len(p.Status.Dropped) != 2 || !strings.HasPrefix(p.Status.Dropped[0], "ns/s4:80/TCP") {
		t.Fatalf("dropped %v", p.Status.Dropped)
	}
	if msg := p.Status.Full(); !strings.Contains(msg, "skiff_backends (6 entries)") {
		t.Fatalf("Full() = %q", msg)
	}
	entries, err := d.Maps.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Fatalf("%d frontends in the maps, want the 3 that fit: %+v", len(entries), entries)
	}
	for _, e := range entries {
		if len(e.Backends) != 2 {
			t.Fatalf("%s has %d backends, want 2 (a frontend is written whole)", e.Name, len(e.Backends))
		}
	}
	// With something left out, no change is applied alone: what fits is a whole-state choice.
	if ok, err := p.ApplyChanges([]services.ServiceChange{{Key: "ns/s6", New: []services.Service{fitSvc("ns/s6:80/TCP", 6, "10.96.0.6", 80, 0, false)}}}); ok || err != nil {
		t.Fatalf("a change applied alone beside a full map (%v)", err)
	}
	// Deleting one Service makes room: the next delta sync programs one more.
	if err := p.Apply(svcs[1:], false); err != nil {
		t.Fatal(err)
	}
	if len(p.Status.Dropped) != 1 || !strings.HasPrefix(p.Status.Dropped[0], "ns/s5:80/TCP") {
		t.Fatalf("after a deletion, dropped %v", p.Status.Dropped)
	}
	d.Close()

	// The operator raises the sizes: the pinned maps are replaced, empty until the sync.
	d, err = Load(pinDir, cgroup, "", nil, services.MapSizes{Services: 64, Backends: 64, Maglev: services.MaglevSize})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(d.Resized) != 5 || !strings.Contains(strings.Join(d.Resized, ","), "skiff_backends: 6 entries -> 64") ||
		!strings.Contains(strings.Join(d.Resized, ","), "skiff_services6: 4 entries -> 64") {
		t.Fatalf("resized %v, want services and backends of both families, and names", d.Resized)
	}
	info, err := d.Maps.Backends.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.MaxEntries != 64 || info.Flags&unix.BPF_F_NO_PREALLOC == 0 {
		t.Fatalf("backends map: %d entries, flags %#x; want 64, allocated on demand", info.MaxEntries, info.Flags)
	}
	p = &services.Programmer{Maps: d.Maps}
	if err := p.Apply(svcs, true); err != nil {
		t.Fatal(err)
	}
	if entries, _ := d.Maps.Dump(); len(entries) != 5 || len(p.Status.Dropped) != 0 {
		t.Fatalf("after resizing: %d frontends, dropped %v", len(entries), p.Status.Dropped)
	}
	// A change that would overfill a map, or that takes another Service's frontend, is not
	// applied alone (the whole state decides), and writes nothing.
	before := rawMaps(t, d.Maps)
	for what, change := range map[string]services.ServiceChange{
		"55 backends into 54 free slots": {Key: "ns/big", New: []services.Service{fitSvc("ns/big:80/TCP", 50, "10.96.0.50", 80, 55, false)}},
		"another Service's frontend":     {Key: "ns/dup", New: []services.Service{fitSvc("ns/dup:80/TCP", 51, "10.96.0.1", 80, 1, false)}},
		"an old state the maps lack":     {Key: "ns/s1", Old: []services.Service{fitSvc("ns/s1:80/TCP", 1, "10.96.0.1", 80, 3, false)}},
	} {
		if ok, err := p.ApplyChanges([]services.ServiceChange{change}); ok || err != nil {
			t.Errorf("%s: applied alone (%v)", what, err)
		}
		if rawMaps(t, d.Maps) != before {
			t.Fatalf("%s: the maps changed", what)
		}
	}
	if ok, err := p.ApplyChanges([]services.ServiceChange{{Key: "ns/s1", Old: svcs[:1]}}); !ok || err != nil {
		t.Fatalf("deleting a services.Service alone: %v, %v", ok, err)
	}
	if entries, _ := d.Maps.Dump(); len(entries) != 4 {
		t.Fatalf("after deleting one alone: %d frontends", len(entries))
	}
	if err := p.Apply(svcs, true); err != nil {
		t.Fatal(err)
	}
	// Loading again at the same sizes keeps the maps and their entries (an agent restart).
	d.Close()
	d, err = Load(pinDir, cgroup, "", nil, services.MapSizes{Services: 64, Backends: 64, Maglev: services.MaglevSize})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Resized) != 0 {
		t.Fatalf("a restart at the same sizes resized %v", d.Resized)
	}
	if entries, _ := d.Maps.Dump(); len(entries) != 5 {
		t.Fatalf("a restart lost entries: %d frontends", len(entries))
	}
}

// fitSvc is one TCP frontend of the Service named name, with backends backends.
func fitSvc(name string, id uint32, addr string, port uint16, backends int, maglev bool) services.Service {
	s := services.Service{Name: name, ID: id, Maglev: maglev,
		Frontend: services.Frontend{Addr: netip.MustParseAddr(addr), Port: port, Proto: corev1.ProtocolTCP}}
	for i := 0; i < backends; i++ {
		s.Backends = append(s.Backends, services.Backend{Addr: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), Port: 8080})
	}
	return s
}
