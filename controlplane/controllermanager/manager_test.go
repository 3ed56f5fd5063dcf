package controllermanager

import (
	"fmt"
	"strings"
	"testing"
)

func TestNodeIPAMPools(t *testing.T) {
	for _, c := range []struct {
		cidr               string
		size, size4, size6 int
		want, err          string
	}{
		{cidr: "10.244.0.0/16", size4: 24, size6: 64, want: "[{10.244.0.0/16 24}]"},
		{cidr: "10.244.0.0/16", size: 26, size4: 24, size6: 64, want: "[{10.244.0.0/16 26}]"},
		{cidr: "fd00:10:244::/56", size4: 24, size6: 64, want: "[{fd00:10:244::/56 64}]"},
		{cidr: "10.244.0.0/16,fd00:10:244::/56", size4: 25, size6: 80, want: "[{10.244.0.0/16 25} {fd00:10:244::/56 80}]"},
		{cidr: "10.244.0.0/16,fd00:10:244::/56", size: 24, size4: 24, size6: 64, err: "not allowed with dual-stack clusters"},
		{cidr: "10.244.0.0/16,junk", size4: 24, size6: 64, err: "--cluster-cidr"},
	} {
		pools, err := NodeIPAMPools(c.cidr, c.size, c.size4, c.size6)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.cidr, err, c.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(pools) != c.want {
			t.Errorf("%s: %v %v, want %s", c.cidr, pools, err, c.want)
		}
	}
}
