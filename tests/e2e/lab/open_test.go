package lab

import (
	"strings"
	"testing"
)

// openDecoded is tcpdump -vvv's decoding of the graceful restart capability in a node's
// OPEN, as captured on the lab's fabric, with the restart flags and forwarding bit given.
func openDecoded(flags, forwarding string) string {
	return `02:49:43.658 IP 198.18.0.2.55671 > 198.18.0.254.179: Flags [P.], length 82: BGP
	Open Message (1), length: 82
	  Version 4, my AS 64512, Holdtime 9s, ID 198.18.0.2
	    Option Capabilities Advertisement (2), length: 51
	      Multiprotocol Extensions (1), length: 4
		AFI IPv4 (1), SAFI Unicast (1)
	      Graceful Restart (64), length: 6
		Restart Flags: [` + flags + `], Restart Time 120s
		  AFI IPv4 (1), SAFI Unicast (1), Forwarding state preserved: ` + forwarding + `
		0x0000:  8078 0001 0180
`
}

func TestRestartingOpen(t *testing.T) {
	for _, tc := range []struct {
		name, decoded, wantErr string
	}{
		{"restarting, forwarding kept", openDecoded("R", "yes"), ""},
		{"restarting with notification", openDecoded("R, N", "yes"), ""},
		{"a fresh start (what skiff sent before)", openDecoded("none", "no"), "restart flags [none], want R"},
		{"restarting without forwarding", openDecoded("R", "no"), "without the forwarding state preserved"},
		{"nothing captured", "", "no OPEN captured"},
		{"no graceful restart", "\tOpen Message (1), length: 29\n\t  Version 4, my AS 64512\n", "no graceful restart capability"},
		// Only the first OPEN counts: a later one (a reconnect after the restart is over)
		// must not make up for a first one without the bits.
		{"first OPEN decides", openDecoded("none", "no") + openDecoded("R", "yes"), "restart flags [none], want R"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := restartingOpen(tc.decoded)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
