package bfd

import (
	"strings"
	"testing"
	"time"
)

func TestPacketRoundTrip(t *testing.T) {
	p := Packet{Diag: DiagDetectionExpired, State: Init, Poll: true, DetectMult: 3, MyDiscriminator: 0xdeadbeef,
		YourDiscriminator: 42, DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: 300 * time.Millisecond, RequiredMinEchoRx: 0}
	b := p.Marshal()
	if len(b) != Len || b[0] != 0x21 || b[1] != 0xa0 || b[3] != 24 {
		t.Fatalf("encoding % x", b)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if got != p {
		t.Errorf("round trip\n got %+v\nwant %+v", got, p)
	}
}

// TestParseFromFRR decodes a packet as FRR's bfdd sends it in Down (captured layout).
func TestParseFromFRR(t *testing.T) {
	b := []byte{0x20, 0x40, 0x03, 0x18, 0x3a, 0x1f, 0x9f, 0x1c, 0, 0, 0, 0, 0x00, 0x0f, 0x42, 0x40, 0x00, 0x0f, 0x42, 0x40, 0x00, 0x00, 0xc3, 0x50}
	p, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != Down || p.DetectMult != 3 || p.DesiredMinTx != time.Second || p.RequiredMinRx != time.Second || p.RequiredMinEchoRx != 50*time.Millisecond {
		t.Errorf("parsed %+v", p)
	}
}

func TestParseRejects(t *testing.T) {
	good := Packet{State: Up, DetectMult: 3, MyDiscriminator: 1, YourDiscriminator: 2}.Marshal()
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name, want string
		b          []byte
	}{
		{"short", "shorter than 24", good[:20]},
		{"version", "version 2", mod(func(b []byte) []byte { b[0] = 2 << 5; return b })},
		{"length small", "length field 20", mod(func(b []byte) []byte { b[3] = 20; return b })},
		{"length large", "length field 40", mod(func(b []byte) []byte { b[3] = 40; return b })},
		{"auth", "authentication", mod(func(b []byte) []byte { b[1] |= 0x04; b[3] = 24; return b })},
		{"multipoint", "multipoint", mod(func(b []byte) []byte { b[1] |= 0x01; return b })},
		{"mult 0", "multiplier 0", mod(func(b []byte) []byte { b[2] = 0; return b })},
		{"my disc 0", "my discriminator 0", mod(func(b []byte) []byte { copy(b[4:8], []byte{0, 0, 0, 0}); return b })},
		{"your disc 0 in Up", "your discriminator 0 in state Up", mod(func(b []byte) []byte { copy(b[8:12], []byte{0, 0, 0, 0}); return b })},
		{"poll and final", "poll and final", mod(func(b []byte) []byte { b[1] |= 0x30; return b })},
	} {
		_, err := Parse(tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Packet{State: Up, DetectMult: 3, MyDiscriminator: 1, YourDiscriminator: 2, DesiredMinTx: time.Second}.Marshal())
	f.Add([]byte{0x20, 0x40, 0x03, 0x18, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0x0f, 0x42, 0x40, 0, 0x0f, 0x42, 0x40, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		// What parses re-encodes to a packet that parses the same (at microsecond precision).
		q, err := Parse(p.Marshal())
		if err != nil || q != p {
			t.Fatalf("re-parse of %+v: %+v, %v", p, q, err)
		}
		// And a session takes it without panicking.
		s := NewSession(DefaultConfig, 5)
		s.Receive(p, t0)
		s.Expire(t0.Add(time.Hour))
		_ = s.Packet()
	})
}
