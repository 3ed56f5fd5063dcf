package services

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func fitSvc(name string, id uint32, addr string, port uint16, backends int, maglev bool) Service {
	s := Service{Name: name, ID: id, Maglev: maglev,
		Frontend: Frontend{Addr: netip.MustParseAddr(addr), Port: port, Proto: corev1.ProtocolTCP}}
	for i := 0; i < backends; i++ {
		s.Backends = append(s.Backends, Backend{Addr: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), Port: 8080})
	}
	return s
}

func TestFitEverythingFits(t *testing.T) {
	services := []Service{fitSvc("a/x:80/TCP", 1, "10.96.0.1", 80, 3, false), fitSvc("a/x:80/TCP", 1, "192.168.0.1", 30080, 3, false)}
	kept, st := Fit(services, DefaultMapSizes)
	if len(kept) != 2 || len(st.Dropped) != 0 || st.Full() != "" {
		t.Fatalf("kept %d, dropped %v, full %q", len(kept), st.Dropped, st.Full())
	}
	want := map[string]int{"skiff_services": 2, "skiff_svc_names": 1, "skiff_backends": 3, "skiff_maglev": 0}
	for _, f := range st.Fill {
		if f.Entries != want[f.Map] {
			t.Errorf("%s: %d entries, want %d (a ClusterIP and a NodePort of one port share names and slots)", f.Map, f.Entries, want[f.Map])
		}
	}
}

func TestFitLeavesOutWholeFrontendsAndSaysWhich(t *testing.T) {
	services := []Service{
		fitSvc("a/big:80/TCP", 1, "10.96.0.1", 80, 8, false),
		fitSvc("a/small:80/TCP", 2, "10.96.0.2", 80, 2, false),
		fitSvc("b/mag:80/TCP", 3, "10.96.0.3", 80, 1, true),
	}
	kept, st := Fit(services, MapSizes{Services: 10, Backends: 9, Maglev: MaglevSize})
	// In name order: a/big takes 8 slots, a/small's 2 do not fit in the 1 left, b/mag fits.
	if len(kept) != 2 || kept[0].Name != "a/big:80/TCP" || kept[1].Name != "b/mag:80/TCP" {
		t.Fatalf("kept %v", serviceNames(kept))
	}
	if len(st.Dropped) != 1 || st.Dropped[0] != "a/small:80/TCP at 10.96.0.2:80/TCP" {
		t.Fatalf("dropped %v", st.Dropped)
	}
	msg := st.Full()
	if msg == "" || !strings.Contains(msg, "1 frontends not programmed") || !strings.Contains(msg, "a/small:80/TCP") || !strings.Contains(msg, "--bpf-map-backends") {
		t.Fatalf("Full() = %q", msg)
	}
	// The fill reports what the state wanted, beyond capacity: 11 backends of 9.
	for _, f := range st.Fill {
		if f.Map == "skiff_backends" && (f.Entries != 11 || f.Capacity != 9) {
			t.Fatalf("backends fill %+v", f)
		}
	}
	_, st = Fit(services, MapSizes{Services: 10, Backends: 11, Maglev: MaglevSize - 1})
	if len(st.Dropped) != 1 || !strings.HasPrefix(st.Dropped[0], "b/mag") {
		t.Fatalf("a Maglev table that does not fit: dropped %v", st.Dropped)
	}
}

// TestFitProperties checks on random states that what is kept never exceeds a capacity as
// encode counts it, that a frontend is only left out when it would not fit, and that the
// choice does not depend on the order the frontends come in.
func TestFitProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		var services []Service
		for id := uint32(1); id <= uint32(1+r.IntN(30)); id++ {
			backends := r.IntN(12)
			maglev := r.IntN(5) == 0
			for f := 0; f < 1+r.IntN(3); f++ {
				services = append(services, fitSvc(fmt.Sprintf("ns/s%d:80/TCP", id), id, fmt.Sprintf("10.96.%d.%d", id, f), 80, backends, maglev))
			}
		}
		caps := MapSizes{Services: 1 + r.IntN(60), Backends: r.IntN(150), Maglev: MaglevSize * r.IntN(4)}
		kept, st := Fit(services, caps)
		e := encode(kept)
		if len(e.services) > caps.Services || len(e.names) > caps.Services || len(e.backends) > caps.Backends || len(e.maglev) > caps.Maglev {
			t.Fatalf("iteration %d: kept %d services, %d names, %d backends, %d maglev over %+v",
				iter, len(e.services), len(e.names), len(e.backends), len(e.maglev), caps)
		}
		if len(kept)+len(st.Dropped) != len(services) {
			t.Fatalf("iteration %d: %d kept + %d dropped != %d", iter, len(kept), len(st.Dropped), len(services))
		}
		if len(st.Dropped) == 0 && st.Full() != "" {
			t.Fatalf("nothing dropped but Full() = %q", st.Full())
		}
		// Everything fits → nothing is left out.
		if all := encode(services); len(all.services) <= caps.Services && len(all.names) <= caps.Services &&
			len(all.backends) <= caps.Backends && len(all.maglev) <= caps.Maglev && len(st.Dropped) != 0 {
			t.Fatalf("iteration %d: everything fits %+v but %v were left out", iter, caps, st.Dropped)
		}
		shuffled := append([]Service(nil), services...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if _, st2 := Fit(shuffled, caps); strings.Join(st2.Dropped, ",") != strings.Join(st.Dropped, ",") {
			t.Fatalf("iteration %d: the order changed what was left out: %v vs %v", iter, st.Dropped, st2.Dropped)
		}
	}
}

func serviceNames(ss []Service) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}
