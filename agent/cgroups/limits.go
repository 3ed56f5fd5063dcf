package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Limits are what a node's pods may use together, enforced on the cgroup that holds them all
// (the kubelet's --enforce-node-allocatable=pods on its kubepods cgroup).
type Limits struct {
	// MemoryBytes caps the pods' memory together; 0 lifts the cap.
	MemoryBytes int64
	// MilliCPU sets the pods' CPU weight against the node's other cgroups, as shares of
	// 1024 per CPU; 0 leaves the weight alone.
	MilliCPU int64
	// PIDs caps the pods' tasks together; 0 lifts the cap.
	PIDs int64
}

// SharesFromMilliCPU is the cgroup v1 cpu.shares for a CPU amount, as the kubelet converts it
// (1024 per CPU, within the kernel's 2..262144).
func SharesFromMilliCPU(milli int64) uint64 {
	shares := milli * 1024 / 1000
	return uint64(min(max(shares, 2), 262144))
}

// WeightFromShares is the cgroup v2 cpu.weight (1..10000) for cpu.shares (2..262144), as runc
// and the kubelet map one onto the other.
func WeightFromShares(shares uint64) uint64 {
	shares = min(max(shares, 2), 262144)
	return 1 + (shares-2)*9999/262142
}

// EnforceLimits creates root in every hierarchy (mounts) and writes the limits in whichever
// interface each has: cgroup v2's memory.max, cpu.weight and pids.max (enabling the memory,
// cpu and pids controllers down to root, where its hierarchy has them), cgroup v1's
// memory.limit_in_bytes, cpu.shares and pids.max. A hierarchy without a controller (the empty
// cgroup2 of a hybrid machine) is passed over. The pods' own cgroups are created under root.
func EnforceLimits(mounts []string, root string, l Limits) error {
	var errs []error
	wrote := false
	for _, m := range mounts {
		dir := filepath.Join(m, root)
		if isUnified(m) {
			if err := enableControllers(m, root); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		memory := "max"
		if l.MemoryBytes > 0 {
			memory = strconv.FormatInt(l.MemoryBytes, 10)
		}
		pids := "max"
		if l.PIDs > 0 {
			pids = strconv.FormatInt(l.PIDs, 10)
		}
		v1Memory := "-1"
		if l.MemoryBytes > 0 {
			v1Memory = memory
		}
		settings := []setting{
			{"memory.max", memory}, {"memory.limit_in_bytes", v1Memory}, {"pids.max", pids},
		}
		if l.MilliCPU > 0 {
			settings = append(settings, shareSettings(SharesFromMilliCPU(l.MilliCPU))...)
		}
		n, err := writeSettings(dir, settings, false)
		errs = append(errs, err)
		wrote = wrote || n > 0
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if !wrote {
		return fmt.Errorf("no memory, cpu or pids controller under any cgroup hierarchy (%s) to limit %s with", strings.Join(mounts, ", "), root)
	}
	return nil
}

// isUnified reports whether the hierarchy mounted at m is cgroup v2.
func isUnified(m string) bool {
	_, err := os.Stat(filepath.Join(m, "cgroup.controllers"))
	return err == nil
}

// enableControllers turns on memory, cpu and pids (those the hierarchy has) in the
// cgroup.subtree_control of every cgroup from the hierarchy's root down to root's parent, so
// that root gets their interface files — as runc does for the cgroups it creates.
func enableControllers(m, root string) error {
	b, err := os.ReadFile(filepath.Join(m, "cgroup.controllers"))
	if err != nil {
		return err
	}
	var want []string
	for _, c := range strings.Fields(string(b)) {
		if c == "memory" || c == "cpu" || c == "pids" {
			want = append(want, c)
		}
	}
	if len(want) == 0 {
		return nil
	}
	dir := m
	parts := strings.Split(strings.Trim(filepath.Clean("/"+root), "/"), "/")
	for _, part := range parts {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		if err != nil {
			return err
		}
		on := strings.Fields(string(b))
		for _, c := range want {
			if slices.Contains(on, c) {
				continue
			}
			if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0o644); err != nil {
				return fmt.Errorf("enabling the %s controller in %s: %w", c, dir, err)
			}
		}
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// setting is one interface file's value; files a hierarchy lacks are passed over.
type setting struct{ file, value string }

// shareSettings are a CPU weight in both interfaces: v1's cpu.shares and v2's cpu.weight.
func shareSettings(shares uint64) []setting {
	return []setting{{"cpu.shares", strconv.FormatUint(shares, 10)}, {"cpu.weight", strconv.FormatUint(WeightFromShares(shares), 10)}}
}

// writeFile is os.WriteFile; the tests record through it what the kernel's files would not keep.
var writeFile = os.WriteFile

// writeSettings writes each setting whose file the cgroup dir has (the others belong to
// another hierarchy's controllers) and returns how many it wrote. With loosenOnly it writes
// only those that raise or lift the limit in place, and weights (see looser).
func writeSettings(dir string, settings []setting, loosenOnly bool) (int, error) {
	var errs []error
	n := 0
	for _, s := range settings {
		p := filepath.Join(dir, s.file)
		cur, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not this hierarchy's controller
		}
		if err == nil && loosenOnly && !looser(s.file, strings.TrimSpace(string(cur)), s.value) {
			continue
		}
		if err := writeFile(p, []byte(s.value), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("writing %s to %s: %w", s.value, p, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
