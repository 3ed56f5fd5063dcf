package cgroups

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/skiff-sh/skiff/internal/podqos"
)

// The kubelet's QoS tiers: a Guaranteed pod's cgroup sits right under the root, a Burstable
// or BestEffort one under the root's burstable or besteffort cgroup. The tiers' CPU weights
// make requests hold across pods: BestEffort pods together weigh as little as the kernel
// allows, Burstable ones together as much as they request, each Guaranteed pod as much as
// it requests.
const (
	BurstableTier  = "burstable"
	BestEffortTier = "besteffort"
)

// CPUPeriod is the CFS period (µs) a pod's CPU limit is a quota of, the kubelet's default.
const CPUPeriod = 100000

// minQuota is the smallest CFS quota (µs) the kubelet writes, so a tiny limit still runs.
const minQuota = 1000

// tier is the QoS tier directory (under the root) for a class: "" for Guaranteed.
func tier(qos corev1.PodQOSClass) string {
	switch qos {
	case corev1.PodQOSBurstable:
		return BurstableTier
	case corev1.PodQOSBestEffort:
		return BestEffortTier
	}
	return ""
}

// PodParent is the cgroup parent of a pod's sandbox and containers: <root>/pod<uid> for a
// Guaranteed pod, <root>/burstable/pod<uid> and <root>/besteffort/pod<uid> for the others.
func PodParent(root string, qos corev1.PodQOSClass, uid string) string {
	return path.Join("/", root, tier(qos), "pod"+uid)
}

// Parent is a pod's cgroup parent: its QoS tier's (PodParent) when perQOS, else right under
// the root with every pod (the kubelet's --cgroups-per-qos=false), where the agent sets no
// pod-level limits.
func Parent(root string, p *corev1.Pod, perQOS bool) string {
	if !perQOS {
		return path.Join("/", root, "pod"+string(p.UID))
	}
	return PodParent(root, podqos.Of(p), string(p.UID))
}

// parents are the places a pod's cgroup may be under root, whatever its class.
func parents(root, uid string) []string {
	return []string{PodParent(root, corev1.PodQOSGuaranteed, uid), PodParent(root, corev1.PodQOSBurstable, uid),
		PodParent(root, corev1.PodQOSBestEffort, uid)}
}

// Find is the pod's cgroup directory under the hierarchy mounted at m, in whichever tier it
// is; "" if it is in none.
func Find(m, root, uid string) string {
	for _, p := range parents(root, uid) {
		if _, err := os.Stat(filepath.Join(m, p)); err == nil {
			return filepath.Join(m, p)
		}
	}
	return ""
}

// PodResources are the limits of one pod's cgroup, as the kubelet's ResourceConfigForPod
// makes them: the pod's CPU weight from its requests, a CFS quota and a memory limit only
// where every container declares one (for a Burstable pod; a Guaranteed pod always has both),
// and the per-pod PID limit.
type PodResources struct {
	// CPUShares is the pod's CPU weight (cgroup v1 shares; cgroup v2's cpu.weight from them).
	CPUShares uint64
	// CPUQuota is µs of CPU per CPUPeriod; 0 sets no quota.
	CPUQuota int64
	// Memory caps the pod's memory in bytes; 0 sets no limit.
	Memory int64
	// PIDs caps the pod's tasks; 0 sets no limit.
	PIDs int64
}

// QuotaFromMilliCPU is the CFS quota (µs per CPUPeriod) for a CPU limit, as the kubelet
// converts it: 0 for none, at least 1000 µs.
func QuotaFromMilliCPU(milli int64) int64 {
	if milli <= 0 {
		return 0
	}
	return max(milli*CPUPeriod/1000, minQuota)
}

// PodPolicy is the node's settings that shape every pod's limits.
type PodPolicy struct {
	// MaxPIDs is the per-pod PID limit (--pod-max-pids; 0 or less for none).
	MaxPIDs int64
	// NoCFSQuota leaves CPU limits unenforced (the kubelet's --cpu-cfs-quota=false): no CFS
	// quota on the pod's cgroup or its containers', so a pod is never throttled, at the cost
	// of its limits; latency-sensitive network functions often run so.
	NoCFSQuota bool
}

// ResourcesForPod is the pod cgroup's limits: the sums of its containers' requests and
// limits (init containers and sidecars counted as the scheduler counts them, the runtime
// class's overhead added, pod-level resources where the spec sets them), by its QoS class.
func ResourcesForPod(p *corev1.Pod, policy PodPolicy) PodResources {
	var r PodResources
	if policy.MaxPIDs > 0 {
		r.PIDs = policy.MaxPIDs
	}
	qos := podqos.Of(p)
	if qos == corev1.PodQOSBestEffort {
		r.CPUShares = SharesFromMilliCPU(0)
		return r
	}
	requests := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})
	cpuDeclared, memoryDeclared := true, true
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range list {
			cpuDeclared = cpuDeclared && nonZero(c.Resources.Limits, corev1.ResourceCPU)
			memoryDeclared = memoryDeclared && nonZero(c.Resources.Limits, corev1.ResourceMemory)
		}
	}
	if resourcehelper.IsPodLevelResourcesSet(p) {
		cpuDeclared = cpuDeclared || nonZero(p.Spec.Resources.Limits, corev1.ResourceCPU)
		memoryDeclared = memoryDeclared || nonZero(p.Spec.Resources.Limits, corev1.ResourceMemory)
	}
	cpuRequest, cpuLimit, memoryLimit := requests[corev1.ResourceCPU], limits[corev1.ResourceCPU], limits[corev1.ResourceMemory]
	r.CPUShares = SharesFromMilliCPU(cpuRequest.MilliValue())
	if (qos == corev1.PodQOSGuaranteed || cpuDeclared) && !policy.NoCFSQuota {
		r.CPUQuota = QuotaFromMilliCPU(cpuLimit.MilliValue())
	}
	if qos == corev1.PodQOSGuaranteed || memoryDeclared {
		r.Memory = memoryLimit.Value()
	}
	return r
}

// nonZero reports whether the list sets a non-zero amount of the resource.
func nonZero(l corev1.ResourceList, name corev1.ResourceName) bool {
	q, ok := l[name]
	return ok && !q.IsZero()
}

// BurstableShares is the burstable tier's CPU weight: the sum of its pods' CPU requests.
func BurstableShares(pods []*corev1.Pod) uint64 {
	var milli int64
	for _, p := range pods {
		if podqos.Of(p) == corev1.PodQOSBurstable {
			cpu := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[corev1.ResourceCPU]
			milli += cpu.MilliValue()
		}
	}
	return SharesFromMilliCPU(milli)
}

// podSettings are r's interface files, cgroup v1's and v2's alike.
func podSettings(r PodResources) []setting {
	memory, v1Memory := "max", "-1"
	if r.Memory > 0 {
		memory = strconv.FormatInt(r.Memory, 10)
		v1Memory = memory
	}
	pids := "max"
	if r.PIDs > 0 {
		pids = strconv.FormatInt(r.PIDs, 10)
	}
	quota, v1Quota := "max", "-1"
	if r.CPUQuota > 0 {
		quota = strconv.FormatInt(r.CPUQuota, 10)
		v1Quota = quota
	}
	period := strconv.Itoa(CPUPeriod)
	shares := r.CPUShares
	if shares == 0 {
		shares = SharesFromMilliCPU(0)
	}
	return append(shareSettings(shares),
		// v1 takes the period before the quota: a quota is checked against the period it is for.
		setting{"cpu.cfs_period_us", period}, setting{"cpu.cfs_quota_us", v1Quota}, setting{"cpu.max", quota + " " + period},
		setting{"memory.limit_in_bytes", v1Memory}, setting{"memory.max", memory},
		setting{"pids.max", pids},
	)
}

// ApplyPod creates the pod's cgroup (parent, from PodParent) in every hierarchy and writes
// r's limits, enabling cgroup v2's controllers down to it. With loosenOnly it writes only
// the limits that are higher than (or lift) the ones in place, and the weights: a pod being
// resized gets its larger limits before its containers' (cgroup v1 refuses a child's CPU
// quota above its parent's) and its smaller ones after (call again without loosenOnly).
func ApplyPod(mounts []string, parent string, r PodResources, loosenOnly bool) error {
	var errs []error
	for _, m := range mounts {
		if isUnified(m) {
			if err := enableControllers(m, parent); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		dir := filepath.Join(m, parent)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		_, err := writeSettings(dir, podSettings(r), loosenOnly)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// looser reports whether writing next over cur would raise (or lift) a limit, or is a weight
// or period, which no child's setting is checked against.
func looser(file, cur, next string) bool {
	switch file {
	case "cpu.shares", "cpu.weight", "cpu.cfs_period_us":
		return true
	case "cpu.max":
		cur, _, _ = strings.Cut(cur, " ")
		next, _, _ = strings.Cut(next, " ")
	}
	return limitValue(next) > limitValue(cur)
}

// limitValue reads a limit file's value, "max" and negative (v1's -1) being unlimited.
func limitValue(v string) uint64 {
	if v == "max" {
		return ^uint64(0)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		u, uerr := strconv.ParseUint(v, 10, 64)
		if uerr != nil {
			return 0
		}
		return u
	}
	if n < 0 {
		return ^uint64(0)
	}
	return uint64(n)
}

// EnsureQOS creates the burstable and besteffort tiers under root in every hierarchy and sets
// their CPU weights: the kernel's least for BestEffort pods, the sum of the Burstable pods'
// requests (BurstableShares) for those.
func EnsureQOS(mounts []string, root string, burstableShares uint64) error {
	var errs []error
	for _, t := range []struct {
		dir    string
		shares uint64
	}{{BurstableTier, burstableShares}, {BestEffortTier, SharesFromMilliCPU(0)}} {
		dir := path.Join("/", root, t.dir)
		for _, m := range mounts {
			if isUnified(m) {
				// Down to the root, so the tier has the cpu interface (ApplyPod enables them
				// in the tier itself for its pods).
				if err := enableControllers(m, dir); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			if err := os.MkdirAll(filepath.Join(m, dir), 0o755); err != nil {
				errs = append(errs, err)
				continue
			}
			_, err := writeSettings(filepath.Join(m, dir), shareSettings(t.shares), false)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
