package flows

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Line is a flow as one line of `skiff observe`, in the spirit of `hubble observe`:
//
//	Dec  7 18:40:01.123 [node1]: default/client:43210 -> default/web:80 policy-verdict:default/deny-all INGRESS DROPPED (TCP Flags: SYN) no rule admits it
func Line(f *Flow) string {
	var b strings.Builder
	b.WriteString(f.Time.Format("Jan _2 15:04:05.000"))
	fmt.Fprintf(&b, " [%s]: ", f.Node)
	b.WriteString(end(f.Source, f.IP.Source, f.L4.SourcePort))
	b.WriteString(" -> ")
	b.WriteString(end(f.Destination, f.IP.Destination, f.L4.DestinationPort))
	if f.Service != nil {
		name := f.Service.Name
		if name == "" {
			name = "service"
		}
		fmt.Fprintf(&b, " (%s %s)", name, f.Service.Frontend)
	}
	b.WriteString(" " + f.Type)
	if f.Type == "policy-verdict" {
		pol := "none"
		if len(f.Policies) > 0 {
			pol = strings.Join(f.Policies, ",")
		}
		b.WriteString(":" + pol)
	}
	if f.Direction != "" {
		b.WriteString(" " + f.Direction)
	}
	b.WriteString(" " + f.Verdict)
	b.WriteString(" (" + f.L4.Protocol)
	if len(f.L4.Flags) > 0 {
		b.WriteString(" Flags: " + strings.Join(f.L4.Flags, ", "))
	}
	b.WriteString(") " + f.Reason)
	return b.String()
}

// end is a flow's end: its pod and port, else its address and port.
func end(p *Peer, addr string, port uint16) string {
	s := addr
	if p != nil && p.PodName != "" {
		s = p.Namespace + "/" + p.PodName
	} else if a, err := netip.ParseAddr(addr); err == nil && a.Is6() && port != 0 {
		return netip.AddrPortFrom(a, port).String()
	}
	if s == "" {
		s = "?"
	}
	if port != 0 {
		s += ":" + strconv.Itoa(int(port))
	}
	return s
}
