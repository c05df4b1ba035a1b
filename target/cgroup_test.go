package target

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/mountinfo"
)

// TestCgroupMounts checks the cgroup view of mount tables (their parsing is
// tested in internal/mountinfo).
func TestCgroupMounts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mountinfo string
		roots     []string // defaultCgroupRoots
	}{
		{
			name: "hybrid v1 and v2 (this project's machines)",
			mountinfo: `22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`,
			roots: []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/systemd"},
		},
		{
			name:      "pure v2",
			mountinfo: "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			roots:     []string{"/sys/fs/cgroup"},
		},
		{
			name: "v1 only, cpu and cpuacct co-mounted, optional fields, escaped space",
			mountinfo: `25 24 0:22 / /sys/fs/cgroup/systemd rw,nosuid shared:5 master:2 - cgroup cgroup rw,xattr,name=systemd
28 24 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:10 - cgroup cgroup rw,cpu,cpuacct
29 24 0:26 / /sys/fs/cgroup/cpuset rw,nosuid shared:11 - cgroup cgroup rw,cpuset
50 24 0:40 / /mnt/my\040cgroups rw - cgroup cgroup rw,cpu,cpuacct
`,
			roots: []string{"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/systemd"},
		},
		{
			name:      "no cgroups",
			mountinfo: "22 1 0:21 / /sys rw - sysfs sysfs rw\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, err := mountinfo.Parse(strings.NewReader(tc.mountinfo))
			if err != nil {
				t.Fatal(err)
			}
			if got := defaultCgroupRoots(cgroupMounts(all)); !slices.Equal(got, tc.roots) {
				t.Errorf("roots = %q, want %q", got, tc.roots)
			}
		})
	}
	all, err := mountinfo.Parse(strings.NewReader(`50 24 0:40 / /mnt/my\040cgroups rw - cgroup cgroup rw,cpu,cpuacct` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if mounts := cgroupMounts(all); len(mounts) != 1 || mounts[0].Dir != "/mnt/my cgroups" || !mounts[0].has("cpuacct") {
		t.Errorf("escaped mount = %+v", mounts)
	}
}

// TestDefaultRootsOnThisMachine checks that the default roots are the real
// cgroup mounts of this machine: the resolver looks at the real hierarchies
// unless told otherwise.
func TestDefaultRootsOnThisMachine(t *testing.T) {
	roots, err := cgroupRoots(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range roots {
		if v, err := cgroupVersion(r); err != nil || v == 0 {
			t.Errorf("default root %s: version %d, %v; want a cgroup mount", r, v, err)
		}
	}
	if v, _ := cgroupVersion(roots[0]); v != 2 && len(roots) > 1 {
		if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil {
			t.Errorf("first root %s is not the cgroup2 mount", roots[0])
		}
	}
}

// TestResolveCgroup resolves real cgroups, in the v2 hierarchy and the v1
// cpu hierarchy, holding real processes.
func TestResolveCgroup(t *testing.T) {
	roots := newCgroupTestRoots(t)
	for _, version := range []int{2, 1} {
		t.Run("v"+strconv.Itoa(version), func(t *testing.T) {
			base := roots.root(t, version)
			// Distinct names per version, so a lookup relative to the
			// machine's default roots can only find this version's.
			app := mkCgroup(t, filepath.Join(base, "app-v"+strconv.Itoa(version)))
			worker := mkCgroup(t, filepath.Join(app, "worker"))
			empty := mkCgroup(t, filepath.Join(base, "empty"))
			mkCgroup(t, filepath.Join(empty, "child"))
			pApp := startSleep(t, app)
			pWorker := startSleep(t, worker)
			both := []int{pApp, pWorker}
			slices.Sort(both)
			rel := func(dir string) string { // relative to the machine's mount
				return strings.TrimPrefix(dir, filepath.Dir(base)+"/")
			}

			for _, tc := range []struct {
				name   string
				path   string
				roots  []string
				dir    string
				tgids  []int
				errIs  error
				errHas []string
			}{
				{name: "absolute, with a child cgroup", path: app, dir: app, tgids: both},
				{name: "absolute leaf", path: worker, dir: worker, tgids: []int{pWorker}},
				{name: "unclean absolute", path: app + "//worker/", dir: worker, tgids: []int{pWorker}},
				{name: "relative to the default roots", path: rel(app), dir: app, tgids: both},
				{name: "hierarchy path with leading slash", path: "/" + rel(worker), dir: worker, tgids: []int{pWorker}},
				{name: "relative to given roots", path: "app-v" + strconv.Itoa(version) + "/worker", roots: []string{base}, dir: worker, tgids: []int{pWorker}},
				{name: "empty subtree", path: empty, errIs: ErrNothingMatched, errHas: []string{empty, "nothing matched"}},
				{name: "missing absolute", path: filepath.Join(base, "nope"), errIs: ErrNotFound, errHas: []string{filepath.Join(base, "nope"), "does not exist"}},
				{name: "missing relative", path: "nope/x", roots: []string{base}, errIs: ErrNotFound, errHas: []string{"tried " + filepath.Join(base, "nope/x")}},
				{name: "not a cgroup", path: t.TempDir(), errIs: ErrNotFound, errHas: []string{"not a cgroup directory"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					tgt, err := Resolve(context.Background(), Spec{Cgroup: tc.path, CgroupRoots: tc.roots})
					if tc.errIs != nil {
						checkErr(t, err, tc.errIs, tc.errHas...)
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if tgt.Kind != KindCgroup || tgt.Cgroup != tc.dir || tgt.CgroupVersion != version || !slices.Equal(tgt.Tgids, tc.tgids) {
						t.Errorf("got %s %s v%d tgids %v, want cgroup %s v%d tgids %v", tgt.Kind, tgt.Cgroup, tgt.CgroupVersion, tgt.Tgids, tc.dir, version, tc.tgids)
					}
				})
			}

			// Refresh follows processes moving in and out of the subtree.
			tgt, err := Resolve(context.Background(), Spec{Cgroup: app})
			if err != nil {
				t.Fatal(err)
			}
			sub := mkCgroup(t, filepath.Join(worker, "late"))
			pLate := startSleep(t, sub)
			want := append(slices.Clone(both), pLate)
			slices.Sort(want)
			waitTgids(t, tgt, want)
			if err := os.WriteFile(filepath.Join(empty, "cgroup.procs"), []byte(strconv.Itoa(pWorker)), 0o644); err != nil {
				t.Fatal(err)
			}
			want = slices.DeleteFunc(want, func(p int) bool { return p == pWorker })
			waitTgids(t, tgt, want)
		})
	}
}
