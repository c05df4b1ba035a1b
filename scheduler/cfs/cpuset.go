package cfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"temper.codes/temper-train/internal/mountinfo"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/machine"
)

// DefaultCgroupRoot is where the cgroup hierarchies are mounted.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// Cpuset is one cgroup whose cpuset.cpus the backend narrowed to keep its
// tasks off the exclusive CPUs, the way the kubelet's static CPU manager
// keeps other pods off a Guaranteed pod's cores.
type Cpuset struct {
	Path     string `json:"path"`     // the cgroup's directory
	Original string `json:"original"` // cpuset.cpus before ("" on v2: inherited from the parent)
	Set      string `json:"set"`      // what the backend wrote
}

// cpusets finds the cpuset hierarchy below root: the v1 cpuset hierarchy
// (root/cpuset), or the v2 hierarchy (root) when it offers the cpuset
// controller. ok is false when neither exists.
func cpusets(root string) (dir string, v2, ok bool) {
	if _, err := os.Stat(filepath.Join(root, "cpuset", "cpuset.cpus")); err == nil {
		return filepath.Join(root, "cpuset"), false, true
	}
	if b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil && slices.Contains(strings.Fields(string(b)), "cpuset") {
		return root, true, true
	}
	return "", false, false
}

// narrowCpusets plans which cgroups below scope (in the cpuset hierarchy
// dir) lose the CPUs in owned: every cgroup that is neither the hierarchy's
// root (which cannot be narrowed), nor holds a thread of the target, nor is
// an ancestor of one (narrowing it would narrow the target), nor already
// recorded in done. Children come before their parents: v1 requires a
// child's CPUs to lie within its parent's. A cgroup left with no CPU is
// not narrowed (note says so).
func narrowCpusets(dir, scope string, v2 bool, owned []int, keep map[string]bool, done map[string]bool, note func(string)) ([]Cpuset, error) {
	var dirs []string
	err := filepath.WalkDir(scope, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if d.IsDir() && p != dir && !keep[p] && !done[p] {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cpusets below %s: %w", scope, err)
	}
	slices.SortStableFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var out []Cpuset
	for _, d := range dirs {
		cur, err := readCpus(d, "cpuset.cpus")
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, err
		}
		base := cur
		if v2 && cur == "" {
			if base, err = readCpus(d, "cpuset.cpus.effective"); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return nil, err
			}
		}
		cpus, err := machine.ParseCPUList(base)
		if err != nil {
			return nil, fmt.Errorf("%s/cpuset.cpus: %w", d, err)
		}
		left := slices.DeleteFunc(slices.Clone(cpus), func(c int) bool { return slices.Contains(owned, c) })
		switch {
		case len(left) == len(cpus):
			continue
		case len(left) == 0:
			note(fmt.Sprintf("cfs: cgroup %s may only use exclusive CPUs %s: left as it is", d, base))
			continue
		}
		out = append(out, Cpuset{Path: d, Original: cur, Set: machine.FormatCPUList(left)})
	}
	return out, nil
}

// keptCgroups returns the cpuset cgroup directories of the threads and all
// their ancestors up to dir.
func keptCgroups(dir string, v2 bool, threads []Record) map[string]bool {
	keep := map[string]bool{}
	for _, th := range threads {
		cg, err := procfs.FS{}.TaskCgroup(th.Tgid, th.Tid)
		if err != nil {
			continue
		}
		p := cg.V2
		if !v2 {
			p = cg.V1["cpuset"]
		}
		for d := filepath.Join(dir, p); strings.HasPrefix(d, dir); d = filepath.Dir(d) {
			keep[d] = true
			if d == dir {
				break
			}
		}
	}
	return keep
}

func readCpus(dir, file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// setCpus writes a cgroup's cpuset.cpus.
func setCpus(dir, cpus string) error {
	if err := os.WriteFile(filepath.Join(dir, "cpuset.cpus"), []byte(cpus), 0); err != nil {
		return fmt.Errorf("cgroup %s: set cpuset.cpus %q: %w", dir, cpus, err)
	}
	return nil
}

// restoreCpuset puts one narrowed cgroup back. A cgroup that is gone needs
// nothing; one whose cpuset someone changed since is not touched (note
// says so), as a reused tid is not.
func restoreCpuset(c Cpuset, note func(string)) error {
	cur, err := readCpus(c.Path, "cpuset.cpus")
	if errors.Is(err, fs.ErrNotExist) {
		// Short-lived cgroups (a benchmark's, refine's spinners') come and
		// go while a profile is applied; saying so at every revert is noise.
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore cgroup %s: %w", c.Path, err)
	}
	if !sameCpus(cur, c.Set) {
		note(fmt.Sprintf("cgroup %s: cpuset.cpus is %q, not the %q apply set: changed since, not touched", c.Path, cur, c.Set))
		return nil
	}
	return setCpus(c.Path, c.Original)
}

func sameCpus(a, b string) bool {
	x, err1 := machine.ParseCPUList(a)
	y, err2 := machine.ParseCPUList(b)
	return err1 == nil && err2 == nil && slices.Equal(x, y)
}

// restoreCpusets restores cs in reverse order (parents before children)
// and returns those that failed, in their original order.
func restoreCpusets(cs []Cpuset, note func(string)) ([]Cpuset, error) {
	var errs []error
	var failed []Cpuset
	for i := len(cs) - 1; i >= 0; i-- {
		if err := restoreCpuset(cs[i], note); err != nil {
			errs = append(errs, err)
			failed = append([]Cpuset{cs[i]}, failed...)
		}
	}
	return failed, errors.Join(errs...)
}

// ErrNotCpusetPath is wrapped when a state file names a cgroup that does not
// lie in a cpuset hierarchy: a damaged or hostile state file must not make a
// revert write into some other file.
var ErrNotCpusetPath = errors.New("not a cgroup in a cpuset hierarchy")

// checkCpusetPaths checks, before anything is written, that every path in cs
// is an absolute, clean directory path whose mount (the longest mount point
// containing it, after symbolic links) is a cgroup v1 hierarchy with the
// cpuset controller or a cgroup v2 hierarchy offering it.
func checkCpusetPaths(cs []Cpuset, mounts []mountinfo.Mount) error {
	for _, c := range cs {
		p := c.Path
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return fmt.Errorf("cgroup %q: %w (not an absolute, clean path)", p, ErrNotCpusetPath)
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		m, ok := mountOf(p, mounts)
		switch {
		case !ok:
			return fmt.Errorf("cgroup %s: %w (no mount holds it)", c.Path, ErrNotCpusetPath)
		case m.FSType == "cgroup" && slices.Contains(m.SuperOptions, "cpuset"):
		case m.FSType == "cgroup2" && hasController(m.MountPoint, "cpuset"):
		default:
			return fmt.Errorf("cgroup %s: %w (it is on %s mounted at %s)", c.Path, ErrNotCpusetPath, m.FSType, m.MountPoint)
		}
	}
	return nil
}

// mountOf returns the mount whose mount point is the longest prefix of p.
func mountOf(p string, mounts []mountinfo.Mount) (mountinfo.Mount, bool) {
	var best mountinfo.Mount
	found := false
	for _, m := range mounts {
		mp := m.MountPoint
		if p != mp && !strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/") {
			continue
		}
		if !found || len(mp) >= len(best.MountPoint) { // later mounts hide earlier ones
			best, found = m, true
		}
	}
	return best, found
}

// hasController reports whether the cgroup v2 hierarchy at root offers the
// controller.
func hasController(root, controller string) bool {
	b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	return err == nil && slices.Contains(strings.Fields(string(b)), controller)
}
