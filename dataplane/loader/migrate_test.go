package loader

import (
	"testing"

	"github.com/skiff-sh/skiff/dataplane/programs"
)

// TestMapVersionMatchesTheObjects: the Go constant the loader records and migrates to is the
// layout the compiled programs were built with (SKIFF_MAP_VERSION), and every layout after
// the first lists its conversions.
func TestMapVersionMatchesTheObjects(t *testing.T) {
	spec, err := programs.LoadSock()
	if err != nil {
		t.Fatal(err)
	}
	var v uint32
	if err := spec.Variables["skiff_map_version"].Get(&v); err != nil {
		t.Fatal(err)
	}
	if v != programs.MapVersion {
		t.Fatalf("the objects are built for layout %d, programs.MapVersion is %d: change both", v, programs.MapVersion)
	}
	for ver := uint32(2); ver <= programs.MapVersion; ver++ {
		if _, ok := conversions[ver]; !ok {
			t.Errorf("layout %d lists no conversions: an upgrade to it would rebuild every map", ver)
		}
	}
}

func TestAppendZeroes(t *testing.T) {
	k, v := appendZeroes([]byte{1, 2}, []byte{3, 4, 5}, 2, 6)
	if string(k) != "\x01\x02" || string(v) != "\x03\x04\x05\x00\x00\x00" {
		t.Errorf("appendZeroes = %v, %v", k, v)
	}
}
