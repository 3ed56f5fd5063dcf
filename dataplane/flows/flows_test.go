package flows

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/dataplane/programs"
)

// The Go decoder reads the layout bpf2go generated from the C struct.
func TestDecodeReadsTheProgramsLayout(t *testing.T) {
	raw := programs.SockFlowEvent{TimeNs: 123456789, Cgroup: 77, Policy: 3, PeerId: 256,
		Sport: htons(43210), Dport: htons(80), OrigPort: htons(8080), Family: 4, Proto: 6,
		Kind: KindPolicy, Verdict: VerdictDropped, Reason: ReasonPolicy, Dir: 1, TcpFlags: 0x02}
	raw.Src[0] = addr4("10.244.1.5")
	raw.Dst[0] = addr4("10.244.2.7")
	raw.Orig[0] = addr4("10.96.0.10")
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, raw); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != EventSize {
		t.Fatalf("struct flow_event is %d bytes, EventSize %d", buf.Len(), EventSize)
	}
	e, err := Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := Event{Mono: 123456789, Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.MustParseAddr("10.244.2.7"),
		Orig: netip.MustParseAddr("10.96.0.10"), Cgroup: 77, Policy: 3, PeerID: 256, SrcPort: 43210, DstPort: 80, OrigPt: 8080,
		Proto: 6, Kind: KindPolicy, Verdict: VerdictDropped, Reason: ReasonPolicy, Dir: 1, TCPFlags: 2}
	if e != want {
		t.Fatalf("decoded\n%+v\nwant\n%+v", e, want)
	}

	raw.Family = 6
	a := netip.MustParseAddr("fd00:10:244::5").As16()
	for i := range 4 {
		raw.Src[i] = binary.LittleEndian.Uint32(a[i*4:])
	}
	buf.Reset()
	_ = binary.Write(&buf, binary.LittleEndian, raw)
	e, err = Decode(buf.Bytes())
	if err != nil || e.Src.String() != "fd00:10:244::5" {
		t.Fatalf("IPv6 source decoded as %v (%v)", e.Src, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := make([]byte, EventSize)
	good[78], good[80], good[81] = 4, KindPolicy, VerdictForwarded
	if _, err := Decode(good); err != nil {
		t.Fatalf("a minimal event: %v", err)
	}
	for name, mutate := range map[string]func(b []byte) []byte{
		"short":   func(b []byte) []byte { return b[:40] },
		"family":  func(b []byte) []byte { b[78] = 5; return b },
		"kind":    func(b []byte) []byte { b[80] = 9; return b },
		"verdict": func(b []byte) []byte { b[81] = 0; return b },
	} {
		b := mutate(slices.Clone(good))
		if _, err := Decode(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(make([]byte, EventSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err == nil {
			Describe(e, fakeNames{}, "n", time.Unix(0, 0)) // must not panic on any decoded event
		}
	})
}

type fakeNames struct{}

var pods = map[string]Pod{
	"10.244.1.5": {Namespace: "default", Name: "client", Labels: map[string]string{"app": "client"}},
	"10.244.2.7": {Namespace: "default", Name: "web", Labels: map[string]string{"app": "web", "tier": "front"}},
}

func (fakeNames) PodAt(a netip.Addr) (Pod, bool) { p, ok := pods[a.String()]; return p, ok }
func (fakeNames) PodOfCgroup(id uint64) (Pod, bool) {
	if id == 77 {
		return pods["10.244.1.5"], true
	}
	return Pod{}, false
}
func (fakeNames) Policy(i uint32) string { return []string{"default/allow-web", "default/other"}[i] }
func (fakeNames) Isolating(ep netip.Addr, dir uint8, audit bool) []string {
	if ep.String() != "10.244.2.7" || dir != 1 {
		return nil
	}
	if audit {
		return []string{"default/staged"}
	}
	return []string{"default/deny-all"}
}
func (fakeNames) TierRule(rank uint32) (string, string) {
	if rank == 3 {
		return "guard", "deny-y-80"
	}
	return "", ""
}
func (fakeNames) Service(fe netip.AddrPort, proto uint8) string {
	if fe.String() == "10.96.0.12:80" && proto == 6 {
		return "default/web"
	}
	return ""
}

func ev(kind, verdict, reason, dir uint8) Event {
	return Event{Mono: uint64(time.Second), Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.MustParseAddr("10.244.2.7"),
		SrcPort: 43210, DstPort: 80, Proto: 6, Kind: kind, Verdict: verdict, Reason: reason, Dir: dir, TCPFlags: 0x02, PeerID: 300}
}

func TestDescribe(t *testing.T) {
	boot := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	drop := Describe(ev(KindPolicy, VerdictDropped, ReasonPolicy, 1), fakeNames{}, "node2", boot)
	if drop.Verdict != "DROPPED" || drop.DropReason != "POLICY_DENIED" || drop.Direction != "INGRESS" ||
		!slices.Equal(drop.Policies, []string{"default/deny-all"}) || drop.Source.PodName != "client" || drop.Source.Identity != 300 ||
		drop.Destination.PodName != "web" || !drop.Time.Equal(boot.Add(time.Second)) || !slices.Equal(drop.L4.Flags, []string{"SYN"}) {
		t.Fatalf("drop described as %+v", drop)
	}
	if got, want := Line(&drop), "Dec  7 18:00:01.000 [node2]: default/client:43210 -> default/web:80 policy-verdict:default/deny-all INGRESS DROPPED (TCP Flags: SYN) no rule admits it"; got != want {
		t.Fatalf("line\n%s\nwant\n%s", got, want)
	}
	allowed := ev(KindPolicy, VerdictForwarded, ReasonRule, 1)
	allowed.Policy = 1 // index 0 + 1
	if f := Describe(allowed, fakeNames{}, "node2", boot); !slices.Equal(f.Policies, []string{"default/allow-web"}) || f.DropReason != "" {
		t.Fatalf("admitted flow described as %+v", f)
	}
	audit := Describe(ev(KindPolicy, VerdictAudit, ReasonNotIsolated, 1), fakeNames{}, "node2", boot)
	if audit.Verdict != "AUDIT" || !slices.Equal(audit.Policies, []string{"default/staged"}) {
		t.Fatalf("audit flow described as %+v", audit)
	}
	admin := ev(KindPolicy, VerdictDropped, ReasonAdminDeny, 1)
	admin.Policy = 3<<2 | 2
	if f := Describe(admin, fakeNames{}, "node2", boot); !slices.Equal(f.Policies, []string{"guard"}) || f.DropReason != "POLICY_DENIED" ||
		f.Reason != "an Admin-tier ClusterNetworkPolicy denies it (rule deny-y-80)" {
		t.Fatalf("admin deny described as %+v", f)
	}
	egress := Describe(ev(KindPolicy, VerdictDropped, ReasonPolicy, 2), fakeNames{}, "node1", boot)
	if egress.Direction != "EGRESS" || egress.Destination.Identity != 300 || len(egress.Policies) != 0 {
		t.Fatalf("egress drop described as %+v", egress)
	}
	tr := Event{Kind: KindTranslate, Verdict: VerdictForwarded, Reason: ReasonService, Cgroup: 77, Proto: 6,
		Src: netip.IPv4Unspecified(), Dst: netip.MustParseAddr("10.244.2.7"), DstPort: 8080, Orig: netip.MustParseAddr("10.96.0.12"), OrigPt: 80}
	f := Describe(tr, fakeNames{}, "node1", boot)
	if f.Source.PodName != "client" || f.Destination.PodName != "web" || f.Service.Name != "default/web" || f.Service.Frontend != "10.96.0.12:80" || f.IP.Source != "" {
		t.Fatalf("translation described as %+v", f)
	}
	if got := Line(&f); !strings.Contains(got, "default/client -> default/web:8080 (default/web 10.96.0.12:80) translation FORWARDED (TCP)") {
		t.Fatalf("translation line %q", got)
	}
	nb := Event{Kind: KindDrop, Verdict: VerdictDropped, Reason: ReasonNoBackend, Proto: 17, Src: netip.MustParseAddr("198.18.0.1"),
		Dst: netip.MustParseAddr("198.18.1.2"), SrcPort: 5000, DstPort: 30053, Orig: netip.IPv4Unspecified()}
	if f := Describe(nb, fakeNames{}, "node1", boot); f.DropReason != "SERVICE_BACKEND_NOT_FOUND" || f.Service.Frontend != "198.18.1.2:30053" {
		t.Fatalf("no-backend drop described as %+v", f)
	}
}

func TestFilter(t *testing.T) {
	boot := time.Unix(0, 0)
	drop := Describe(ev(KindPolicy, VerdictDropped, ReasonPolicy, 1), fakeNames{}, "n", boot)
	fwd := Describe(ev(KindPolicy, VerdictForwarded, ReasonNotIsolated, 2), fakeNames{}, "n", boot)
	fwd.L4.DestinationPort, fwd.L4.Protocol = 53, "UDP"
	cases := []struct {
		query     string
		drop, fwd bool
	}{
		{"", true, true},
		{"verdict=dropped", true, false},
		{"verdict=dropped,forwarded", true, true},
		{"verdict=dropped&verdict=forwarded", true, true},
		{"pod=default/web", true, true},
		{"pod=web", true, true},
		{"pod=other/web", false, false},
		{"namespace=default", true, true},
		{"namespace=kube-system", false, false},
		{"label=tier=front", true, true},
		{"label=tier%20in%20(back)", false, false},
		{"port=80", true, false},
		{"port=53", false, true},
		{"port=43210", true, true},
		{"protocol=udp", false, true},
		{"protocol=tcp&verdict=forwarded", false, false},
		{"type=policy-verdict", true, true},
		{"type=translation", false, false},
		{"service=default/web", false, false},
	}
	for _, c := range cases {
		q, _ := url.ParseQuery(c.query)
		f, err := ParseFilter(q)
		if err != nil {
			t.Fatalf("%q: %v", c.query, err)
		}
		if got := f.Match(&drop); got != c.drop {
			t.Errorf("%q matches the drop: %v, want %v", c.query, got, c.drop)
		}
		if got := f.Match(&fwd); got != c.fwd {
			t.Errorf("%q matches the forwarded flow: %v, want %v", c.query, got, c.fwd)
		}
		// The query a filter writes reads back to the same filter.
		again, err := ParseFilter(f.Query())
		if err != nil || again.Match(&drop) != c.drop || again.Match(&fwd) != c.fwd {
			t.Errorf("%q does not survive Query: %v", c.query, err)
		}
	}
	for query, want := range map[string]string{
		"verdict=lost":    `verdict "lost": want forwarded, dropped or audit`,
		"port=0":          `port "0": want a number from 1 to 65535`,
		"port=70000":      `port "70000"`,
		"protocol=gre":    `protocol "gre"`,
		"label=a%20b%20c": `label "a b c"`,
		"colour=red":      `unknown flow filter "colour"`,
		"type=trace":      `type "trace"`,
	} {
		q, _ := url.ParseQuery(query)
		if _, err := ParseFilter(q); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one with %q", query, err, want)
		}
	}
}

func TestStoreKeepsTheNewest(t *testing.T) {
	s := newStore(4)
	for i := range 6 {
		s.add(Flow{Node: string(rune('a' + i)), Verdict: []string{"FORWARDED", "DROPPED"}[i%2]})
	}
	names := func(fs []Flow) string {
		var b strings.Builder
		for _, f := range fs {
			b.WriteString(f.Node)
		}
		return b.String()
	}
	if got := names(s.last(10, Filter{})); got != "cdef" {
		t.Fatalf("kept %q, want cdef (the newest four, oldest first)", got)
	}
	if got := names(s.last(2, Filter{})); got != "ef" {
		t.Fatalf("last 2: %q", got)
	}
	if got := names(s.last(10, Filter{Verdicts: []string{"DROPPED"}})); got != "df" {
		t.Fatalf("last dropped: %q", got)
	}
	fl, cancel := s.follow(Filter{Verdicts: []string{"DROPPED"}}, 1)
	s.add(Flow{Node: "g", Verdict: "FORWARDED"})
	s.add(Flow{Node: "h", Verdict: "DROPPED"})
	s.add(Flow{Node: "i", Verdict: "DROPPED"}) // the follower's buffer of one is full
	if got := (<-fl.ch).Node; got != "h" {
		t.Fatalf("followed %q, want h", got)
	}
	if fl.lost.Load() != 1 || s.followerLost.Load() != 1 {
		t.Fatalf("lost %d (store %d), want 1", fl.lost.Load(), s.followerLost.Load())
	}
	cancel()
	s.add(Flow{Node: "j", Verdict: "DROPPED"})
	select {
	case f := <-fl.ch:
		t.Fatalf("a cancelled follower got %q", f.Node)
	default:
	}
}

func addr4(s string) uint32 {
	b := netip.MustParseAddr(s).As4()
	return binary.LittleEndian.Uint32(b[:])
}

func htons(p uint16) uint16 { return p<<8 | p>>8 }

func BenchmarkIngest(b *testing.B) {
	o := &Observer{Names: fakeNames{}, Node: "n"}
	o.init()
	e := ev(KindPolicy, VerdictForwarded, ReasonRule, 1)
	e.Policy = 1
	boot := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f := Describe(e, o.Names, o.Node, boot)
		o.count(&f)
		o.store.add(f)
	}
}
