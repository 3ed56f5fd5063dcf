// Package imagemount mounts an image's root filesystem read-only on a host directory, for
// the pod volumes of type image. containerd's CRI mounts images itself only from 2.1 on (a CRI
// Mount that names an image); skiff runs Debian's containerd 1.6, so the agent does that part:
// it asks containerd's snapshot service for a read-only view of the image's unpacked layers,
// under a key of its own labelled as a garbage-collection root (so containerd keeps the view,
// and so the layers, while a pod uses them, even if the image is removed), and mounts the
// view's mounts on the volume's directory, which CRI then bind-mounts into containers.
//
// The image is found through CRI (ImageStatus, verbose: its chain ID) and the snapshotter is
// CRI's own (Status, verbose: its config), so the view is of exactly the layers CRI unpacked.
package imagemount

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/api/types"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Namespace is the containerd namespace CRI keeps its images and snapshots in.
const Namespace = "k8s.io"

// gcRootLabel makes containerd's garbage collector keep a snapshot (and its parents).
const gcRootLabel = "containerd.io/gc.root"

// defaultSnapshotter is CRI's when its config does not say.
const defaultSnapshotter = "overlayfs"

// Mounter mounts images through one containerd.
type Mounter struct {
	images    runtimeapi.ImageServiceClient
	runtime   runtimeapi.RuntimeServiceClient
	snapshots snapshotsapi.SnapshotsClient
	// mount is unix.Mount; tests of the mount sequence replace it.
	mount func(source, target, fstype string, flags uintptr, data string) error

	mu          sync.Mutex
	snapshotter string
}

// New returns a mounter over a connection to containerd's socket, which serves CRI and
// containerd's own API side by side.
func New(conn grpc.ClientConnInterface) *Mounter {
	return &Mounter{images: runtimeapi.NewImageServiceClient(conn), runtime: runtimeapi.NewRuntimeServiceClient(conn),
		snapshots: snapshotsapi.NewSnapshotsClient(conn), mount: unix.Mount}
}

func withNamespace(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "containerd-namespace", Namespace)
}

// Mount mounts image (present in CRI's store) read-only on target, an existing directory,
// through a view snapshot named key. A view left under key from before (an agent that died
// between the view and the mount) is replaced: the image may have been pulled again since.
func (m *Mounter) Mount(ctx context.Context, image, key, target string) error {
	chainID, err := m.chainID(ctx, image)
	if err != nil {
		return err
	}
	sn, err := m.snapshotterName(ctx)
	if err != nil {
		return err
	}
	ctx = withNamespace(ctx)
	req := &snapshotsapi.ViewSnapshotRequest{Snapshotter: sn, Key: key, Parent: chainID,
		Labels: map[string]string{gcRootLabel: time.Now().UTC().Format(time.RFC3339)}}
	resp, err := m.snapshots.View(ctx, req)
	if status.Code(err) == codes.AlreadyExists {
		if _, err := m.snapshots.Remove(ctx, &snapshotsapi.RemoveSnapshotRequest{Snapshotter: sn, Key: key}); err != nil {
			return fmt.Errorf("image %s: remove the stale view %s: %w", image, key, err)
		}
		resp, err = m.snapshots.View(ctx, req)
	}
	if err != nil {
		return fmt.Errorf("image %s: view of its layers %s in snapshotter %s: %w", image, chainID, sn, err)
	}
	calls, err := mountCalls(resp.Mounts)
	if err == nil {
		for _, c := range calls {
			if err = m.mount(c.source, target, c.fstype, c.flags, c.data); err != nil {
				err = fmt.Errorf("mount %s (%s) on %s: %w", c.source, c.fstype, target, err)
				if c.flags&unix.MS_REMOUNT != 0 {
					_ = unix.Unmount(target, unix.MNT_DETACH) // the bind before it succeeded
				}
				break
			}
		}
	}
	if err != nil {
		_, _ = m.snapshots.Remove(ctx, &snapshotsapi.RemoveSnapshotRequest{Snapshotter: sn, Key: key})
		return fmt.Errorf("image %s: %w", image, err)
	}
	return nil
}

// Release removes the view named key; one that does not exist is released already. The caller
// unmounts it first.
func (m *Mounter) Release(ctx context.Context, key string) error {
	sn, err := m.snapshotterName(ctx)
	if err != nil {
		return err
	}
	_, err = m.snapshots.Remove(withNamespace(ctx), &snapshotsapi.RemoveSnapshotRequest{Snapshotter: sn, Key: key})
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("remove image view %s: %w", key, err)
	}
	return nil
}

// Keys lists the views whose key begins with prefix, so views left by pods that are gone
// (their removal failed, or the node died) can be released.
func (m *Mounter) Keys(ctx context.Context, prefix string) ([]string, error) {
	sn, err := m.snapshotterName(ctx)
	if err != nil {
		return nil, err
	}
	stream, err := m.snapshots.List(withNamespace(ctx), &snapshotsapi.ListSnapshotsRequest{Snapshotter: sn})
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var keys []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return keys, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list snapshots: %w", err)
		}
		for _, info := range resp.Info {
			if strings.HasPrefix(info.Name, prefix) {
				keys = append(keys, info.Name)
			}
		}
	}
}

// chainID is the chain ID of image's layers, the name of its top unpacked snapshot.
func (m *Mounter) chainID(ctx context.Context, image string) (string, error) {
	st, err := m.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}, Verbose: true})
	if err != nil {
		return "", fmt.Errorf("image %s: %w", image, err)
	}
	if st.Image == nil {
		return "", fmt.Errorf("image %s is not present", image)
	}
	id, err := chainIDFromInfo(st.Info["info"])
	if err != nil {
		return "", fmt.Errorf("image %s: %w", image, err)
	}
	return id, nil
}

// chainIDFromInfo reads the chain ID from containerd's verbose CRI image info, or computes it
// from the image config's diff IDs when the info does not carry it.
func chainIDFromInfo(info string) (string, error) {
	var v struct {
		ChainID   string `json:"chainID"`
		ImageSpec struct {
			RootFS struct {
				DiffIDs []string `json:"diff_ids"`
			} `json:"rootfs"`
		} `json:"imageSpec"`
	}
	if info == "" {
		return "", errors.New("the runtime reports no image info (is it containerd?)")
	}
	if err := json.Unmarshal([]byte(info), &v); err != nil {
		return "", fmt.Errorf("image info: %w", err)
	}
	if v.ChainID != "" {
		return v.ChainID, nil
	}
	if len(v.ImageSpec.RootFS.DiffIDs) == 0 {
		return "", errors.New("image info names no layers")
	}
	return ChainID(v.ImageSpec.RootFS.DiffIDs), nil
}

// ChainID is the OCI chain ID of layers with these diff IDs, lowest first: the first diff ID,
// then sha256 of "<chain below> <diff ID>" for each next one.
func ChainID(diffIDs []string) string {
	if len(diffIDs) == 0 {
		return ""
	}
	chain := diffIDs[0]
	for _, d := range diffIDs[1:] {
		sum := sha256.Sum256([]byte(chain + " " + d))
		chain = "sha256:" + hex.EncodeToString(sum[:])
	}
	return chain
}

// snapshotterName is CRI's snapshotter, read once from its verbose status.
func (m *Mounter) snapshotterName(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snapshotter != "" {
		return m.snapshotter, nil
	}
	st, err := m.runtime.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return "", fmt.Errorf("runtime status: %w", err)
	}
	m.snapshotter = snapshotterFromConfig(st.Info["config"])
	return m.snapshotter, nil
}

// snapshotterFromConfig reads containerd.snapshotter from CRI's config as its verbose status
// reports it; overlayfs, CRI's default, when it is not there.
func snapshotterFromConfig(config string) string {
	var c struct {
		Containerd struct {
			Snapshotter string `json:"snapshotter"`
		} `json:"containerd"`
	}
	if json.Unmarshal([]byte(config), &c) != nil || c.Containerd.Snapshotter == "" {
		return defaultSnapshotter
	}
	return c.Containerd.Snapshotter
}

// mountCall is one mount(2).
type mountCall struct {
	source, fstype, data string
	flags                uintptr
}

// flagOptions are the mount options that are mount(2) flags; the rest go to the filesystem.
var flagOptions = map[string]uintptr{
	"ro": unix.MS_RDONLY, "nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV, "noexec": unix.MS_NOEXEC,
	"noatime": unix.MS_NOATIME, "nodiratime": unix.MS_NODIRATIME, "relatime": unix.MS_RELATIME,
	"bind": unix.MS_BIND, "rbind": unix.MS_BIND | unix.MS_REC,
}

// mountCalls turns the mounts of a view into the mount(2) calls that put it, read-only, on a
// target: a bind mount (a one-layer image) is made and then remounted read-only, since a bind
// ignores MS_RDONLY; an overlay (several layers, lowerdirs only) is read-only as it is and is
// mounted so. Other kinds are not what a view of CRI's snapshotters gives, and are refused.
func mountCalls(mounts []*types.Mount) ([]mountCall, error) {
	if len(mounts) != 1 {
		return nil, fmt.Errorf("want one mount of the image's view, the snapshotter gave %d", len(mounts))
	}
	mt := mounts[0]
	var flags uintptr
	var data []string
	for _, o := range mt.Options {
		if f, ok := flagOptions[o]; ok {
			flags |= f
			continue
		}
		if o == "rw" {
			continue // read-only whatever the snapshotter says
		}
		data = append(data, o)
	}
	flags |= unix.MS_RDONLY
	switch {
	case mt.Type == "bind" || flags&unix.MS_BIND != 0:
		if len(data) > 0 {
			return nil, fmt.Errorf("bind mount of %s: unsupported options %s", mt.Source, strings.Join(data, ","))
		}
		bind := flags & (unix.MS_BIND | unix.MS_REC)
		if bind == 0 {
			bind = unix.MS_BIND
		}
		return []mountCall{
			{source: mt.Source, fstype: "", flags: bind},
			{source: mt.Source, fstype: "", flags: unix.MS_REMOUNT | unix.MS_BIND | (flags &^ (unix.MS_BIND | unix.MS_REC))},
		}, nil
	case mt.Type == "overlay":
		opts := strings.Join(data, ",")
		// mount(2) takes one page of options; containerd shortens long lowerdir lists by
		// chdir tricks that skiff does not repeat: such an image is refused, clearly.
		if len(opts) >= unix.Getpagesize() {
			return nil, fmt.Errorf("overlay of %d layers: its %d bytes of mount options exceed a page", strings.Count(opts, ":")+1, len(opts))
		}
		return []mountCall{{source: "overlay", fstype: "overlay", flags: flags, data: opts}}, nil
	}
	return nil, fmt.Errorf("mount type %q of the image's view is not supported (snapshotter overlayfs or native is)", mt.Type)
}
