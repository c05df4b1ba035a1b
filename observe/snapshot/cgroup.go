package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/internal/mountinfo"
	"temper.codes/temper-train/internal/procfs"
)

// CgroupRecord is one cgroup of the target, read at the beginning and at the
// end of the trace. On a cgroup v1 "hybrid" host the target has a cgroup in
// the v1 cpu hierarchy (which enforces its CPU limits) and one in the unified
// v2 hierarchy (which only accounts usage); both are recorded, and
// Snapshot.CPUCgroup picks the one that governs CPU.
type CgroupRecord struct {
	Version int    `json:"version"` // 1 or 2
	Path    string `json:"path"`    // the cgroup directory, e.g. /sys/fs/cgroup/cpu/kubepods/pod1
	// CPUAcctPath is the v1 cpuacct directory holding the usage counters;
	// it equals Path when cpu and cpuacct are mounted together, and is empty
	// for v2 or when the target has no cpuacct cgroup.
	CPUAcctPath string `json:"cpuacct_path,omitempty"`
	// Source says where the path came from: "option" when the caller named
	// the cgroup, "process" when it is the cgroup of the first tgid.
	Source string `json:"source"`

	Begin *CgroupCPU `json:"begin"` // nil when it could not be read (see Warnings)
	End   *CgroupCPU `json:"end"`   // nil before End, or when it could not be read
}

// CgroupCPU is the CPU state of a cgroup at one moment, normalised across
// cgroup v1 and v2; internal/cgroup reads it, for the rig's quota parity
// readings too.
type CgroupCPU = cgroup.CPU

// Bandwidth is a CFS bandwidth limit (cgroup.Bandwidth).
type Bandwidth = cgroup.Bandwidth

// CPUDelta is how a cgroup's counters moved between two readings
// (cgroup.CPUDelta).
type CPUDelta = cgroup.CPUDelta

// CgroupDir names a cgroup directory and its hierarchy version, which is
// what ReadCgroupCPU needs to know which files to read.
type CgroupDir struct {
	Version     int    // 1 or 2
	Path        string // the cgroup's directory
	CPUAcctPath string // v1 only: the cpuacct directory, "" if none
}

// ReadCgroupCPU reads the CPU files of one cgroup (cgroup.ReadCPUFiles). It
// records what exists: a missing file is noted in Missing, not an error. It
// fails when the cgroup directory itself is gone or a file that exists
// cannot be parsed.
func ReadCgroupCPU(d CgroupDir) (*CgroupCPU, error) {
	return cgroup.ReadCPUFiles(d.Version, d.Path, d.CPUAcctPath)
}

// Delta is r.End.Sub(r.Begin).
func (r *CgroupRecord) Delta() (CPUDelta, error) {
	d, err := r.End.Sub(r.Begin)
	if err != nil {
		return CPUDelta{}, fmt.Errorf("%s: %w", r.Path, err)
	}
	return d, nil
}

// cgroupMount is one mounted cgroup hierarchy.
type cgroupMount struct {
	Dir         string   // mount point
	Root        string   // the hierarchy path mounted there ("/" normally)
	Version     int      // 1 or 2
	Controllers []string // v1 only
}

// cgroupMounts are the cgroup hierarchies visible to this process.
type cgroupMounts []cgroupMount

// newCgroupMounts picks the cgroup hierarchies out of a mount table.
func newCgroupMounts(all []mountinfo.Mount) cgroupMounts {
	var out cgroupMounts
	for _, mi := range all {
		m := cgroupMount{Root: mi.Root, Dir: mi.MountPoint}
		switch mi.FSType {
		case "cgroup2":
			m.Version = 2
		case "cgroup":
			m.Version = 1
			for _, o := range mi.SuperOptions {
				if o != "rw" && o != "ro" && !strings.Contains(o, "=") {
					m.Controllers = append(m.Controllers, o)
				}
			}
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// v2 returns the cgroup2 mount, if any.
func (ms cgroupMounts) v2() (cgroupMount, bool) {
	return ms.find(func(m cgroupMount) bool { return m.Version == 2 })
}

// v1 returns the v1 mount holding controller c, if any.
func (ms cgroupMounts) v1(c string) (cgroupMount, bool) {
	return ms.find(func(m cgroupMount) bool {
		return m.Version == 1 && slices.Contains(m.Controllers, c)
	})
}

// find returns the first mount that matches, preferring one that mounts the
// hierarchy root over bind mounts of a subtree.
func (ms cgroupMounts) find(match func(cgroupMount) bool) (cgroupMount, bool) {
	var found *cgroupMount
	for i := range ms {
		if !match(ms[i]) {
			continue
		}
		if found == nil || (found.Root != "/" && ms[i].Root == "/") {
			found = &ms[i]
		}
	}
	if found == nil {
		return cgroupMount{}, false
	}
	return *found, true
}

// join returns the directory of hierarchy path p under this mount, or false
// when the mount does not show p.
func (m cgroupMount) join(p string) (string, bool) {
	if m.Root == "/" {
		return filepath.Join(m.Dir, p), true
	}
	if p == m.Root {
		return m.Dir, true
	}
	if rel, ok := strings.CutPrefix(p, m.Root+"/"); ok {
		return filepath.Join(m.Dir, rel), true
	}
	return "", false
}

// containing returns the mount whose mount point holds dir (the deepest one).
func (ms cgroupMounts) containing(dir string) (cgroupMount, string, bool) {
	var best cgroupMount
	var rel string
	found := false
	for _, m := range ms {
		r, err := filepath.Rel(m.Dir, dir)
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			continue
		}
		if !found || len(m.Dir) > len(best.Dir) {
			best, rel, found = m, r, true
		}
	}
	return best, rel, found
}

// resolveCgroupOption turns the caller's cgroup directory into a record.
func (ms cgroupMounts) resolveCgroupOption(dir string) (CgroupRecord, error) {
	if !filepath.IsAbs(dir) {
		return CgroupRecord{}, fmt.Errorf("cgroup %q: not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	m, rel, ok := ms.containing(dir)
	if !ok {
		return CgroupRecord{}, fmt.Errorf("cgroup %s: not under a mounted cgroup hierarchy", dir)
	}
	rec := CgroupRecord{Version: m.Version, Path: dir, Source: "option"}
	if m.Version == 2 {
		return rec, nil
	}
	if !slices.Contains(m.Controllers, "cpu") {
		return CgroupRecord{}, fmt.Errorf("cgroup %s: in the v1 hierarchy of %s, which has no cpu controller", dir, strings.Join(m.Controllers, ","))
	}
	if slices.Contains(m.Controllers, "cpuacct") {
		rec.CPUAcctPath = dir
	} else if am, ok := ms.v1("cpuacct"); ok {
		if p, ok := am.join(filepath.Join(m.Root, rel)); ok && isDir(p) {
			rec.CPUAcctPath = p
		}
	}
	return rec, nil
}

// resolveProcessCgroups returns the records of the cgroups that
// /proc/<pid>/cgroup content names: the v1 cpu cgroup first, then v2.
func (ms cgroupMounts) resolveProcessCgroups(procCgroup []byte) ([]CgroupRecord, []string, error) {
	cg, err := procfs.ParseCgroup(procCgroup)
	if err != nil {
		return nil, nil, err
	}
	v1, v2 := cg.V1, cg.V2
	var recs []CgroupRecord
	var warns []string
	if p, ok := v1["cpu"]; ok {
		if m, ok := ms.v1("cpu"); !ok {
			warns = append(warns, fmt.Sprintf("cgroup: v1 cpu hierarchy path %s is not mounted", p))
		} else if dir, ok := m.join(p); !ok {
			warns = append(warns, fmt.Sprintf("cgroup: v1 cpu cgroup %s is outside the mount %s", p, m.Dir))
		} else {
			rec := CgroupRecord{Version: 1, Path: dir, Source: "process"}
			if ap, ok := v1["cpuacct"]; ok {
				if am, ok := ms.v1("cpuacct"); ok {
					if adir, ok := am.join(ap); ok {
						rec.CPUAcctPath = adir
					}
				}
			}
			recs = append(recs, rec)
		}
	}
	if v2 != "" {
		if m, ok := ms.v2(); !ok {
			warns = append(warns, fmt.Sprintf("cgroup: v2 path %s but no cgroup2 mount", v2))
		} else if dir, ok := m.join(v2); !ok {
			warns = append(warns, fmt.Sprintf("cgroup: v2 cgroup %s is outside the mount %s", v2, m.Dir))
		} else {
			recs = append(recs, CgroupRecord{Version: 2, Path: dir, Source: "process"})
		}
	}
	return recs, warns, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
