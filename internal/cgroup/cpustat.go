package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNoUsage is wrapped when a cgroup's CPU usage is not counted anywhere
// ReadCPU can read it: on v1 with cpuacct mounted apart from cpu, a cgroup
// made below no accounted Dir (Accounted) has no cpuacct twin.
var ErrNoUsage = errors.New("the cgroup's CPU usage is not accounted")

// ErrMalformed is wrapped when a cgroup file does not read as the kernel
// writes it.
var ErrMalformed = errors.New("malformed cgroup file")

// CPU is everything a cgroup's CPU files say at one moment, normalised
// across cgroup v1 (cpu and cpuacct controllers) and v2. It is recorded as
// it is in snapshots, hence the JSON names. A nil pointer field means the
// kernel file holding it was absent — typically v2 without the cpu
// controller enabled, or v1 without cpuacct — never zero.
type CPU struct {
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
	// Missing lists the files this version normally has that were absent
	// ("cpuacct" when a v1 cgroup has no cpuacct directory).
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

// ReadCPUFiles reads the CPU files of the cgroup of the given version
// whose cpu directory is dir and whose v1 cpuacct directory is acct (""
// when it has none; dir itself when the two controllers share a
// hierarchy). It records what exists: a missing file is noted in Missing,
// not an error. It fails when dir itself is gone or a file that exists
// does not parse (ErrMalformed).
func ReadCPUFiles(version int, dir, acct string) (*CPU, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("cgroup: %s: not a directory", dir)
	}
	switch version {
	case 1:
		return readV1(dir, acct)
	case 2:
		return readV2(dir)
	default:
		return nil, fmt.Errorf("cgroup: %s: version %d, want 1 or 2", dir, version)
	}
}

func readV2(dir string) (*CPU, error) {
	c := &CPU{Version: 2, Stat: map[string]int64{}}
	if ctrls, err := readOptional(dir, "cgroup.controllers", c); err != nil {
		return nil, err
	} else if ctrls != nil {
		c.CPUController = slices.Contains(strings.Fields(*ctrls), "cpu")
	}
	if max, err := readOptional(dir, "cpu.max", c); err != nil {
		return nil, err
	} else if max != nil {
		b, err := parseMax(filepath.Join(dir, "cpu.max"), *max)
		if err != nil {
			return nil, err
		}
		c.Bandwidth = b
	}
	w, err := readOptionalInt(dir, "cpu.weight", c)
	if err != nil {
		return nil, err
	}
	c.Weight = w
	if err := readStat(filepath.Join(dir, "cpu.stat"), c); err != nil {
		return nil, err
	}
	usec := func(key string) *int64 {
		if v, ok := c.Stat[key]; ok {
			ns := v * 1000
			return &ns
		}
		return nil
	}
	c.UsageNs, c.UserNs, c.SystemNs = usec("usage_usec"), usec("user_usec"), usec("system_usec")
	c.NrPeriods, c.NrThrottled, c.ThrottledNs = c.count("nr_periods"), c.count("nr_throttled"), usec("throttled_usec")
	return c, nil
}

func readV1(dir, acct string) (*CPU, error) {
	c := &CPU{Version: 1, CPUController: true, Stat: map[string]int64{}}
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
	if err := readStat(filepath.Join(dir, "cpu.stat"), c); err != nil {
		return nil, err
	}
	c.NrPeriods, c.NrThrottled, c.ThrottledNs = c.count("nr_periods"), c.count("nr_throttled"), c.count("throttled_time")

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

// count is cpu.stat's key as it is, nil when absent.
func (c *CPU) count(key string) *int64 {
	if v, ok := c.Stat[key]; ok {
		return &v
	}
	return nil
}

// CPUStat is a cgroup's CPU accounting at one reading: cumulative counters
// (two readings' difference is Sub) and the limit in force. The throttle
// counters are CFS bandwidth control's: they move only while the cgroup's
// tasks run on CFS with a quota (sched_ext tasks never charge it).
type CPUStat struct {
	// Usage is the CPU time the cgroup's tasks used (v2 cpu.stat
	// usage_usec, v1 cpuacct.usage).
	Usage time.Duration
	// Periods are the enforcement periods in which its tasks were runnable
	// under a quota (nr_periods), Throttled those that ended with the
	// quota spent (nr_throttled), and ThrottledTime the time its tasks
	// were held off the CPU for it (throttled_usec, v1 throttled_time).
	Periods, Throttled uint64
	ThrottledTime      time.Duration
	// Limit is the quota in CPUs (quota / period: cpu.max on v2,
	// cpu.cfs_quota_us / cpu.cfs_period_us on v1); 0 without one. It is a
	// setting, not a counter: Sub keeps the later reading's.
	Limit float64
}

// Sub is what the counters moved from before to s; Limit is s's.
func (s CPUStat) Sub(before CPUStat) CPUStat {
	return CPUStat{
		Usage:         s.Usage - before.Usage,
		Periods:       s.Periods - before.Periods,
		Throttled:     s.Throttled - before.Throttled,
		ThrottledTime: s.ThrottledTime - before.ThrottledTime,
		Limit:         s.Limit,
	}
}

// ReadCPU reads d's CPU accounting: its cpu.stat, its usage (on v1 from
// cpuacct.usage, in the cpu directory when cpuacct shares the cpu
// hierarchy, else in d's cpuacct twin) and its quota.
func (d Dir) ReadCPU() (CPUStat, error) {
	acct := d.CPU
	if d.h.Version == 1 && d.h.Acct != "" {
		if d.Acct == "" {
			return CPUStat{}, fmt.Errorf("cgroup: %s: %w (cpuacct is mounted apart, at %s, and the cgroup has no twin there)", d.CPU, ErrNoUsage, d.h.Acct)
		}
		acct = d.Acct
	}
	return readCPU(d.h.Version, d.CPU, acct)
}

// readCPU reads the CPU accounting of a cgroup of the given version whose
// cpu directory is dir and whose cpuacct directory (v1) is acct. Unlike
// ReadCPUFiles it needs every counter a trial's usage is made of: a file
// or key missing is an error.
func readCPU(version int, dir, acct string) (CPUStat, error) {
	c, err := ReadCPUFiles(version, dir, acct)
	if err != nil {
		return CPUStat{}, err
	}
	return c.accounting(dir, acct)
}

// accounting is c as a CPUStat, or the first file or counter it lacks
// (the cgroup's cpu directory is dir, its cpuacct one acct, for naming
// them). The throttle counters are needed only on v1: on v2 they are there
// only once the parent hands the cpu controller down, and without it no
// quota can be in force.
func (c *CPU) accounting(dir, acct string) (CPUStat, error) {
	absent := func(dir, name string) error {
		if slices.Contains(c.Missing, name) {
			return fmt.Errorf("cgroup: %s: %w", filepath.Join(dir, name), fs.ErrNotExist)
		}
		return nil
	}
	if err := absent(dir, "cpu.stat"); err != nil {
		return CPUStat{}, err
	}
	need := []string{"usage_usec"}
	if c.Version == 1 {
		need = []string{"nr_periods", "nr_throttled", "throttled_time"}
	}
	for _, k := range need {
		if _, ok := c.Stat[k]; !ok {
			return CPUStat{}, fmt.Errorf("cgroup: %s: no %s: %w", filepath.Join(dir, "cpu.stat"), k, ErrMalformed)
		}
	}
	if c.Version == 1 {
		if slices.Contains(c.Missing, "cpuacct") {
			return CPUStat{}, fmt.Errorf("cgroup: %s: %w (no cpuacct directory)", dir, ErrNoUsage)
		}
		for _, f := range []struct{ dir, name string }{{acct, "cpuacct.usage"}, {dir, "cpu.cfs_quota_us"}, {dir, "cpu.cfs_period_us"}} {
			if err := absent(f.dir, f.name); err != nil {
				return CPUStat{}, err
			}
		}
	}
	val := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	return CPUStat{
		Usage:         time.Duration(val(c.UsageNs)),
		Periods:       uint64(val(c.NrPeriods)),
		Throttled:     uint64(val(c.NrThrottled)),
		ThrottledTime: time.Duration(val(c.ThrottledNs)),
		Limit:         c.Bandwidth.CPUs(),
	}, nil
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
func (end *CPU) Sub(begin *CPU) (CPUDelta, error) {
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

// parseMax parses v2 cpu.max at path, "QUOTA PERIOD" or "max PERIOD".
func parseMax(path, s string) (*Bandwidth, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return nil, fmt.Errorf("cgroup: %s: %q: want QUOTA PERIOD: %w", path, s, ErrMalformed)
	}
	period, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || period <= 0 {
		return nil, fmt.Errorf("cgroup: %s: %q: bad period: %w", path, s, ErrMalformed)
	}
	b := &Bandwidth{PeriodUsec: period}
	if f[0] == "max" {
		b.Unlimited = true
		return b, nil
	}
	q, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || q < 0 {
		return nil, fmt.Errorf("cgroup: %s: %q: bad quota: %w", path, s, ErrMalformed)
	}
	b.QuotaUsec = q
	return b, nil
}

// readOptional returns the trimmed content of dir/name, or nil and a note
// in c.Missing when the file does not exist.
func readOptional(dir, name string, c *CPU) (*string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		c.Missing = append(c.Missing, name)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	s := strings.TrimSpace(string(b))
	return &s, nil
}

// readOptionalInt is readOptional for a file holding one integer
// (cpuacct.usage, cpu.cfs_quota_us: -1 for none).
func readOptionalInt(dir, name string, c *CPU) (*int64, error) {
	s, err := readOptional(dir, name, c)
	if err != nil || s == nil {
		return nil, err
	}
	v, err := strconv.ParseInt(*s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %s: %q: %w", filepath.Join(dir, name), *s, ErrMalformed)
	}
	return &v, nil
}

// readStat reads a flat keyed file such as cpu.stat into c.Stat, noting
// it in c.Missing when absent.
func readStat(path string, c *CPU) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		c.Missing = append(c.Missing, filepath.Base(path))
		return nil
	}
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	c.Stat, err = parseKeyed(path, b)
	return err
}

// parseKeyed parses a flat keyed file: one "key value" per line, the
// values counters (unsigned integers).
func parseKeyed(path string, b []byte) (map[string]int64, error) {
	kv := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for i := 1; sc.Scan(); i++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("cgroup: %s line %d: %q: want KEY VALUE: %w", path, i, sc.Text(), ErrMalformed)
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("cgroup: %s line %d: %q: %w", path, i, sc.Text(), ErrMalformed)
		}
		kv[f[0]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cgroup: %s: %w", path, err)
	}
	return kv, nil
}
