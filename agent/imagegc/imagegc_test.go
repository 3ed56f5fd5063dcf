package imagegc

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPolicy(t *testing.T) {
	p := Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: time.Minute}
	for _, c := range []struct {
		capacity, available, want int64
	}{
		{1000, 200, 0},  // 80% used: below the high threshold
		{1000, 151, 0},  // 84.9%
		{1000, 150, 50}, // 85%: down to 80% frees 50
		{1000, 10, 190}, // 99%
		{0, 0, 0},       // no capacity known
		{1000, 1000, 0}, // empty
	} {
		if got := p.ToFree(c.capacity, c.available); got != c.want {
			t.Errorf("ToFree(%d, %d) = %d, want %d", c.capacity, c.available, got, c.want)
		}
	}
	if got := (Policy{HighThresholdPercent: 100, LowThresholdPercent: 80}).ToFree(1000, 0); got != 0 {
		t.Errorf("a high threshold of 100 collects: %d", got)
	}
	for _, bad := range []Policy{{HighThresholdPercent: 101}, {HighThresholdPercent: 50, LowThresholdPercent: 60},
		{HighThresholdPercent: 85, LowThresholdPercent: -1}, {HighThresholdPercent: 85, MinAge: -time.Second}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validates", bad)
		}
	}
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
}

func TestTrackerPlan(t *testing.T) {
	t0 := time.Unix(10000, 0)
	imgs := []Image{
		{ID: "old-unused", Size: 30},
		{ID: "recently-used", Size: 40},
		{ID: "in-use", Size: 100},
		{ID: "pinned", Size: 100, Pinned: true},
		{ID: "never-used", Size: 20},
	}
	var tr Tracker
	tr.Observe(t0, imgs[:4], map[string]bool{"recently-used": true, "in-use": true})
	// A minute on: "recently-used" was used last at t0+30s; "never-used" appears at t0+50s.
	tr.Observe(t0.Add(30*time.Second), imgs[:4], map[string]bool{"recently-used": true, "in-use": true})
	tr.Observe(t0.Add(50*time.Second), imgs, map[string]bool{"in-use": true})
	now := t0.Add(2 * time.Minute)
	inUse := map[string]bool{"in-use": true}
	ids := func(is []Image) string {
		var out []string
		for _, i := range is {
			out = append(out, i.ID)
		}
		return strings.Join(out, ",")
	}
	// Never used and seen long enough first (by first sight), then least recently used.
	got, freed := tr.Plan(now, imgs, inUse, 1<<40, time.Minute)
	if ids(got) != "old-unused,never-used,recently-used" || freed != 90 {
		t.Errorf("everything eligible: %s (%d bytes)", ids(got), freed)
	}
	// Enough is enough: 25 bytes take the first two.
	if got, freed := tr.Plan(now, imgs, inUse, 25, time.Minute); ids(got) != "old-unused" || freed != 30 {
		t.Errorf("25 bytes: %s (%d)", ids(got), freed)
	}
	// The minimum age keeps an image seen 70 s ago.
	if got, _ := tr.Plan(now, imgs, inUse, 1<<40, 90*time.Second); ids(got) != "old-unused,recently-used" {
		t.Errorf("minimum age 90s: %s", ids(got))
	}
	// Gone images are forgotten; a new one is seen anew.
	tr.Observe(now, imgs[:1], nil)
	if !reflect.DeepEqual(len(tr.records), 1) {
		t.Errorf("records after images went: %d", len(tr.records))
	}
	if got, _ := tr.Plan(now, imgs[:1], nil, 1<<40, time.Hour); len(got) != 0 {
		t.Errorf("an image younger than the minimum age was picked: %s", ids(got))
	}
}
