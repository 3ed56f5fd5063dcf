package imagemount

import (
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/containerd/api/types"
	"golang.org/x/sys/unix"
)

var (
	diffA = "sha256:" + strings.Repeat("a", 64)
	diffB = "sha256:" + strings.Repeat("b", 64)
	diffC = "sha256:" + strings.Repeat("c", 64)
)

// TestChainID against values computed with sha256sum: printf '%s %s' CHAIN DIFF | sha256sum.
func TestChainID(t *testing.T) {
	for _, tc := range []struct {
		diffs []string
		want  string
	}{
		{nil, ""},
		{[]string{diffA}, diffA},
		{[]string{diffA, diffB}, "sha256:ccd722928bd92476ba1745586fed6e45a102504185ad88cd89e01ff116fd146c"},
		{[]string{diffA, diffB, diffC}, "sha256:c1377126441fb2f5ec2c21ae2a60255331d639e830f0ee1b40a36e52d4c40588"},
	} {
		if got := ChainID(tc.diffs); got != tc.want {
			t.Errorf("ChainID(%d layers) = %s, want %s", len(tc.diffs), got, tc.want)
		}
	}
}

func TestChainIDFromInfo(t *testing.T) {
	for _, tc := range []struct {
		info, want, err string
	}{
		{`{"chainID":"sha256:feed","imageSpec":{"rootfs":{"diff_ids":["` + diffA + `"]}}}`, "sha256:feed", ""},
		// Without chainID (another CRI version), from the config's layers.
		{`{"imageSpec":{"rootfs":{"type":"layers","diff_ids":["` + diffA + `","` + diffB + `"]}}}`,
			"sha256:ccd722928bd92476ba1745586fed6e45a102504185ad88cd89e01ff116fd146c", ""},
		{``, "", "no image info"},
		{`{"imageSpec":{}}`, "", "names no layers"},
		{`{`, "", "image info:"},
	} {
		got, err := chainIDFromInfo(tc.info)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one with %q", tc.info, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %s, %v; want %s", tc.info, got, err, tc.want)
		}
	}
}

func TestSnapshotterFromConfig(t *testing.T) {
	for config, want := range map[string]string{
		`{"containerd":{"snapshotter":"native","defaultRuntimeName":"runc"}}`: "native",
		`{"containerd":{}}`: "overlayfs",
		``:                  "overlayfs",
		`not json`:          "overlayfs",
	} {
		if got := snapshotterFromConfig(config); got != want {
			t.Errorf("%q: %s, want %s", config, got, want)
		}
	}
}

func TestMountCalls(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mounts []*types.Mount
		want   []mountCall
		err    string
	}{
		{
			// What overlayfs's View gives for a one-layer image: bind, then remount read-only.
			name:   "one layer",
			mounts: []*types.Mount{{Type: "bind", Source: "/s/1/fs", Options: []string{"ro", "rbind"}}},
			want: []mountCall{
				{source: "/s/1/fs", flags: unix.MS_BIND | unix.MS_REC},
				{source: "/s/1/fs", flags: unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY},
			},
		},
		{
			// A view of a writable snapshotter's bind is still read-only; nosuid carries over.
			name:   "rw bind",
			mounts: []*types.Mount{{Type: "bind", Source: "/n/5", Options: []string{"rw", "bind", "nosuid"}}},
			want: []mountCall{
				{source: "/n/5", flags: unix.MS_BIND},
				{source: "/n/5", flags: unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID},
			},
		},
		{
			name:   "layers",
			mounts: []*types.Mount{{Type: "overlay", Source: "overlay", Options: []string{"index=off", "lowerdir=/s/2/fs:/s/1/fs"}}},
			want:   []mountCall{{source: "overlay", fstype: "overlay", flags: unix.MS_RDONLY, data: "index=off,lowerdir=/s/2/fs:/s/1/fs"}},
		},
		{name: "none", err: "gave 0"},
		{name: "two", mounts: []*types.Mount{{Type: "bind"}, {Type: "bind"}}, err: "gave 2"},
		{name: "bind with data", mounts: []*types.Mount{{Type: "bind", Source: "/x", Options: []string{"rbind", "mode=755"}}}, err: "unsupported options mode=755"},
		{name: "other type", mounts: []*types.Mount{{Type: "erofs", Source: "/x"}}, err: `mount type "erofs"`},
		{name: "too many layers", mounts: []*types.Mount{{Type: "overlay", Options: []string{"lowerdir=" + strings.Repeat("/var/lib/x/1/fs:", 300) + "/y"}}},
			err: "301 layers"},
	} {
		got, err := mountCalls(tc.mounts)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", tc.name, got, err, tc.want)
		}
	}
}
