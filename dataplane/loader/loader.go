package loader

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/dataplane/programs"
	"github.com/skiff-sh/skiff/dataplane/services"
	"github.com/skiff-sh/skiff/internal/layout"
)

// BPFFS is where bpffs is (or gets) mounted.
const BPFFS = layout.BPFFS

// PinDir is a node's pin directory.
func PinDir(node string) string { return layout.PinDir(node) }

// Dataplane is the loaded programs and maps of one node.
type Dataplane struct {
	objs   programs.SockObjects
	np     programs.NodeportObjects
	links  []link.Link
	pins   []string // where each of links is pinned
	pinDir string
	Maps   services.Maps
	// Resized names the service maps Load replaced because their pinned size differed.
	Resized []string
}

// sockAttachments pairs each socket program with its hook.
func sockAttachments(o *programs.SockObjects) []struct {
	name string
	prog *ebpf.Program
	typ  ebpf.AttachType
} {
	return []struct {
		name string
		prog *ebpf.Program
		typ  ebpf.AttachType
	}{
		{"connect4", o.SkiffConnect4, ebpf.AttachCGroupInet4Connect},
		{"sendmsg4", o.SkiffSendmsg4, ebpf.AttachCGroupUDP4Sendmsg},
		{"recvmsg4", o.SkiffRecvmsg4, ebpf.AttachCGroupUDP4Recvmsg},
		{"getpeername4", o.SkiffGetpeername4, ebpf.AttachCgroupInet4GetPeername},
		{"connect6", o.SkiffConnect6, ebpf.AttachCGroupInet6Connect},
		{"sendmsg6", o.SkiffSendmsg6, ebpf.AttachCGroupUDP6Sendmsg},
		{"recvmsg6", o.SkiffRecvmsg6, ebpf.AttachCGroupUDP6Recvmsg},
		{"getpeername6", o.SkiffGetpeername6, ebpf.AttachCgroupInet6GetPeername},
		{"sock_release", o.SkiffSockRelease, ebpf.AttachCgroupInetSockRelease},
	}
}

// Load loads the programs, pins the maps under pinDir (reusing maps already pinned there,
// with their entries) and attaches the socket programs to cgroupPath (a cgroup2 directory)
// and, when uplink is set, the NodePort programs to that interface (tcx ingress and egress),
// all through pinned links. A link pinned by an earlier run is updated in place to the new
// program, so restarting the agent never leaves a moment without service translation.
//
// nodeIPs are the node's addresses (one per family), which flows forwarded to another node
// are SNATed to. sizes are the service maps' capacities (zero fields: DefaultMapSizes); maps
// pinned with other sizes are replaced, and Resized says which.
func Load(pinDir, cgroupPath, uplink string, nodeIPs []netip.Addr, sizes services.MapSizes) (*Dataplane, error) {
	sizes = sizes.WithDefaults()
	if err := MountBPFFS(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(pinDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cgroupPath, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", cgroupPath, err)
	}
	spec, err := programs.LoadSock()
	if err != nil {
		return nil, err
	}
	npSpec, err := programs.LoadNodeport()
	if err != nil {
		return nil, err
	}
	// Maps pinned by an earlier layout are converted in place before anything loads them;
	// the programs still attached keep the old ones until their links are updated below,
	// and what they add meanwhile is carried over after (carried.again).
	carried, err := migrate(pinDir, programs.MapVersion, spec, npSpec)
	if err != nil {
		return nil, err
	}
	defer carried.close()
	size(spec, sizes)
	d := &Dataplane{pinDir: pinDir}
	if d.Resized, err = unpinResized(pinDir, spec); err != nil {
		return nil, err
	}
	if err := spec.LoadAndAssign(&d.objs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: pinDir}}); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("loading skiff's BPF programs: %+v", ve)
		}
		return nil, fmt.Errorf("loading skiff's BPF programs (maps pinned in %s): %w", pinDir, err)
	}
	d.Maps = services.Maps{Services: d.objs.SkiffServices, Backends: d.objs.SkiffBackends, Names: d.objs.SkiffSvcNames, Sockets: d.objs.SkiffSockNat,
		Services6: d.objs.SkiffServices6, Backends6: d.objs.SkiffBackends6, Sockets6: d.objs.SkiffSockNat6, Maglev: d.objs.SkiffMaglev}
	if err := d.objs.SkiffMeta.Put(uint32(0), uint32(programs.MapVersion)); err != nil {
		d.Close()
		return nil, fmt.Errorf("recording the map version: %w", err)
	}
	for _, a := range sockAttachments(&d.objs) {
		err := d.attach(pinDir, a.name, a.prog, func() (link.Link, error) {
			return link.AttachCgroup(link.CgroupOptions{Path: cgroupPath, Attach: a.typ, Program: a.prog})
		})
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("%s on %s: %w", a.name, cgroupPath, err)
		}
	}
	size(npSpec, sizes) // it shares the service maps just pinned: same sizes, same flags
	if err := npSpec.LoadAndAssign(&d.np, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: pinDir}}); err != nil {
		d.Close()
		return nil, fmt.Errorf("loading skiff's NodePort programs: %w", err)
	}
	d.Maps.CT, d.Maps.CT6 = d.np.SkiffCt, d.np.SkiffCt6
	// Flows forwarded to another node leave from this node's address of their family (a
	// LoadBalancer address is every node's, and the backend's reply must come back here).
	var snat uint32
	var snat6 programs.NodeportSnat6
	for _, ip := range nodeIPs {
		switch {
		case ip.Is4() && snat == 0:
			snat = programs.Addr4(ip)
		case ip.Is6() && !ip.Is4In6() && snat6 == (programs.NodeportSnat6{}):
			snat6.Addr = programs.Addr6(ip)
		}
	}
	if err := d.np.SkiffNpSnat.Put(uint32(0), snat); err != nil {
		d.Close()
		return nil, fmt.Errorf("recording the node's SNAT address: %w", err)
	}
	if err := d.np.SkiffNpSnat6.Put(uint32(0), snat6); err != nil {
		d.Close()
		return nil, fmt.Errorf("recording the node's IPv6 SNAT address: %w", err)
	}
	if uplink != "" {
		ifc, err := net.InterfaceByName(uplink)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("NodePort uplink: %w", err)
		}
		for _, a := range []struct {
			name string
			prog *ebpf.Program
			typ  ebpf.AttachType
		}{{"nodeport_ingress", d.np.SkiffNodeportIngress, ebpf.AttachTCXIngress}, {"nodeport_egress", d.np.SkiffNodeportEgress, ebpf.AttachTCXEgress}} {
			err := d.attach(pinDir, a.name, a.prog, func() (link.Link, error) {
				return link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: a.prog, Attach: a.typ})
			})
			if err != nil {
				d.Close()
				return nil, fmt.Errorf("%s on %s: %w", a.name, uplink, err)
			}
		}
	}
	if err := carried.again(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// PinnedVersion is the layout version recorded beside the maps pinned in pinDir: 0 when
// none are pinned (a first start) or they predate the record.
func PinnedVersion(pinDir string) (uint32, error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, "skiff_meta"), &ebpf.LoadPinOptions{ReadOnly: true})
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer m.Close()
	var v uint32
	if err := m.Lookup(uint32(0), &v); err != nil {
		return 0, err
	}
	return v, nil
}

// attach swaps prog into the link pinned as link_<name>, or attaches it anew and pins it. A
// pinned link that was detached (bpftool link detach) is replaced: updating it would leave
// the hook empty.
func (d *Dataplane) attach(pinDir, name string, prog *ebpf.Program, attachNew func() (link.Link, error)) error {
	path := filepath.Join(pinDir, "link_"+name)
	if l, err := link.LoadPinnedLink(path, nil); err == nil {
		if Attached(l) == nil {
			if err := l.Update(prog); err != nil {
				l.Close()
				return fmt.Errorf("swap program: %w", err)
			}
			d.links, d.pins = append(d.links, l), append(d.pins, path)
			return nil
		}
		_ = l.Unpin()
		l.Close()
	}
	l, err := attachNew()
	if err != nil {
		return err
	}
	if err := l.Pin(path); err != nil {
		l.Close()
		return fmt.Errorf("pin link: %w", err)
	}
	d.links, d.pins = append(d.links, l), append(d.pins, path)
	return nil
}

// attached says why a link no longer holds its program at its hook, or nil. A detached
// cgroup link reports cgroup 0, a detached tcx link interface 0.
func Attached(l link.Link) error {
	info, err := l.Info()
	if err != nil {
		return fmt.Errorf("reading the link: %w", err)
	}
	if c := info.Cgroup(); c != nil && c.CgroupId == 0 {
		return errors.New("detached from its cgroup")
	}
	if t := info.TCX(); t != nil && t.Ifindex == 0 {
		return errors.New("detached from its interface")
	}
	return nil
}

// pinnedMaps are the maps the proxy and `skiff bpf` find by their pins.
var pinnedMaps = []string{"skiff_services", "skiff_backends", "skiff_svc_names", "skiff_sock_nat", "skiff_affinity", "skiff_ct", "skiff_maglev", "skiff_meta", "skiff_host_netns"}

// Check says what, if anything, is no longer as Load left it: a pinned map or link removed
// (rm under /sys/fs/bpf, a remounted bpffs), or a program detached from its hook. The proxy
// checks periodically and, on an error, loads again: Load repairs all of these.
func (d *Dataplane) Check() error {
	var problems []string
	for _, m := range pinnedMaps {
		if _, err := os.Stat(filepath.Join(d.pinDir, m)); err != nil {
			problems = append(problems, "map "+m+" is no longer pinned")
		}
	}
	for i, l := range d.links {
		name := strings.TrimPrefix(filepath.Base(d.pins[i]), "link_")
		if _, err := os.Stat(d.pins[i]); err != nil {
			problems = append(problems, "link "+name+" is no longer pinned")
		}
		if err := Attached(l); err != nil {
			problems = append(problems, "program "+name+" "+err.Error())
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("service dataplane in %s: %s", d.pinDir, strings.Join(problems, "; "))
	}
	return nil
}

// Close releases this process's handles; pinned maps and links stay.
func (d *Dataplane) Close() {
	for _, l := range d.links {
		l.Close()
	}
	d.objs.Close()
	d.np.Close()
}

// Remove unpins everything under pinDir: the programs detach and the maps go once nobody
// holds them (lab down, tests).
func Remove(pinDir string) error {
	return os.RemoveAll(pinDir)
}

// OpenPinned opens a node's pinned maps read-only, for `skiff bpf`.
func OpenPinned(pinDir string) (services.Maps, func(), error) {
	opts := &ebpf.LoadPinOptions{ReadOnly: true}
	var m services.Maps
	var opened []*ebpf.Map
	closeAll := func() {
		for _, x := range opened {
			x.Close()
		}
	}
	for _, x := range []struct {
		name     string
		dst      **ebpf.Map
		optional bool // pinned only by agents that have IPv6 Services
	}{{"skiff_services", &m.Services, false}, {"skiff_backends", &m.Backends, false}, {"skiff_svc_names", &m.Names, false}, {"skiff_sock_nat", &m.Sockets, false}, {"skiff_ct", &m.CT, false},
		{"skiff_services6", &m.Services6, true}, {"skiff_backends6", &m.Backends6, true}, {"skiff_sock_nat6", &m.Sockets6, true}, {"skiff_ct6", &m.CT6, true}} {
		mp, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, x.name), opts)
		if x.optional && errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			closeAll()
			return services.Maps{}, nil, fmt.Errorf("%s: %w (is the agent running on this node? see skiff bpf --pin-dir)", filepath.Join(pinDir, x.name), err)
		}
		*x.dst = mp
		opened = append(opened, mp)
	}
	return m, closeAll, nil
}

func MountBPFFS() error {
	var st unix.Statfs_t
	if err := unix.Statfs(BPFFS, &st); err == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := os.MkdirAll(BPFFS, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("bpf", BPFFS, "bpf", 0, ""); err != nil {
		return fmt.Errorf("mount bpffs at %s: %w", BPFFS, err)
	}
	return nil
}
