package policy

// PortPrefix is a run of ports sharing their top Bits bits: Port/Bits, as an LPM key holds it.
type PortPrefix struct {
	Port uint16
	Bits uint8
}

// PortPrefixes splits the range [from, to] into the fewest aligned prefixes (at most 30 for
// any 16-bit range), so a port range is a handful of LPM entries, not one per port.
func PortPrefixes(from, to uint16) []PortPrefix {
	var out []PortPrefix
	lo, hi := uint32(from), uint32(to)
	for lo <= hi {
		// The largest block starting at lo that is aligned and fits.
		size := uint32(1)
		bits := uint8(16)
		for bits > 0 {
			next := size << 1
			if lo%next != 0 || lo+next-1 > hi {
				break
			}
			size, bits = next, bits-1
		}
		out = append(out, PortPrefix{Port: uint16(lo), Bits: bits})
		lo += size
	}
	return out
}

// Covers reports whether port is in the prefix.
func (p PortPrefix) Covers(port uint16) bool {
	if p.Bits == 0 {
		return true
	}
	shift := 16 - p.Bits
	return port>>shift == p.Port>>shift
}
