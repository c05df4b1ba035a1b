package snapshot

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

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
// cgroup v1 (cpu and cpuacct controllers) and v2. A nil pointer field means
// the kernel file holding it was absent — typically v2 without the cpu
// controller enabled, or v1 without cpuacct — never zero.
type CgroupCPU struct {
	Version int `json:"version"` // 1 or 2
	// CPUController says whether the cpu controller governs this cgroup:
	// always for v1 (the cgroup is in the cpu hierarchy), for v2 when "cpu"
	// is listed in its cgroup.controllers.
	CPUController bool `json:"cpu_controller"`

	Bandwidth *Bandwidth `json:"bandwidth,omitempty"` // CFS quota; nil when there is no cpu.max / cpu.cfs_*_us
	Weight    *int64     `json:"weight,omitempty"`    // v2 cpu.weight (1..10000, default 100)
	Shares    *int64     `json:"shares,omitempty"`    // v1 cpu.shares (default 1024)

	UsageNs     *int64 `json:"usage_ns,omitempty"`  // v2 usage_usec, v1 cpuacct.usage
	UserNs      *int64 `json:"user_ns,omitempty"`   // v2 user_usec, v1 cpuacct.usage_user
	SystemNs    *int64 `json:"system_ns,omitempty"` // v2 system_usec, v1 cpuacct.usage_sys
	NrPeriods   *int64 `json:"nr_periods,omitempty"`
	NrThrottled *int64 `json:"nr_throttled,omitempty"`
	ThrottledNs *int64 `json:"throttled_ns,omitempty"` // v2 throttled_usec, v1 throttled_time

	// Stat is cpu.stat as the kernel wrote it, every key in its own unit
	// (µs for v2 *_usec keys, ns for v1 throttled_time).
	Stat map[string]int64 `json:"stat"`
	// Missing lists the files this version normally has that were absent.
	Missing []string `json:"missing,omitempty"`
}

// Bandwidth is a CFS bandwidth limit: at most QuotaUsec of CPU time per
// PeriodUsec, summed over the cgroup's threads.
type Bandwidth struct {
	// Unlimited is true when the quota is "max" (v2) or -1 (v1); QuotaUsec is
	// then 0 and meaningless.
	Unlimited  bool  `json:"unlimited"`
	QuotaUsec  int64 `json:"quota_usec,omitempty"`
	PeriodUsec int64 `json:"period_usec"`
}

// CPUs returns the limit in CPUs (quota/period), or 0 when unlimited.
func (b *Bandwidth) CPUs() float64 {
	if b == nil || b.Unlimited || b.PeriodUsec == 0 {
		return 0
	}
	return float64(b.QuotaUsec) / float64(b.PeriodUsec)
}

// CgroupDir names a cgroup directory and its hierarchy version, which is
// what ReadCgroupCPU needs to know which files to read.
type CgroupDir struct {
	Version     int    // 1 or 2
	Path        string // the cgroup's directory
	CPUAcctPath string // v1 only: the cpuacct directory, "" if none
}

// ReadCgroupCPU reads the CPU files of one cgroup. It records what exists:
// a missing file is noted in Missing, not an error. It fails when the cgroup
// directory itself is gone or a file that exists cannot be parsed.
func ReadCgroupCPU(d CgroupDir) (*CgroupCPU, error) {
	if fi, err := os.Stat(d.Path); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", d.Path, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("cgroup %s: not a directory", d.Path)
	}
	switch d.Version {
	case 1:
		return readCgroupV1(d.Path, d.CPUAcctPath)
	case 2:
		return readCgroupV2(d.Path)
	default:
		return nil, fmt.Errorf("cgroup %s: version %d, want 1 or 2", d.Path, d.Version)
	}
}

func readCgroupV2(dir string) (*CgroupCPU, error) {
	c := &CgroupCPU{Version: 2, Stat: map[string]int64{}}
	if ctrls, err := readOptional(dir, "cgroup.controllers", c); err != nil {
		return nil, err
	} else if ctrls != nil {
		c.CPUController = hasField(*ctrls, "cpu")
	}

	if max, err := readOptional(dir, "cpu.max", c); err != nil {
		return nil, err
	} else if max != nil {
		b, err := parseCPUMax(*max)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, "cpu.max"), err)
		}
		c.Bandwidth = b
	}
	w, err := readOptionalInt(dir, "cpu.weight", c)
	if err != nil {
		return nil, err
	}
	c.Weight = w
	if err := readStatFile(filepath.Join(dir, "cpu.stat"), c); err != nil {
		return nil, err
	}
	usec := func(key string) *int64 {
		if v, ok := c.Stat[key]; ok {
			ns := v * 1000
			return &ns
		}
		return nil
	}
	count := func(key string) *int64 {
		if v, ok := c.Stat[key]; ok {
			return &v
		}
		return nil
	}
	c.UsageNs, c.UserNs, c.SystemNs = usec("usage_usec"), usec("user_usec"), usec("system_usec")
	c.NrPeriods, c.NrThrottled, c.ThrottledNs = count("nr_periods"), count("nr_throttled"), usec("throttled_usec")
	return c, nil
}

func readCgroupV1(dir, acct string) (*CgroupCPU, error) {
	c := &CgroupCPU{Version: 1, CPUController: true, Stat: map[string]int64{}}
	quota, err := readOptionalInt(dir, "cpu.cfs_quota_us", c)
	if err != nil {
		return nil, err
	}
	period, err := readOptionalInt(dir, "cpu.cfs_period_us", c)
	if err != nil {
		return nil, err
	}
	if quota != nil && period != nil {
		c.Bandwidth = &Bandwidth{PeriodUsec: *period}
		if *quota < 0 {
			c.Bandwidth.Unlimited = true
		} else {
			c.Bandwidth.QuotaUsec = *quota
		}
	}
	if c.Shares, err = readOptionalInt(dir, "cpu.shares", c); err != nil {
		return nil, err
	}
	if err := readStatFile(filepath.Join(dir, "cpu.stat"), c); err != nil {
		return nil, err
	}
	count := func(key string) *int64 {
		if v, ok := c.Stat[key]; ok {
			return &v
		}
		return nil
	}
	c.NrPeriods, c.NrThrottled, c.ThrottledNs = count("nr_periods"), count("nr_throttled"), count("throttled_time")

	if acct == "" {
		c.Missing = append(c.Missing, "cpuacct")
		return c, nil
	}
	if c.UsageNs, err = readOptionalInt(acct, "cpuacct.usage", c); err != nil {
		return nil, err
	}
	if c.UserNs, err = readOptionalInt(acct, "cpuacct.usage_user", c); err != nil {
		return nil, err
	}
	if c.SystemNs, err = readOptionalInt(acct, "cpuacct.usage_sys", c); err != nil {
		return nil, err
	}
	return c, nil
}

// parseCPUMax parses v2 cpu.max: "$MAX $PERIOD" where $MAX is "max" or µs.
func parseCPUMax(s string) (*Bandwidth, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return nil, fmt.Errorf("cpu.max %q: want \"quota period\"", s)
	}
	period, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || period <= 0 {
		return nil, fmt.Errorf("cpu.max %q: bad period", s)
	}
	b := &Bandwidth{PeriodUsec: period}
	if f[0] == "max" {
		b.Unlimited = true
		return b, nil
	}
	q, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || q < 0 {
		return nil, fmt.Errorf("cpu.max %q: bad quota", s)
	}
	b.QuotaUsec = q
	return b, nil
}

// readOptional returns the trimmed content of dir/name, or nil and a note
// in c.Missing when the file does not exist.
func readOptional(dir, name string, c *CgroupCPU) (*string, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		c.Missing = append(c.Missing, name)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	s := strings.TrimSpace(string(b))
	return &s, nil
}

// readOptionalInt is readOptional for a file holding one integer.
func readOptionalInt(dir, name string, c *CgroupCPU) (*int64, error) {
	s, err := readOptional(dir, name, c)
	if err != nil || s == nil {
		return nil, err
	}
	v, err := strconv.ParseInt(*s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, name), err)
	}
	return &v, nil
}

// readStatFile reads a "key value" per line file such as cpu.stat into
// c.Stat, noting it in c.Missing when absent.
func readStatFile(path string, c *CgroupCPU) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		c.Missing = append(c.Missing, filepath.Base(path))
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	m, err := parseKeyValues(f)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	c.Stat = m
	return nil
}

// parseKeyValues parses "key integer" lines.
func parseKeyValues(r io.Reader) (map[string]int64, error) {
	m := map[string]int64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("line %q: want \"key value\"", sc.Text())
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		m[f[0]] = v
	}
	return m, sc.Err()
}

// hasField reports whether the space-separated list s contains w.
func hasField(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// CPUDelta is how a cgroup's counters moved between two readings. A nil
// field means one of the readings lacked the counter.
type CPUDelta struct {
	Periods     *int64 `json:"periods,omitempty"`      // CFS periods elapsed with runnable threads
	Throttled   *int64 `json:"throttled,omitempty"`    // of those, periods in which the cgroup was throttled
	ThrottledNs *int64 `json:"throttled_ns,omitempty"` // time spent throttled
	UsageNs     *int64 `json:"usage_ns,omitempty"`
	UserNs      *int64 `json:"user_ns,omitempty"`
	SystemNs    *int64 `json:"system_ns,omitempty"`
}

// String shows the known counters, for logs and test failures.
func (d CPUDelta) String() string {
	var parts []string
	add := func(name string, v *int64, dur bool) {
		switch {
		case v == nil:
			parts = append(parts, name+"=?")
		case dur:
			parts = append(parts, name+"="+time.Duration(*v).String())
		default:
			parts = append(parts, name+"="+strconv.FormatInt(*v, 10))
		}
	}
	add("periods", d.Periods, false)
	add("throttled", d.Throttled, false)
	add("throttled_time", d.ThrottledNs, true)
	add("usage", d.UsageNs, true)
	add("user", d.UserNs, true)
	add("system", d.SystemNs, true)
	return strings.Join(parts, " ")
}

// Sub returns end − begin for every counter both readings have. Readings of
// different versions, or a counter that went backwards (the cgroup was
// removed and created again), are errors.
func (end *CgroupCPU) Sub(begin *CgroupCPU) (CPUDelta, error) {
	if end == nil || begin == nil {
		return CPUDelta{}, errors.New("cgroup delta: a reading is missing")
	}
	if end.Version != begin.Version {
		return CPUDelta{}, fmt.Errorf("cgroup delta: begin is v%d, end is v%d", begin.Version, end.Version)
	}
	var d CPUDelta
	var err error
	sub := func(name string, e, b *int64) *int64 {
		if e == nil || b == nil || err != nil {
			return nil
		}
		if *e < *b {
			err = fmt.Errorf("cgroup delta: %s went from %d to %d; was the cgroup recreated?", name, *b, *e)
			return nil
		}
		v := *e - *b
		return &v
	}
	d.Periods = sub("nr_periods", end.NrPeriods, begin.NrPeriods)
	d.Throttled = sub("nr_throttled", end.NrThrottled, begin.NrThrottled)
	d.ThrottledNs = sub("throttled time", end.ThrottledNs, begin.ThrottledNs)
	d.UsageNs = sub("usage", end.UsageNs, begin.UsageNs)
	d.UserNs = sub("user time", end.UserNs, begin.UserNs)
	d.SystemNs = sub("system time", end.SystemNs, begin.SystemNs)
	if err != nil {
		return CPUDelta{}, err
	}
	return d, nil
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
