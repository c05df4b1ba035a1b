package cfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/profiles"
)

// RTRuntimeOf says whether process pid's threads may run SCHED_RR as far
// as RT group scheduling goes, for profiles.LintOptions.RTRuntime. With
// CONFIG_RT_GROUP_SCHED the kernel refuses an RT policy (EPERM) to a
// thread whose cgroup in the v1 cpu hierarchy has cpu.rt_runtime_us 0,
// which is every new cgroup's default; a child cgroup's runtime is bounded
// by its parent's, so the pod cgroup and each of its ancestors must have
// some. On a host without the v1 cpu hierarchy (cgroup v2), or without RT
// group scheduling (no cpu.rt_runtime_us), or for a process in the root
// cpu cgroup (bounded by the kernel's global budget only), RT is allowed.
// cgroupRoot is where the hierarchies are mounted (DefaultCgroupRoot when
// empty). The kernel's global RT throttling (sched_rt_runtime_us) is
// Apply's check, not this one.
func RTRuntimeOf(cgroupRoot string, pid int) (profiles.RTRuntime, error) {
	if cgroupRoot == "" {
		cgroupRoot = DefaultCgroupRoot
	}
	cg, err := procfs.FS{}.Cgroup(pid)
	if err != nil {
		return profiles.RTRuntime{}, fmt.Errorf("RT runtime of process %d: %w", pid, err)
	}
	return rtRuntime(filepath.Join(cgroupRoot, "cpu"), cg)
}

// rtRuntime decides for a task in cgroups cg, with the v1 cpu hierarchy
// mounted at hier.
func rtRuntime(hier string, cg procfs.Cgroups) (profiles.RTRuntime, error) {
	yes := func(why string) (profiles.RTRuntime, error) {
		return profiles.RTRuntime{Checked: true, Available: true, Why: why}, nil
	}
	p, ok := cg.V1["cpu"]
	if !ok {
		return yes("no cgroup v1 cpu hierarchy, so no RT group scheduling")
	}
	if _, err := os.Stat(filepath.Join(hier, "cpu.rt_runtime_us")); errors.Is(err, fs.ErrNotExist) {
		return yes("the kernel has no RT group scheduling (no cpu.rt_runtime_us)")
	} else if err != nil {
		return profiles.RTRuntime{}, fmt.Errorf("RT runtime: %w", err)
	}
	p = path.Clean("/" + p)
	if p == "/" {
		return yes("the root cpu cgroup runs RT threads within the kernel's global budget")
	}
	// From the root down, so that the message names the topmost cgroup
	// without runtime: that is the one to give some first.
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		cgroup := "/" + strings.Join(parts[:i+1], "/")
		b, err := os.ReadFile(filepath.Join(hier, cgroup, "cpu.rt_runtime_us"))
		if err != nil {
			return profiles.RTRuntime{}, fmt.Errorf("RT runtime of cgroup %s: %w", cgroup, err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return profiles.RTRuntime{}, fmt.Errorf("RT runtime of cgroup %s: %q: %w", cgroup, b, err)
		}
		if v == 0 {
			return profiles.RTRuntime{Checked: true, Why: fmt.Sprintf("cgroup %s (cpu hierarchy) has cpu.rt_runtime_us 0", cgroup)}, nil
		}
	}
	return yes("cgroup " + p + " and its ancestors have RT runtime")
}
