// Package imagegc removes images no container uses, as the kubelet's image garbage collector
// does: every Period it looks at the image file system, and when more of it than the high
// threshold (85%) is used it removes unused images, least recently used first, until the use
// is down to the low threshold (80%). Images seen for less than MinAge (2 minutes) stay, so an
// image pulled for a pod about to start is not taken from under it; pinned images (the sandbox
// image, the ones the agent imported from archives: a node that reaches no registry could not
// get them back) are never removed. Under disk pressure the eviction manager asks it to remove
// every unused image before it evicts a pod.
//
// The Tracker and Policy are the decision core (no I/O); the Manager reads the runtime's
// images and containers through CRI and removes what the core picks.
package imagegc

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Upstream's defaults.
const (
	DefaultHighThresholdPercent = 85
	DefaultLowThresholdPercent  = 80
	DefaultMinAge               = 2 * time.Minute
	DefaultPeriod               = 5 * time.Minute
)

// Policy is when images are collected and how far.
type Policy struct {
	// HighThresholdPercent of the image file system used starts a collection (100 turns
	// collection off); it frees down to LowThresholdPercent.
	HighThresholdPercent, LowThresholdPercent int
	// MinAge is how long an image must have been seen before it may be removed.
	MinAge time.Duration
}

// Validate says what is wrong with p, as the kubelet's configuration validation does.
func (p Policy) Validate() error {
	switch {
	case p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100:
		return fmt.Errorf("image GC high threshold %d%%: must be between 0 and 100", p.HighThresholdPercent)
	case p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100:
		return fmt.Errorf("image GC low threshold %d%%: must be between 0 and 100", p.LowThresholdPercent)
	case p.LowThresholdPercent > p.HighThresholdPercent:
		return fmt.Errorf("image GC low threshold %d%% is above the high threshold %d%%", p.LowThresholdPercent, p.HighThresholdPercent)
	case p.MinAge < 0:
		return fmt.Errorf("minimum image TTL %s: must not be negative", p.MinAge)
	}
	return nil
}

// ToFree is how many bytes the policy wants freed on a file system of capacity bytes with
// available bytes left: none below the high threshold (or with collection off), else enough
// to bring the use down to the low threshold.
func (p Policy) ToFree(capacity, available int64) int64 {
	if capacity <= 0 || p.HighThresholdPercent >= 100 {
		return 0
	}
	used := capacity - available
	if used*100 < int64(p.HighThresholdPercent)*capacity {
		return 0
	}
	return used - capacity*int64(p.LowThresholdPercent)/100
}

// Image is an image in the runtime's store.
type Image struct {
	ID     string
	Size   int64
	Tags   []string
	Pinned bool
}

type record struct{ firstDetected, lastUsed time.Time }

// Tracker remembers when each image was first seen and last used by a container, as the
// kubelet's image manager does, in memory: after an agent restart every image is seen anew
// (and so waits MinAge again).
type Tracker struct {
	records map[string]*record
}

// Observe records the images present at now and which of them containers use, and forgets
// the images that are gone.
func (t *Tracker) Observe(now time.Time, images []Image, inUse map[string]bool) {
	if t.records == nil {
		t.records = map[string]*record{}
	}
	present := map[string]bool{}
	for _, img := range images {
		present[img.ID] = true
		r := t.records[img.ID]
		if r == nil {
			r = &record{firstDetected: now}
			t.records[img.ID] = r
		}
		if inUse[img.ID] {
			r.lastUsed = now
		}
	}
	for id := range t.records {
		if !present[id] {
			delete(t.records, id)
		}
	}
}

// Plan picks images to remove to free want bytes: not used, not pinned, first seen at least
// minAge before now; least recently used first, then the first seen. It returns them and the
// bytes they free, which may be less than want when too few qualify. Call Observe first.
func (t *Tracker) Plan(now time.Time, images []Image, inUse map[string]bool, want int64, minAge time.Duration) ([]Image, int64) {
	var cand []Image
	for _, img := range images {
		r := t.records[img.ID]
		if inUse[img.ID] || img.Pinned || r == nil || now.Sub(r.firstDetected) < minAge {
			continue
		}
		cand = append(cand, img)
	}
	sort.SliceStable(cand, func(i, j int) bool {
		a, b := t.records[cand[i].ID], t.records[cand[j].ID]
		if !a.lastUsed.Equal(b.lastUsed) {
			return a.lastUsed.Before(b.lastUsed)
		}
		if !a.firstDetected.Equal(b.firstDetected) {
			return a.firstDetected.Before(b.firstDetected)
		}
		return cand[i].ID < cand[j].ID
	})
	var out []Image
	var freed int64
	for _, img := range cand {
		if freed >= want {
			break
		}
		out = append(out, img)
		freed += img.Size
	}
	return out, freed
}

// Manager collects the images of one runtime.
type Manager struct {
	Images  runtimeapi.ImageServiceClient
	Runtime runtimeapi.RuntimeServiceClient
	Policy  Policy
	// Period between looks (DefaultPeriod when zero).
	Period time.Duration
	// Pinned says whether an image must never be removed, besides those CRI reports pinned.
	Pinned func(Image) bool
	// AlsoInUse, if set, lists image references in use besides the containers' (the images
	// of image volumes the node's pods mount).
	AlsoInUse func() []string
	// Failed, if set, is told when a collection could not free what the policy asked (the
	// kubelet's FreeDiskSpaceFailed event on its node).
	Failed func(msg string)
	Log    *slog.Logger

	mu      sync.Mutex
	tracker Tracker
}

// observeEvery is how often images and the containers using them are looked at between
// collections, so first-seen and last-used times are known to within it.
const observeEvery = 30 * time.Second

// Run looks at the images every 30 s and collects every Period until ctx ends; a failed
// collection is logged and reported.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.Policy.Validate(); err != nil {
		return err
	}
	period := m.Period
	if period == 0 {
		period = DefaultPeriod
	}
	t := time.NewTicker(min(observeEvery, period))
	defer t.Stop()
	// The first look only records what is there: nothing is old enough to remove yet.
	last := time.Now()
	for {
		if time.Since(last) >= period {
			last = time.Now()
			if err := m.GarbageCollect(ctx); err != nil && ctx.Err() == nil {
				m.Log.Warn("image garbage collection", "err", err)
				if m.Failed != nil {
					m.Failed(err.Error())
				}
			}
		} else if _, err := m.free(ctx, 0); err != nil && ctx.Err() == nil {
			m.Log.Warn("image garbage collection: looking at images", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// GarbageCollect frees what the policy asks of the image file system now.
func (m *Manager) GarbageCollect(ctx context.Context) error {
	fsInfo, err := m.Images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return fmt.Errorf("image file system: %w", err)
	}
	if len(fsInfo.ImageFilesystems) == 0 || fsInfo.ImageFilesystems[0].GetFsId().GetMountpoint() == "" {
		return fmt.Errorf("the runtime reports no image file system")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(fsInfo.ImageFilesystems[0].FsId.Mountpoint, &st); err != nil {
		return fmt.Errorf("image file system: %w", err)
	}
	capacity, available := int64(st.Blocks)*st.Bsize, int64(st.Bavail)*st.Bsize
	want := m.Policy.ToFree(capacity, available)
	// Observe even when nothing is wanted, so first-seen and last-used times are known
	// when it is.
	freed, err := m.free(ctx, want)
	if err != nil {
		return err
	}
	if freed < want {
		return fmt.Errorf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", want, freed)
	}
	if want > 0 {
		m.Log.Info("image garbage collection", "usedPercent", (capacity-available)*100/capacity, "freedBytes", freed)
	}
	return nil
}

// DeleteUnused removes every unused image old enough (the eviction manager's reclaim under
// disk pressure) and returns the bytes freed.
func (m *Manager) DeleteUnused(ctx context.Context) (int64, error) {
	return m.free(ctx, math.MaxInt64)
}

func (m *Manager) free(ctx context.Context, want int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	list, err := m.Images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return 0, fmt.Errorf("list images: %w", err)
	}
	ctrs, err := m.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return 0, fmt.Errorf("list containers: %w", err)
	}
	images := make([]Image, 0, len(list.Images))
	byRef := map[string]string{}
	for _, img := range list.Images {
		im := Image{ID: img.Id, Size: int64(img.GetSize()), Tags: img.RepoTags, Pinned: img.Pinned}
		if m.Pinned != nil && m.Pinned(im) {
			im.Pinned = true
		}
		images = append(images, im)
		byRef[img.Id] = img.Id
		for _, r := range append(append([]string{}, img.RepoTags...), img.RepoDigests...) {
			byRef[r] = img.Id
		}
	}
	// Every container the runtime still has, running or not, holds its image.
	inUse := map[string]bool{}
	for _, c := range ctrs.Containers {
		for _, ref := range []string{c.ImageRef, c.GetImage().GetImage()} {
			if id, ok := byRef[ref]; ok {
				inUse[id] = true
			}
		}
	}
	if m.AlsoInUse != nil {
		for _, ref := range m.AlsoInUse() {
			if id, ok := byRef[ref]; ok {
				inUse[id] = true
				continue
			}
			// A reference as a pod spells it ("nginx"): the runtime normalizes it.
			if st, err := m.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err == nil && st.GetImage() != nil {
				inUse[st.Image.Id] = true
			}
		}
	}
	now := time.Now()
	m.tracker.Observe(now, images, inUse)
	if want <= 0 {
		return 0, nil
	}
	victims, _ := m.tracker.Plan(now, images, inUse, want, m.Policy.MinAge)
	var freed int64
	for _, img := range victims {
		if _, err := m.Images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: img.ID}}); err != nil {
			m.Log.Warn("image garbage collection: remove", "image", img.ID, "tags", img.Tags, "err", err)
			continue
		}
		m.Log.Info("image removed", "image", img.ID, "tags", img.Tags, "size", img.Size)
		freed += img.Size
	}
	return freed, nil
}
