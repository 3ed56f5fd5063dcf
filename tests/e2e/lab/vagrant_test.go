package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVagrantfileValidates runs Debian's `vagrant validate` on the Vagrantfile for both
// providers it supports, and checks that a bad setting is refused with its name.
func TestVagrantfileValidates(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	home := t.TempDir() // vagrant's own state (VAGRANT_HOME) stays with the test
	run := func(env ...string) (string, error) {
		cmd := exec.Command("vagrant", "validate", "--ignore-provider")
		cmd.Dir = root
		// No version or box checks: the test must not reach outside the machine.
		cmd.Env = append(os.Environ(), append([]string{"VAGRANT_HOME=" + home, "SKIFF_TOKEN=abcdef.0123456789abcdef",
			"VAGRANT_CHECKPOINT_DISABLE=1", "VAGRANT_BOX_UPDATE_CHECK_DISABLE=1"}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, provider := range []string{"libvirt", "virtualbox"} {
		for _, nodes := range []string{"1", "3"} {
			out, err := run("SKIFF_PROVIDER="+provider, "SKIFF_NODES="+nodes)
			if err != nil || !strings.Contains(out, "Vagrantfile validated successfully") {
				t.Errorf("provider %s, %s nodes: %v\n%s", provider, nodes, err, out)
			}
		}
	}
	for _, bad := range []struct{ env, want string }{
		{"SKIFF_PROVIDER=hyperv", "SKIFF_PROVIDER must be libvirt or virtualbox"},
		{"SKIFF_NODES=0", "SKIFF_NODES must be between 1 and 200"},
		{"SKIFF_NETWORK=10.0", "SKIFF_NETWORK must look like"},
	} {
		if out, err := run(bad.env); err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("%s: %v\n%s", bad.env, err, out)
		}
	}
}
