// Package hostprep prepares the node's kernel for pod networking before the agent starts
// pods, as k3s and Calico do rather than leaving it to the operator: IPv4 forwarding on
// (a fresh Debian host has net.ipv4.ip_forward=0, and then a pod reaches nothing but its own
// node), the BPF filesystem mounted (the service proxy pins its maps there), cgroup v2 present
// (its socket programs attach to a cgroup). What it cannot fix is one clear line each; what
// pod networking cannot work without is an error, so the agent stops rather than report a
// Ready node whose pods cannot talk.
package hostprep

import (
	"errors"
	"fmt"
	"strings"
)

// Kernel is what Prepare reads and changes; the real one is System, tests use fakes.
type Kernel interface {
	// Sysctl reads a sysctl ("net.ipv4.ip_forward") in the agent's network namespace.
	Sysctl(key string) (string, error)
	// SetSysctl writes one.
	SetSysctl(key, value string) error
	// IsBPFFS says whether the BPF filesystem is mounted at path; MountBPFFS mounts it.
	IsBPFFS(path string) (bool, error)
	MountBPFFS(path string) error
	// HasCgroup2 says whether a cgroup v2 hierarchy is mounted (unified or hybrid).
	HasCgroup2() bool
	// Module says whether a kernel module is there (loaded or built in), could be loaded
	// (it is in this kernel's module tree), or cannot be told (no module tree: a kernel
	// built without loadable modules, or a container without /lib/modules).
	Module(name string) ModuleState
	// LoadModule loads one (modprobe).
	LoadModule(name string) error
}

// ModuleState is what Kernel.Module finds.
type ModuleState int

const (
	// ModuleUnknown: there is no module tree to look in; the feature is assumed built in
	// and fails where it is used if it is not.
	ModuleUnknown ModuleState = iota
	// ModulePresent: loaded or built in.
	ModulePresent
	// ModuleLoadable: in the module tree and not loaded.
	ModuleLoadable
)

// modules are the kernel modules pod networking needs: veth for every pod's interface
// pair. (The service proxy attaches with tcx and sockets' cgroup hooks, which need none.)
var modules = []struct{ name, consequence string }{
	{"veth", "pods could get no network interface"},
}

// Needs says which parts of the agent run, so which prerequisites matter.
type Needs struct {
	// ServiceProxy needs bpffs and cgroup v2.
	ServiceProxy bool
	// BPFFS is where the BPF filesystem belongs (/sys/fs/bpf).
	BPFFS string
}

// Step is one prerequisite and what became of it.
type Step struct {
	Name string
	// Changed is true when Prepare had to fix it ("set net.ipv4.ip_forward=1").
	Changed bool
	// Problem is why it could not be made right ("" when it is).
	Problem string
	// Required problems stop the agent; the others are warnings.
	Required bool
	Detail   string
}

func (s Step) String() string {
	switch {
	case s.Problem != "":
		return s.Name + ": " + s.Problem
	case s.Changed:
		return s.Name + ": " + s.Detail
	default:
		return s.Name + ": ok"
	}
}

// Prepare checks and fixes each prerequisite, returning every step and an error naming the
// required ones that could not be made right.
func Prepare(k Kernel, n Needs) ([]Step, error) {
	if n.BPFFS == "" {
		n.BPFFS = "/sys/fs/bpf"
	}
	var steps []Step
	// Forwarding: pods are routed through the node (no bridge), so without it a pod reaches
	// only its node, and other nodes' pods never reach it.
	steps = append(steps, sysctlStep(k, "net.ipv4.ip_forward", "1", true,
		"pods could not reach anything beyond this node"))
	// The BPF filesystem: the service proxy pins programs and maps there so traffic survives
	// agent restarts.
	bpffs := Step{Name: "bpffs at " + n.BPFFS, Required: n.ServiceProxy}
	if ok, err := k.IsBPFFS(n.BPFFS); err == nil && ok {
		// mounted
	} else if merr := k.MountBPFFS(n.BPFFS); merr != nil {
		bpffs.Problem = fmt.Sprintf("not mounted and mounting it failed: %v (mount -t bpf bpf %s)", merr, n.BPFFS)
	} else {
		bpffs.Changed, bpffs.Detail = true, "mounted"
	}
	steps = append(steps, bpffs)
	cg := Step{Name: "cgroup v2", Required: n.ServiceProxy}
	if !k.HasCgroup2() {
		cg.Problem = "no cgroup v2 hierarchy is mounted: the service proxy's socket programs attach to one (mount -t cgroup2 none /sys/fs/cgroup/unified)"
	}
	steps = append(steps, cg)
	// Modules: loaded where they are missing; present or unknowable ones are no step.
	for _, m := range modules {
		if k.Module(m.name) != ModuleLoadable {
			continue
		}
		st := Step{Name: "module " + m.name, Required: true}
		if err := k.LoadModule(m.name); err != nil {
			st.Problem = fmt.Sprintf("not loaded and loading it failed: %v (%s)", err, m.consequence)
		} else {
			st.Changed, st.Detail = true, "loaded"
		}
		steps = append(steps, st)
	}

	var fatal []string
	for _, s := range steps {
		if s.Problem != "" && s.Required {
			fatal = append(fatal, s.String())
		}
	}
	if len(fatal) > 0 {
		return steps, errors.New("the node cannot run pods' networking: " + strings.Join(fatal, "; "))
	}
	return steps, nil
}

// ForwardIPv6 turns IPv6 forwarding on, for a node with an IPv6 pod block: its pods are routed
// through it as in IPv4. (With forwarding on, the kernel ignores router advertisements on
// interfaces whose accept_ra is 1; a host that takes its IPv6 default route from them needs
// accept_ra=2 on that interface, as with any IPv6 router.)
func ForwardIPv6(k Kernel) Step {
	return sysctlStep(k, "net.ipv6.conf.all.forwarding", "1", true, "pods' IPv6 could not leave this node")
}

func sysctlStep(k Kernel, key, want string, required bool, consequence string) Step {
	st := Step{Name: key, Required: required}
	got, err := k.Sysctl(key)
	if err != nil {
		st.Problem = fmt.Sprintf("cannot read it: %v (%s)", err, consequence)
		return st
	}
	if strings.TrimSpace(got) == want {
		return st
	}
	if err := k.SetSysctl(key, want); err != nil {
		st.Problem = fmt.Sprintf("is %s and setting it to %s failed: %v (%s)", strings.TrimSpace(got), want, err, consequence)
		return st
	}
	if again, err := k.Sysctl(key); err != nil || strings.TrimSpace(again) != want {
		st.Problem = fmt.Sprintf("is %s and would not stay %s (%s)", strings.TrimSpace(again), want, consequence)
		return st
	}
	st.Changed, st.Detail = true, fmt.Sprintf("was %s, set to %s", strings.TrimSpace(got), want)
	return st
}
