package loader

import (
	"fmt"
	"unsafe"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// soNetnsCookie is SO_NETNS_COOKIE (Linux 5.14), which x/sys/unix does not name yet.
const soNetnsCookie = 71

// NetnsCookie is the kernel's cookie for the network namespace at path (empty: the calling
// thread's), the value bpf_get_netns_cookie returns for sockets in it.
func NetnsCookie(path string) (uint64, error) {
	var cookie uint64
	read := func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		size := uint32(unsafe.Sizeof(cookie))
		if _, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, soNetnsCookie,
			uintptr(unsafe.Pointer(&cookie)), uintptr(unsafe.Pointer(&size)), 0); errno != 0 {
			return errno
		}
		return nil
	}
	var err error
	if path == "" {
		err = read()
	} else {
		err = ns.WithNetNSPath(path, func(ns.NetNS) error { return read() })
	}
	if err != nil {
		return 0, fmt.Errorf("the network namespace cookie of %q (SO_NETNS_COOKIE): %w", path, err)
	}
	return cookie, nil
}

// SetHostNetns tells the socket programs which network namespace is the node's own (its
// NetnsCookie): only there do hostPorts on 127.0.0.1 exist.
func (d *Dataplane) SetHostNetns(cookie uint64) error {
	if err := d.objs.SkiffHostNetns.Put(uint32(0), cookie); err != nil {
		return fmt.Errorf("recording the node's network namespace: %w", err)
	}
	return nil
}
