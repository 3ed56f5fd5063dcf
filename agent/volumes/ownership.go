package volumes

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// The bits the kubelet's SetVolumeOwnership adds when a pod has an fsGroup, so that every
// container of the pod (all run with fsGroup as a supplementary group) can use the volume:
// group read for read-only volumes, group read-write for writable ones, and on directories
// group search plus setgid, so files created later inherit the group.
const (
	readOnlyGroupMask  fs.FileMode = 0o440
	readWriteGroupMask fs.FileMode = 0o660
	dirGroupMask       fs.FileMode = 0o110
)

// withFSGroup is the mode a file or directory gets under an fsGroup.
func withFSGroup(mode fs.FileMode, dir, readOnly bool) fs.FileMode {
	mask := readWriteGroupMask
	if readOnly {
		mask = readOnlyGroupMask
	}
	if dir {
		mask |= dirGroupMask | fs.ModeSetgid
	}
	return mode | mask
}

// ownership is who the files of a pod's volumes belong to.
type ownership struct {
	fsGroup *int64 // pod.spec.securityContext.fsGroup
	// fsUser is the one user every container of the pod runs as, if there is one: the kubelet
	// gives it the service-account token file, so a non-root pod can read a 0600 token.
	fsUser *int64
	// uid and gid own what has no fsUser or fsGroup: the agent's own.
	uid, gid int
}

func podOwnership(pod *corev1.Pod) ownership {
	o := ownership{fsUser: fsUserOf(pod), uid: os.Geteuid(), gid: os.Getegid()}
	if sc := pod.Spec.SecurityContext; sc != nil {
		o.fsGroup = sc.FSGroup
	}
	return o
}

// fsUserOf is the runAsUser shared by every container (init, regular, ephemeral) of the pod,
// nil when one of them sets none or two differ — the kubelet's FsUserFrom.
func fsUserOf(pod *corev1.Pod) *int64 {
	var users []*int64
	for _, c := range pod.Spec.InitContainers {
		users = append(users, runAsUser(pod, c.SecurityContext))
	}
	for _, c := range pod.Spec.Containers {
		users = append(users, runAsUser(pod, c.SecurityContext))
	}
	for _, c := range pod.Spec.EphemeralContainers {
		users = append(users, runAsUser(pod, c.SecurityContext))
	}
	var shared *int64
	for _, u := range users {
		if u == nil || (shared != nil && *shared != *u) {
			return nil
		}
		shared = u
	}
	return shared
}

// runAsUser is a container's effective runAsUser: its own, else the pod's.
func runAsUser(pod *corev1.Pod, sc *corev1.SecurityContext) *int64 {
	if sc != nil && sc.RunAsUser != nil {
		return sc.RunAsUser
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		return psc.RunAsUser
	}
	return nil
}

// fileAttrs is the final mode and owner of an atomic-writer file the source asked mode for;
// user, when set, owns it (the service-account token under a shared runAsUser).
func (o ownership) fileAttrs(mode int32, user *int64) (attrs, error) {
	if mode < 0 || mode > 0o777 {
		return attrs{}, fmt.Errorf("mode %#o is outside 0 to 0777", mode)
	}
	a := attrs{mode: fs.FileMode(mode), uid: o.uid, gid: o.gid}
	if user != nil {
		a.uid = int(*user)
	}
	if o.fsGroup != nil {
		a.gid = int(*o.fsGroup)
		a.mode = withFSGroup(a.mode, false, true)
	}
	return a, nil
}

// dirAttrs is the mode and owner of the directories of an atomic-writer volume: 0755 so any
// container user can reach the files, group-owned and setgid under an fsGroup.
func (o ownership) dirAttrs() attrs {
	a := attrs{mode: 0o755, uid: o.uid, gid: o.gid}
	if o.fsGroup != nil {
		a.gid = int(*o.fsGroup)
		a.mode = withFSGroup(a.mode, true, true)
	}
	return a
}

// applyFSGroup is the kubelet's SetVolumeOwnership for a writable volume: everything below
// root (root included) is given group fsGroup and the group bits of withFSGroup. Symlinks are
// re-grouped but not chmod-ed, since chmod would change the file they point at. The walk does
// not follow symlinks.
func applyFSGroup(root string, fsGroup int64) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(fsGroup)); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		return os.Chmod(p, withFSGroup(info.Mode()&modeBits, info.IsDir(), false))
	})
}
