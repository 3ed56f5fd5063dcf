package hostprep

import (
	"errors"
	"strings"
	"testing"
)

// fake is a kernel whose sysctls are a map; a key in readOnly refuses writes, one in sticky
// takes writes but keeps its value (as a sysctl another agent resets would).
type fake struct {
	sysctls        map[string]string
	readOnly       map[string]bool
	sticky         map[string]bool
	bpffs, cgroup2 bool
	mountErr       error
	writes         []string
	modules        map[string]ModuleState
	loadErr        error
}

func (f *fake) Module(name string) ModuleState { return f.modules[name] }
func (f *fake) LoadModule(name string) error {
	if f.loadErr != nil {
		return f.loadErr
	}
	f.modules[name] = ModulePresent
	return nil
}

func (f *fake) Sysctl(key string) (string, error) {
	v, ok := f.sysctls[key]
	if !ok {
		return "", errors.New("no such file or directory")
	}
	return v + "\n", nil
}

func (f *fake) SetSysctl(key, value string) error {
	if f.readOnly[key] {
		return errors.New("read-only file system")
	}
	f.writes = append(f.writes, key+"="+value)
	if !f.sticky[key] {
		f.sysctls[key] = value
	}
	return nil
}

func (f *fake) IsBPFFS(string) (bool, error) { return f.bpffs, nil }
func (f *fake) MountBPFFS(string) error {
	if f.mountErr != nil {
		return f.mountErr
	}
	f.bpffs = true
	return nil
}
func (f *fake) HasCgroup2() bool { return f.cgroup2 }

func TestListsModule(t *testing.T) {
	dep := "kernel/net/ipv4/udp_tunnel.ko.xz:\nkernel/drivers/net/veth.ko.xz: kernel/net/core/page_pool.ko\nkernel/net/sched/sch_ingress.ko:\n"
	for name, want := range map[string]bool{"veth": true, "sch_ingress": true, "sch-ingress": true, "udp_tunnel": true, "page_pool": false, "vet": false, "": false} {
		if got := listsModule(dep, name); got != want {
			t.Errorf("listsModule(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestPrepare(t *testing.T) {
	for _, tc := range []struct {
		name      string
		k         *fake
		needs     Needs
		wantErr   string // "" for none
		wantSteps []string
		writes    int
	}{
		{name: "a prepared host changes nothing",
			k:         &fake{sysctls: map[string]string{"net.ipv4.ip_forward": "1"}, bpffs: true, cgroup2: true},
			needs:     Needs{ServiceProxy: true},
			wantSteps: []string{"net.ipv4.ip_forward: ok", "bpffs at /sys/fs/bpf: ok", "cgroup v2: ok"}},
		{name: "a fresh Debian host: forwarding off, bpffs unmounted",
			k:         &fake{sysctls: map[string]string{"net.ipv4.ip_forward": "0"}, cgroup2: true},
			needs:     Needs{ServiceProxy: true},
			wantSteps: []string{"net.ipv4.ip_forward: was 0, set to 1", "bpffs at /sys/fs/bpf: mounted", "cgroup v2: ok"}, writes: 1},
		{name: "forwarding that cannot be turned on stops the agent",
			k:       &fake{sysctls: map[string]string{"net.ipv4.ip_forward": "0"}, readOnly: map[string]bool{"net.ipv4.ip_forward": true}, bpffs: true, cgroup2: true},
			wantErr: "net.ipv4.ip_forward: is 0 and setting it to 1 failed: read-only file system (pods could not reach anything beyond this node)"},
		{name: "forwarding that does not stay on stops the agent",
			k:       &fake{sysctls: map[string]string{"net.ipv4.ip_forward": "0"}, sticky: map[string]bool{"net.ipv4.ip_forward": true}, bpffs: true, cgroup2: true},
			wantErr: "would not stay 1", writes: 1},
		{name: "no bpffs matters only to the service proxy",
			k:         &fake{sysctls: map[string]string{"net.ipv4.ip_forward": "1"}, mountErr: errors.New("operation not permitted")},
			needs:     Needs{ServiceProxy: false},
			wantSteps: []string{"net.ipv4.ip_forward: ok", "bpffs at /sys/fs/bpf: not mounted and mounting it failed: operation not permitted (mount -t bpf bpf /sys/fs/bpf)", "cgroup v2: no cgroup v2 hierarchy"}},
		{name: "the service proxy without bpffs or cgroup v2 stops the agent, naming both",
			k:       &fake{sysctls: map[string]string{"net.ipv4.ip_forward": "1"}, mountErr: errors.New("operation not permitted")},
			needs:   Needs{ServiceProxy: true},
			wantErr: "bpffs at /sys/fs/bpf: not mounted and mounting it failed: operation not permitted (mount -t bpf bpf /sys/fs/bpf); cgroup v2: no cgroup v2"},
		{name: "a loadable veth module that is not loaded is loaded",
			k: &fake{sysctls: map[string]string{"net.ipv4.ip_forward": "1"}, bpffs: true, cgroup2: true,
				modules: map[string]ModuleState{"veth": ModuleLoadable}},
			wantSteps: []string{"net.ipv4.ip_forward: ok", "bpffs at /sys/fs/bpf: ok", "cgroup v2: ok", "module veth: loaded"}},
		{name: "a veth module that will not load stops the agent",
			k: &fake{sysctls: map[string]string{"net.ipv4.ip_forward": "1"}, bpffs: true, cgroup2: true,
				modules: map[string]ModuleState{"veth": ModuleLoadable}, loadErr: errors.New("modprobe veth: exit status 1")},
			wantErr: "module veth: not loaded and loading it failed: modprobe veth: exit status 1 (pods could get no network interface)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps, err := Prepare(tc.k, tc.needs)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
			if tc.wantSteps != nil && len(steps) != len(tc.wantSteps) {
				t.Errorf("steps %v, want %d", steps, len(tc.wantSteps))
			}
			for i, want := range tc.wantSteps {
				if i >= len(steps) || !strings.HasPrefix(steps[i].String(), want) {
					t.Errorf("step %d = %v, want %q", i, steps, want)
				}
			}
			if len(tc.k.writes) != tc.writes {
				t.Errorf("writes %v, want %d", tc.k.writes, tc.writes)
			}
		})
	}
}

func TestForwardIPv6(t *testing.T) {
	f := &fake{sysctls: map[string]string{"net.ipv6.conf.all.forwarding": "0"}}
	st := ForwardIPv6(f)
	if !st.Changed || st.Problem != "" || f.sysctls["net.ipv6.conf.all.forwarding"] != "1" || !st.Required {
		t.Errorf("off: %+v, sysctls %v", st, f.sysctls)
	}
	if st := ForwardIPv6(f); st.Changed || st.Problem != "" {
		t.Errorf("already on: %+v", st)
	}
	// IPv6 disabled in the kernel: no sysctl to set, a clear problem that stops the agent.
	if st := ForwardIPv6(&fake{sysctls: map[string]string{}}); st.Problem == "" || !strings.Contains(st.String(), "pods' IPv6") {
		t.Errorf("no IPv6: %+v", st)
	}
}
