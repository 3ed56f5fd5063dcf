package services

import (
	"fmt"
	"testing"
)

func names(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("10.244.%d.%d:8080", i/200, i%200+1))
	}
	return out
}

func TestMaglevEven(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, 100} {
		table := Maglev(names(n), MaglevSize)
		counts := map[uint32]int{}
		for _, s := range table {
			if s < 1 || int(s) > n {
				t.Fatalf("n=%d: slot %d out of range", n, s)
			}
			counts[s]++
		}
		min, max := MaglevSize, 0
		for _, c := range counts {
			min, max = minInt(min, c), maxInt(max, c)
		}
		// Maglev's guarantee: every backend owns ceil or floor of M/N entries, give or take one.
		if len(counts) != n || max-min > 1+MaglevSize/n/10 {
			t.Errorf("n=%d: %d backends own entries, spread %d..%d", n, len(counts), min, max)
		}
	}
}

func TestMaglevMinimalDisruption(t *testing.T) {
	before := Maglev(names(10), MaglevSize)
	after := Maglev(append(names(10)[:4:4], names(10)[5:]...), MaglevSize) // backend 5 (slot 5) gone
	moved := 0
	for i := range before {
		// Slots after the removed one shift down by one; compare by name.
		old := names(10)[before[i]-1]
		now := append(names(10)[:4:4], names(10)[5:]...)[after[i]-1]
		if old != now && old != names(10)[4] {
			moved++
		}
	}
	// Only entries of the lost backend must move; Maglev moves few others.
	if moved > MaglevSize/20 {
		t.Errorf("%d of %d entries of surviving backends moved", moved, MaglevSize)
	}
	if fmt.Sprint(Maglev(names(10), MaglevSize)) != fmt.Sprint(before) {
		t.Error("not deterministic")
	}
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}
