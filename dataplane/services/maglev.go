package services

import (
	"hash/fnv"
)

// MaglevSize is the entries of every Maglev table (SKIFF_MAGLEV_SIZE, a prime).
const MaglevSize = 1021

// AnnotationLBAlgorithm selects a Service's backend selection: "random" (the default) or
// "maglev" (consistent hashing: the same flow reaches the same backend from every node, and
// losing a backend moves only its own flows).
const AnnotationLBAlgorithm = "service.skiff.sh/lb-algorithm"

// Maglev builds the lookup table of Eisenbud et al. (NSDI 2016) for backends named by their
// address: entry i holds the 1-based slot of the backend that owns it. Names, not slots, seed
// the permutations, so every node builds the same table from the same endpoints.
func Maglev(names []string, size int) []uint32 {
	table := make([]uint32, size)
	if len(names) == 0 {
		return table
	}
	offset := make([]uint64, len(names))
	skip := make([]uint64, len(names))
	for i, n := range names {
		offset[i] = hashString(n, 0xbeef) % uint64(size)
		skip[i] = hashString(n, 0xcafe)%uint64(size-1) + 1
	}
	next := make([]uint64, len(names))
	filled := 0
	for filled < size {
		for i := range names {
			c := (offset[i] + next[i]*skip[i]) % uint64(size)
			for table[c] != 0 {
				next[i]++
				c = (offset[i] + next[i]*skip[i]) % uint64(size)
			}
			table[c] = uint32(i + 1)
			next[i]++
			filled++
			if filled == size {
				break
			}
		}
	}
	return table
}

func hashString(s string, seed uint64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}
