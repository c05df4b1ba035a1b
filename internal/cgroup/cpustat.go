package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// cpu directory is dir and whose cpuacct directory (v1) is acct.
func readCPU(version int, dir, acct string) (CPUStat, error) {
	var s CPUStat
	path := filepath.Join(dir, "cpu.stat")
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("cgroup: %w", err)
	}
	kv, err := parseKeyed(path, b)
	if err != nil {
		return s, err
	}
	need := func(key string) (uint64, error) {
		v, ok := kv[key]
		if !ok {
			return 0, fmt.Errorf("cgroup: %s: no %s: %w", path, key, ErrMalformed)
		}
		return v, nil
	}
	s.Periods, s.Throttled = kv["nr_periods"], kv["nr_throttled"]
	if version == 2 {
		usec, err := need("usage_usec")
		if err != nil {
			return s, err
		}
		s.Usage = time.Duration(usec) * time.Microsecond
		// The throttle counters are there only once the parent hands the
		// cpu controller down: without it no quota can be in force.
		s.ThrottledTime = time.Duration(kv["throttled_usec"]) * time.Microsecond
		path = filepath.Join(dir, "cpu.max")
		if b, err = os.ReadFile(path); errors.Is(err, os.ErrNotExist) {
			return s, nil
		} else if err != nil {
			return s, fmt.Errorf("cgroup: %w", err)
		}
		s.Limit, err = parseMax(path, b)
		return s, err
	}
	for _, k := range []string{"nr_periods", "nr_throttled", "throttled_time"} {
		if _, err := need(k); err != nil {
			return s, err
		}
	}
	s.ThrottledTime = time.Duration(kv["throttled_time"]) // ns
	ns, err := readInt(filepath.Join(acct, "cpuacct.usage"))
	if err != nil {
		return s, err
	}
	s.Usage = time.Duration(ns)
	quota, err := readInt(filepath.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return s, err
	}
	period, err := readInt(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return s, err
	}
	if quota > 0 && period > 0 {
		s.Limit = float64(quota) / float64(period)
	}
	return s, nil
}

// parseKeyed parses a flat keyed file such as cpu.stat: one "key value"
// per line, the values unsigned integers.
func parseKeyed(path string, b []byte) (map[string]uint64, error) {
	kv := map[string]uint64{}
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("cgroup: %s line %d: %q: want KEY VALUE: %w", path, i+1, line, ErrMalformed)
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cgroup: %s line %d: %q: %w", path, i+1, line, ErrMalformed)
		}
		kv[f[0]] = v
	}
	return kv, nil
}

// parseMax parses v2 cpu.max, "QUOTA PERIOD" or "max PERIOD", into CPUs
// (0: no limit).
func parseMax(path string, b []byte) (float64, error) {
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, fmt.Errorf("cgroup: %s: %q: want QUOTA PERIOD: %w", path, strings.TrimSpace(string(b)), ErrMalformed)
	}
	period, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil || period == 0 {
		return 0, fmt.Errorf("cgroup: %s: period %q: %w", path, f[1], ErrMalformed)
	}
	if f[0] == "max" {
		return 0, nil
	}
	quota, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup: %s: quota %q: %w", path, f[0], ErrMalformed)
	}
	return float64(quota) / float64(period), nil
}

// readInt reads a file holding one integer (cpuacct.usage,
// cpu.cfs_quota_us: -1 for none).
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("cgroup: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup: %s: %q: %w", path, strings.TrimSpace(string(b)), ErrMalformed)
	}
	return v, nil
}
