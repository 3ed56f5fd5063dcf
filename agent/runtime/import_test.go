package runtime

import (
	"reflect"
	"testing"
)

func TestImportedRefs(t *testing.T) {
	out := []byte("unpacking localhost/skiff/netutil:1 (sha256:" + sixtyFour("a") + ")...done\n" +
		"unpacking docker.io/library/nginx:1.25 (sha256:" + sixtyFour("b") + ")...done\n" +
		"ctr: something else\n")
	want := []string{"localhost/skiff/netutil:1", "docker.io/library/nginx:1.25"}
	if got := ImportedRefs(out); !reflect.DeepEqual(got, want) {
		t.Errorf("ImportedRefs = %v, want %v", got, want)
	}
	if got := ImportedRefs([]byte("unpacking x (sha256:short)...done")); got != nil {
		t.Errorf("a malformed digest gave %v", got)
	}
}

func sixtyFour(c string) string {
	s := ""
	for len(s) < 64 {
		s += c
	}
	return s
}
