package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/mountinfo"
	"temper.codes/temper-train/internal/need"
)

func i64(v int64) *int64 { return &v }

func dump(c *CgroupCPU) string {
	var b bytes.Buffer
	(&Snapshot{Cgroups: []CgroupRecord{{Begin: c}}}).Write(&b)
	return b.String()
}

// TestCgroupDelta checks that a record's delta names its cgroup (the
// counters' arithmetic is tested in internal/cgroup).
func TestCgroupDelta(t *testing.T) {
	b := &CgroupCPU{Version: 2, UsageNs: i64(100)}
	d, err := (&CgroupRecord{Path: "/x", Begin: b, End: &CgroupCPU{Version: 2, UsageNs: i64(350)}}).Delta()
	if err != nil || d.UsageNs == nil || *d.UsageNs != 250 {
		t.Fatalf("delta %v, %v; want usage 250ns", d, err)
	}
	if _, err := (&CgroupRecord{Path: "/x", Begin: b}).Delta(); err == nil || !strings.Contains(err.Error(), "/x") {
		t.Errorf("err = %v, want it to mention /x", err)
	}
}

// hybridMountinfo is this kind of host: v1 controllers each on their own
// mount, cgroup2 at /sys/fs/cgroup/unified.
const hybridMountinfo = `22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

// systemdMountinfo is the usual systemd v1 layout: cpu and cpuacct share a
// mount, and a bind mount of a subtree appears first.
const systemdMountinfo = `30 22 0:27 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755
90 30 0:31 /kubepods /mnt/kube\040pods rw - cgroup cgroup rw,cpu,cpuacct
34 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw shared:15 - cgroup cgroup rw,cpu,cpuacct
35 30 0:32 / /sys/fs/cgroup/memory rw shared:16 - cgroup cgroup rw,memory
`

const unifiedMountinfo = `25 22 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`

// cgroupMountsOf parses mountinfo text into the cgroup view.
func cgroupMountsOf(t *testing.T, text string) cgroupMounts {
	t.Helper()
	all, err := mountinfo.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return newCgroupMounts(all)
}

// TestCgroupMounts checks the cgroup view of mount tables (their parsing is
// tested in internal/mountinfo).
func TestCgroupMounts(t *testing.T) {
	ms := cgroupMountsOf(t, hybridMountinfo)
	if len(ms) != 5 {
		t.Fatalf("%d cgroup mounts, want 5: %+v", len(ms), ms)
	}
	if m, ok := ms.v1("cpu"); !ok || m.Dir != "/sys/fs/cgroup/cpu" {
		t.Errorf("v1 cpu: %+v %v", m, ok)
	}
	if m, ok := ms.v2(); !ok || m.Dir != "/sys/fs/cgroup/unified" {
		t.Errorf("v2: %+v %v", m, ok)
	}
	if _, ok := ms.v1("systemd"); ok {
		t.Error("name=systemd taken for a controller")
	}

	ms = cgroupMountsOf(t, systemdMountinfo)
	if m, ok := ms.v1("cpuacct"); !ok || m.Dir != "/sys/fs/cgroup/cpu,cpuacct" || m.Root != "/" {
		t.Errorf("v1 cpuacct: %+v %v; want the root mount preferred over the bind mount", m, ok)
	}
	if ms[0].Dir != "/mnt/kube pods" || ms[0].Root != "/kubepods" {
		t.Errorf("escaped mount %+v", ms[0])
	}
	if dir, ok := ms[0].join("/kubepods/pod1"); !ok || dir != "/mnt/kube pods/pod1" {
		t.Errorf("join through a subtree mount: %q %v", dir, ok)
	}
	if _, ok := ms[0].join("/system.slice"); ok {
		t.Error("join outside a subtree mount succeeded")
	}
	if _, ok := ms.v2(); ok {
		t.Error("v2 found in a v1-only mountinfo")
	}
}

func TestResolveCgroups(t *testing.T) {
	// The cpuacct twin of an option path must exist to be used.
	tmp := t.TempDir()
	os.MkdirAll(filepath.Join(tmp, "cpuacct/kubepods/pod1"), 0o755)
	hybrid := strings.ReplaceAll(hybridMountinfo, "/sys/fs/cgroup", tmp)
	tests := []struct {
		name      string
		mountinfo string
		option    string
		proc      string
		want      []CgroupRecord
		warn      string
		err       string
	}{
		{
			name: "hybrid process", mountinfo: hybridMountinfo,
			proc: "2:cpuacct:/kubepods/pod1\n1:cpu:/kubepods/pod1\n0::/\n",
			want: []CgroupRecord{
				{Version: 1, Path: "/sys/fs/cgroup/cpu/kubepods/pod1", CPUAcctPath: "/sys/fs/cgroup/cpuacct/kubepods/pod1", Source: "process"},
				{Version: 2, Path: "/sys/fs/cgroup/unified", Source: "process"},
			},
		},
		{
			name: "systemd process", mountinfo: systemdMountinfo,
			proc: "3:cpu,cpuacct:/kubepods/pod1\n",
			want: []CgroupRecord{{Version: 1, Path: "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1", CPUAcctPath: "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1", Source: "process"}},
		},
		{
			name: "unified process", mountinfo: unifiedMountinfo,
			proc: "0::/kubepods.slice/pod1.slice\n",
			want: []CgroupRecord{{Version: 2, Path: "/sys/fs/cgroup/kubepods.slice/pod1.slice", Source: "process"}},
		},
		{
			name: "v1 cpu not mounted", mountinfo: unifiedMountinfo,
			proc: "1:cpu:/x\n0::/y\n",
			want: []CgroupRecord{{Version: 2, Path: "/sys/fs/cgroup/y", Source: "process"}},
			warn: "not mounted",
		},
		{
			name: "option v1 with separate cpuacct", mountinfo: hybrid, option: tmp + "/cpu/kubepods/pod1",
			want: []CgroupRecord{{Version: 1, Path: tmp + "/cpu/kubepods/pod1", CPUAcctPath: tmp + "/cpuacct/kubepods/pod1", Source: "option"}},
		},
		{
			name: "option v1 without cpuacct twin", mountinfo: hybrid, option: tmp + "/cpu/other",
			want: []CgroupRecord{{Version: 1, Path: tmp + "/cpu/other", Source: "option"}},
		},
		{
			name: "option co-mounted", mountinfo: systemdMountinfo, option: "/sys/fs/cgroup/cpu,cpuacct/kubepods/",
			want: []CgroupRecord{{Version: 1, Path: "/sys/fs/cgroup/cpu,cpuacct/kubepods", CPUAcctPath: "/sys/fs/cgroup/cpu,cpuacct/kubepods", Source: "option"}},
		},
		{
			name: "option v2", mountinfo: hybridMountinfo, option: "/sys/fs/cgroup/unified/a",
			want: []CgroupRecord{{Version: 2, Path: "/sys/fs/cgroup/unified/a", Source: "option"}},
		},
		{name: "option in memory hierarchy", mountinfo: systemdMountinfo, option: "/sys/fs/cgroup/memory/a", err: "no cpu controller"},
		{name: "option in no hierarchy", mountinfo: hybridMountinfo, option: "/sys/fs/cgroupx/cpu", err: "not under a mounted"},
		{name: "option on the tmpfs", mountinfo: hybridMountinfo, option: "/sys/fs/cgroup/cpux", err: "not under a mounted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := cgroupMountsOf(t, tt.mountinfo)
			var got []CgroupRecord
			var warns []string
			var err error
			if tt.option != "" {
				var rec CgroupRecord
				rec, err = ms.resolveCgroupOption(tt.option)
				got = []CgroupRecord{rec}
			} else {
				got, warns, err = ms.resolveProcessCgroups([]byte(tt.proc))
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if tt.warn != "" && !slices.ContainsFunc(warns, func(w string) bool { return strings.Contains(w, tt.warn) }) {
				t.Errorf("warnings %q, want one mentioning %q", warns, tt.warn)
			}
		})
	}
}

// realMounts returns this host's cgroup mounts; the test needs root to
// create cgroups in them.
func realMounts(t *testing.T) cgroupMounts {
	t.Helper()
	need.Root(t, "to create cgroups")
	all, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	return newCgroupMounts(all)
}

// makeCgroup creates dir/name, writes files into it in order, and removes
// it when the test ends, after moving whatever is in it back to dir.
func makeCgroup(t *testing.T, parent, name string, files ...[2]string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
				for p := range strings.FieldsSeq(string(procs)) {
					os.WriteFile(filepath.Join(parent, "cgroup.procs"), []byte(p), 0o644)
				}
			}
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			if !errors.Is(err, syscall.EBUSY) {
				t.Errorf("remove cgroup %s: %v", dir, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("cgroup %s still busy; remove it by hand", dir)
	})
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0o644); err != nil {
			t.Fatalf("write %s: %v", filepath.Join(dir, f[0]), err)
		}
	}
	return dir
}

func movePid(t *testing.T, dir string, pid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatalf("move %d into %s: %v", pid, dir, err)
	}
}

// The test cgroups' limits: a fifth of a CPU, so that the child's two
// spinning threads exceed it in every period however loaded the machine is,
// and a weight far above a plain task's, so that other work cannot starve
// the child below its quota. The tests assert on the kernel's counters
// (throttled periods, usage per period), never on how long anything took.
const (
	testQuotaUs  = 20000
	testPeriodUs = 100000
	testShares   = 10240 // v1 cpu.shares: ten nice-0 tasks
	testWeight   = 1000  // v2 cpu.weight: ten nice-0 tasks
)

// TestCgroupV1Throttling puts a CPU-burning child in a real v1 cpu cgroup
// limited to a fifth of a CPU and checks the snapshot sees the limit and
// the throttling.
func TestCgroupV1Throttling(t *testing.T) {
	ms := realMounts(t)
	need.CgroupV1(t)
	cpuMount, ok := ms.v1("cpu")
	if !ok {
		t.Fatal("mountinfo has a cgroup v1 cpu hierarchy, the snapshot's mount reader found none")
	}
	name := fmt.Sprintf("temper-snapshot-test-%d", os.Getpid())
	dir := makeCgroup(t, cpuMount.Dir, name,
		[2]string{"cpu.cfs_period_us", strconv.Itoa(testPeriodUs)}, [2]string{"cpu.cfs_quota_us", strconv.Itoa(testQuotaUs)},
		[2]string{"cpu.shares", strconv.Itoa(testShares)})
	acctDir := dir
	if am, ok := ms.v1("cpuacct"); ok && am.Dir != cpuMount.Dir {
		acctDir = makeCgroup(t, am.Dir, name)
	}
	c := startChild(t, "burn")
	movePid(t, dir, c.pid)
	if acctDir != dir {
		movePid(t, acctDir, c.pid)
	}
	time.Sleep(30 * time.Millisecond)

	ctx := context.Background()
	explicit, err := Begin(ctx, Options{Tgids: []int{c.pid}, Cgroup: dir})
	if err != nil {
		t.Fatal(err)
	}
	implicit, err := Begin(ctx, Options{Tgids: []int{c.pid}})
	if err != nil {
		t.Fatal(err)
	}
	// Let it run until the kernel has throttled it after both snapshots
	// began (the implicit one began last).
	waitThrottled(t, CgroupDir{Version: 1, Path: dir}, implicit.CPUCgroup().Begin)
	for _, s := range []*Snapshot{explicit, implicit} {
		if err := s.End(ctx); err != nil {
			t.Fatal(err)
		}
	}

	rec := explicit.CPUCgroup()
	if rec == nil || rec.Version != 1 || rec.Path != dir || rec.CPUAcctPath != acctDir || rec.Source != "option" {
		t.Fatalf("cgroup record %+v, want v1 %s with cpuacct %s", rec, dir, acctDir)
	}
	for _, r := range []*CgroupCPU{rec.Begin, rec.End} {
		if r.Bandwidth == nil || r.Bandwidth.Unlimited || r.Bandwidth.QuotaUsec != testQuotaUs || r.Bandwidth.PeriodUsec != testPeriodUs {
			t.Errorf("bandwidth %+v, want %d/%d", r.Bandwidth, testQuotaUs, testPeriodUs)
		}
		if r.Shares == nil || *r.Shares != testShares {
			t.Errorf("shares %v, want %d", r.Shares, testShares)
		}
	}
	d, err := rec.Delta()
	if err != nil {
		t.Fatal(err)
	}
	span := explicit.Taken.End.MonotonicNs - explicit.Taken.Begin.MonotonicNs
	t.Logf("v1 delta over %v: %v", time.Duration(span), d)
	if *d.Throttled <= 0 || *d.ThrottledNs <= 0 || *d.Periods < *d.Throttled {
		t.Errorf("two spinning threads limited to a fifth of a CPU were not throttled: %v", d)
	}
	// The quota holds the usage per period: the span holds at most
	// periods+1 (partial ones at both ends), and each CPU may overrun the
	// quota by up to a scheduler tick before the throttle, so twice the
	// quota per period is the bound; unthrottled, the two threads would
	// take up to ten times it.
	if limit := (*d.Periods + 1) * 2 * testQuotaUs * 1000; *d.UsageNs <= 0 || *d.UsageNs > limit {
		t.Errorf("usage %v in %d periods: want positive and at most %v (twice the quota per period)",
			time.Duration(*d.UsageNs), *d.Periods, time.Duration(limit))
	}
	for _, th := range explicit.Threads {
		if th.End != nil && th.End.Cgroup.V1CPU != "/"+name {
			t.Errorf("tid %d: v1 cpu cgroup %q, want /%s", th.Tid, th.End.Cgroup.V1CPU, name)
		}
	}

	// Without the option the process's cgroups are found through
	// /proc/<pid>/cgroup and mountinfo: the v1 one first.
	got := implicit.CPUCgroup()
	if got == nil || got.Path != dir || got.CPUAcctPath != acctDir || got.Source != "process" {
		t.Fatalf("implicit cgroup %+v, want %s", got, dir)
	}
	if d, err := got.Delta(); err != nil || *d.Throttled <= 0 {
		t.Errorf("implicit delta %v, %v", d, err)
	}
	if v2, ok := ms.v2(); ok {
		if len(implicit.Cgroups) != 2 || implicit.Cgroups[1].Version != 2 || !strings.HasPrefix(implicit.Cgroups[1].Path, v2.Dir) {
			t.Errorf("implicit cgroups %+v: want the v2 cgroup under %s second", implicit.Cgroups, v2.Dir)
		}
	}
}

// TestCgroupV2 puts a CPU-burning child in a real cgroup2 cgroup. With the
// cpu controller available it sets a quota and checks throttling; on a host
// whose cpu controller is bound to v1 it can only check the usage counters
// and that the absent files are reported as absent.
func TestCgroupV2(t *testing.T) {
	ms := realMounts(t)
	need.CgroupV2(t)
	v2, ok := ms.v2()
	if !ok {
		t.Fatal("mountinfo has a cgroup2 mount, the snapshot's mount reader found none")
	}
	rootCtrls, err := os.ReadFile(filepath.Join(v2.Dir, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	cpuAvail := slices.Contains(strings.Fields(string(rootCtrls)), "cpu")
	name := fmt.Sprintf("temper-snapshot-test-%d", os.Getpid())
	if cpuAvail {
		sub, _ := os.ReadFile(filepath.Join(v2.Dir, "cgroup.subtree_control"))
		if !slices.Contains(strings.Fields(string(sub)), "cpu") {
			if err := os.WriteFile(filepath.Join(v2.Dir, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
				t.Logf("LOUD: could not enable cpu in %s/cgroup.subtree_control: %v", v2.Dir, err)
				cpuAvail = false
			} else {
				t.Cleanup(func() { os.WriteFile(filepath.Join(v2.Dir, "cgroup.subtree_control"), []byte("-cpu"), 0o644) })
			}
		}
	}
	var dir string
	if cpuAvail {
		dir = makeCgroup(t, v2.Dir, name, [2]string{"cpu.max", fmt.Sprintf("%d %d", testQuotaUs, testPeriodUs)},
			[2]string{"cpu.weight", strconv.Itoa(testWeight)})
	} else {
		t.Logf("LOUD: NOT TESTED on the real cgroup2 mount %s: its cgroup.controllers is %q, without cpu "+
			"(the cpu controller is bound to the v1 hierarchy). cpu.max, cpu.weight and v2 throttling are tested on the fake tree "+
			"(TestReadCgroupCPUFake) only; here only the v2 usage counters and the reporting of absent files are checked.",
			v2.Dir, strings.TrimSpace(string(rootCtrls)))
		dir = makeCgroup(t, v2.Dir, name)
	}
	c := startChild(t, "burn")
	movePid(t, dir, c.pid)

	ctx := context.Background()
	s, err := Begin(ctx, Options{Tgids: []int{c.pid}, Cgroup: dir})
	if err != nil {
		t.Fatal(err)
	}
	if cpuAvail {
		waitThrottled(t, CgroupDir{Version: 2, Path: dir}, s.CPUCgroup().Begin)
	} else {
		waitUsage(t, CgroupDir{Version: 2, Path: dir}, s.CPUCgroup().Begin)
	}
	if err := s.End(ctx); err != nil {
		t.Fatal(err)
	}
	rec := s.CPUCgroup()
	if rec.Version != 2 || rec.Begin == nil || rec.End == nil {
		t.Fatalf("record %+v", rec)
	}
	d, err := rec.Delta()
	if err != nil {
		t.Fatal(err)
	}
	if d.UsageNs == nil || *d.UsageNs <= 0 || d.UserNs == nil || *d.UserNs <= 0 {
		t.Errorf("a spinning child's cgroup has usage delta %v", d)
	}
	for _, th := range s.Threads {
		if th.End != nil && th.End.Cgroup.V2 != "/"+name {
			t.Errorf("tid %d: v2 cgroup %q, want /%s", th.Tid, th.End.Cgroup.V2, name)
		}
	}
	if cpuAvail {
		b := rec.End.Bandwidth
		if !rec.End.CPUController || b == nil || b.QuotaUsec != testQuotaUs || b.PeriodUsec != testPeriodUs || rec.End.Weight == nil || *rec.End.Weight != testWeight {
			t.Errorf("v2 limits %s", dump(rec.End))
		}
		if d.Throttled == nil || *d.Throttled <= 0 {
			t.Errorf("v2 throttling delta %v", d)
		}
		return
	}
	if rec.End.CPUController || rec.End.Bandwidth != nil || rec.End.Weight != nil ||
		!slices.Contains(rec.End.Missing, "cpu.max") || !slices.Contains(rec.End.Missing, "cpu.weight") {
		t.Errorf("v2 without the cpu controller: %s; want no controller, no bandwidth or weight, cpu.max and cpu.weight missing", dump(rec.End))
	}
	t.Logf("v2 usage delta %v (no throttling counters without the cpu controller)", time.Duration(*d.UsageNs))
}

// waitThrottled waits until the cgroup has been throttled more often than
// in begin. The deadline is generous: a loaded machine delays the child, it
// does not keep a child over its quota from being throttled.
func waitThrottled(t *testing.T, d CgroupDir, begin *CgroupCPU) {
	t.Helper()
	if begin == nil || begin.NrThrottled == nil {
		t.Fatalf("cgroup %s has no nr_throttled at begin", d.Path)
	}
	waitCgroup(t, d, "throttled", func(c *CgroupCPU) bool {
		return c.NrThrottled != nil && *c.NrThrottled > *begin.NrThrottled
	})
}

// waitUsage waits until the cgroup has used CPU time since begin.
func waitUsage(t *testing.T, d CgroupDir, begin *CgroupCPU) {
	t.Helper()
	if begin == nil || begin.UsageNs == nil {
		t.Fatalf("cgroup %s has no usage at begin", d.Path)
	}
	// User time as well as usage: a child just moved in has spent its
	// first microseconds in the kernel, and user time is accounted at
	// ticks, after usage.
	waitCgroup(t, d, "used CPU time in user mode", func(c *CgroupCPU) bool {
		return c.UsageNs != nil && *c.UsageNs > *begin.UsageNs &&
			c.UserNs != nil && (begin.UserNs == nil || *c.UserNs > *begin.UserNs)
	})
}

// waitCgroup reads the cgroup's counters until done says what the test
// waits for has happened, for up to a minute; it fails the test if not.
func waitCgroup(t *testing.T, d CgroupDir, what string, done func(*CgroupCPU) bool) {
	t.Helper()
	const limit = time.Minute
	for deadline := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		c, err := ReadCgroupCPU(d)
		if err != nil {
			t.Fatal(err)
		}
		if done(c) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cgroup %s has not %s within %v: %s", d.Path, what, limit, dump(c))
		}
	}
}
