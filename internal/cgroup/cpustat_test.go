package cgroup

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadCPUFormats(t *testing.T) {
	const v1Stat = "nr_periods 40\nnr_throttled 18\nthrottled_time 1520000000\nnr_bursts 0\nburst_time 0\n"
	const v2Stat = "usage_usec 2000000\nuser_usec 1900000\nsystem_usec 100000\nnr_periods 40\nnr_throttled 18\nthrottled_usec 1520000\nnr_bursts 0\nburst_usec 0\n"
	for _, tt := range []struct {
		name    string
		version int
		files   map[string]string // cpu directory; "acct/" prefix: cpuacct
		want    CPUStat
		err     string // the file the error names ("" no error)
	}{
		{"v1 limited", 1, map[string]string{"cpu.stat": v1Stat, "acct/cpuacct.usage": "2000000000\n", "cpu.cfs_quota_us": "50000\n", "cpu.cfs_period_us": "100000\n"},
			CPUStat{Usage: 2 * time.Second, Periods: 40, Throttled: 18, ThrottledTime: 1520 * time.Millisecond, Limit: 0.5}, ""},
		{"v1 no limit", 1, map[string]string{"cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n", "acct/cpuacct.usage": "7\n", "cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"},
			CPUStat{Usage: 7}, ""},
		{"v2 limited", 2, map[string]string{"cpu.stat": v2Stat, "cpu.max": "150000 100000\n"},
			CPUStat{Usage: 2 * time.Second, Periods: 40, Throttled: 18, ThrottledTime: 1520 * time.Millisecond, Limit: 1.5}, ""},
		{"v2 max", 2, map[string]string{"cpu.stat": v2Stat, "cpu.max": "max 100000\n"},
			CPUStat{Usage: 2 * time.Second, Periods: 40, Throttled: 18, ThrottledTime: 1520 * time.Millisecond}, ""},
		{"v2 without the cpu controller", 2, map[string]string{"cpu.stat": "usage_usec 5\nuser_usec 5\nsystem_usec 0\n"},
			CPUStat{Usage: 5 * time.Microsecond}, ""},
		{"v2 garbled line", 2, map[string]string{"cpu.stat": "usage_usec 5\nnr_periods\n", "cpu.max": "max 100000\n"}, CPUStat{}, "cpu.stat line 2"},
		{"v2 value not a number", 2, map[string]string{"cpu.stat": "usage_usec -5\n", "cpu.max": "max 100000\n"}, CPUStat{}, "cpu.stat line 1"},
		{"v2 no usage", 2, map[string]string{"cpu.stat": "nr_periods 1\n", "cpu.max": "max 100000\n"}, CPUStat{}, "cpu.stat: no usage_usec"},
		{"v2 bad cpu.max", 2, map[string]string{"cpu.stat": v2Stat, "cpu.max": "150000\n"}, CPUStat{}, "cpu.max"},
		{"v1 no throttled_time", 1, map[string]string{"cpu.stat": "nr_periods 1\nnr_throttled 0\n", "acct/cpuacct.usage": "7\n", "cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"},
			CPUStat{}, "cpu.stat: no throttled_time"},
		{"v1 bad usage", 1, map[string]string{"cpu.stat": v1Stat, "acct/cpuacct.usage": "lots\n", "cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"},
			CPUStat{}, "cpuacct.usage"},
		{"v1 bad quota", 1, map[string]string{"cpu.stat": v1Stat, "acct/cpuacct.usage": "1\n", "cpu.cfs_quota_us": "half\n", "cpu.cfs_period_us": "100000\n"},
			CPUStat{}, "cpu.cfs_quota_us"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			acct := filepath.Join(dir, "acct")
			if err := os.Mkdir(acct, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, body := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := readCPU(tt.version, dir, acct)
			if tt.err != "" {
				if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("error %v; want ErrMalformed naming %s in %s", err, tt.err, dir)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestReadCPUMissingFile(t *testing.T) {
	_, err := readCPU(2, t.TempDir(), "")
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "cpu.stat") {
		t.Fatalf("error %v; want a missing cpu.stat named", err)
	}
}

func TestCPUStatSub(t *testing.T) {
	a := CPUStat{Usage: time.Second, Periods: 10, Throttled: 2, ThrottledTime: time.Millisecond, Limit: 1}
	b := CPUStat{Usage: 3 * time.Second, Periods: 30, Throttled: 7, ThrottledTime: 5 * time.Millisecond, Limit: 1.5}
	want := CPUStat{Usage: 2 * time.Second, Periods: 20, Throttled: 5, ThrottledTime: 4 * time.Millisecond, Limit: 1.5}
	if got := b.Sub(a); got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}
}

func TestReadCPUNoTwin(t *testing.T) {
	d := Dir{h: Hierarchy{Root: "/cpu", Version: 1, Acct: "/cpuacct"}, CPU: "/cpu/x"}
	if _, err := d.ReadCPU(); !errors.Is(err, ErrNoUsage) {
		t.Fatalf("error %v; want ErrNoUsage", err)
	}
	if got := d.Accounted().Acct; got != "/cpuacct/x" {
		t.Errorf("Accounted twin %q; want /cpuacct/x", got)
	}
	if got := d.Accounted().Child("y").Acct; got != "/cpuacct/x/y" {
		t.Errorf("child's twin %q; want /cpuacct/x/y", got)
	}
}

// TestQuotaThrottles runs two spinners in a cgroup limited to 0.5 CPU for
// about 2 s and reads what they used through ReadCPU: about half a CPU,
// and throttled periods. It makes a real cgroup, so it needs root.
func TestQuotaThrottles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a cgroup")
	}
	h, err := Find()
	if err != nil {
		t.Skip(err)
	}
	d, err := h.Top().Accounted().Make(fmt.Sprintf("temper-test-quota.%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	t.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
		if err := d.Remove(); err != nil {
			t.Error(err)
		}
	})
	if err := d.Set(h.Quota(500)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c := exec.Command("/bin/sh", "-c", "while :; do :; done")
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := d.Start(c); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	before, err := d.ReadCPU()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	time.Sleep(2 * time.Second)
	after, err := d.ReadCPU()
	wall := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	got := after.Sub(before)
	cores := got.Usage.Seconds() / wall.Seconds()
	t.Logf("over %s: %.3f CPUs, %d of %d periods throttled (%s), limit %g", wall.Round(time.Millisecond), cores, got.Throttled, got.Periods, got.ThrottledTime, got.Limit)
	if got.Limit != 0.5 {
		t.Errorf("limit %g CPUs; want 0.5", got.Limit)
	}
	if cores < 0.3 || cores > 0.7 {
		t.Errorf("the spinners used %.3f CPUs; want about 0.5 (0.3–0.7)", cores)
	}
	if got.Throttled == 0 || got.ThrottledTime <= 0 {
		t.Errorf("throttled %d periods, %s; want some", got.Throttled, got.ThrottledTime)
	}
}

// files names a cgroup's directories for ReadCPUFiles.
type files struct {
	version   int
	dir, acct string
}

func i64(v int64) *int64 { return &v }

func TestReadCPUFiles(t *testing.T) {
	v2Stat := "usage_usec 5000\nuser_usec 3000\nsystem_usec 2000\nnr_periods 40\nnr_throttled 7\nthrottled_usec 900\nnr_bursts 0\nburst_usec 0\n"
	v1Stat := "nr_periods 40\nnr_throttled 7\nthrottled_time 900000\nnr_bursts 0\nburst_time 0\n"
	tests := []struct {
		name  string
		files map[string]string // relative to the cgroup dir; "acct/..." for cpuacct
		dir   func(root string) files
		want  *CPU
		err   string
	}{
		{
			name:  "v2 with quota",
			files: map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n", "cpu.max": "50000 100000\n", "cpu.weight": "50\n", "cpu.stat": v2Stat},
			dir:   func(r string) files { return files{2, r, ""} },
			want: &CPU{Version: 2, CPUController: true, Bandwidth: &Bandwidth{QuotaUsec: 50000, PeriodUsec: 100000}, Weight: i64(50),
				UsageNs: i64(5e6), UserNs: i64(3e6), SystemNs: i64(2e6), NrPeriods: i64(40), NrThrottled: i64(7), ThrottledNs: i64(900e3),
				Stat: map[string]int64{"usage_usec": 5000, "user_usec": 3000, "system_usec": 2000, "nr_periods": 40, "nr_throttled": 7, "throttled_usec": 900, "nr_bursts": 0, "burst_usec": 0}},
		},
		{
			name:  "v2 unlimited",
			files: map[string]string{"cgroup.controllers": "cpu\n", "cpu.max": "max 100000\n", "cpu.weight": "100\n", "cpu.stat": "usage_usec 1\n"},
			dir:   func(r string) files { return files{2, r, ""} },
			want: &CPU{Version: 2, CPUController: true, Bandwidth: &Bandwidth{Unlimited: true, PeriodUsec: 100000}, Weight: i64(100),
				UsageNs: i64(1000), Stat: map[string]int64{"usage_usec": 1}},
		},
		{
			// The cpu controller is bound to v1 (this CI host): only the core
			// usage counters exist.
			name:  "v2 without cpu controller",
			files: map[string]string{"cgroup.controllers": "hugetlb\n", "cpu.stat": "usage_usec 10\nuser_usec 6\nsystem_usec 4\nnice_usec 0\n"},
			dir:   func(r string) files { return files{2, r, ""} },
			want: &CPU{Version: 2, UsageNs: i64(10000), UserNs: i64(6000), SystemNs: i64(4000),
				Stat: map[string]int64{"usage_usec": 10, "user_usec": 6, "system_usec": 4, "nice_usec": 0}, Missing: []string{"cpu.max", "cpu.weight"}},
		},
		{
			name: "v1 quota with separate cpuacct",
			files: map[string]string{"cpu.cfs_quota_us": "50000\n", "cpu.cfs_period_us": "100000\n", "cpu.shares": "512\n", "cpu.stat": v1Stat,
				"acct/cpuacct.usage": "123456\n", "acct/cpuacct.usage_user": "100000\n", "acct/cpuacct.usage_sys": "23456\n"},
			dir: func(r string) files { return files{1, r, filepath.Join(r, "acct")} },
			want: &CPU{Version: 1, CPUController: true, Bandwidth: &Bandwidth{QuotaUsec: 50000, PeriodUsec: 100000}, Shares: i64(512),
				UsageNs: i64(123456), UserNs: i64(100000), SystemNs: i64(23456), NrPeriods: i64(40), NrThrottled: i64(7), ThrottledNs: i64(900000),
				Stat: map[string]int64{"nr_periods": 40, "nr_throttled": 7, "throttled_time": 900000, "nr_bursts": 0, "burst_time": 0}},
		},
		{
			name:  "v1 unlimited, no cpuacct",
			files: map[string]string{"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n", "cpu.shares": "1024\n", "cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n"},
			dir:   func(r string) files { return files{1, r, ""} },
			want: &CPU{Version: 1, CPUController: true, Bandwidth: &Bandwidth{Unlimited: true, PeriodUsec: 100000}, Shares: i64(1024),
				NrPeriods: i64(0), NrThrottled: i64(0), ThrottledNs: i64(0),
				Stat: map[string]int64{"nr_periods": 0, "nr_throttled": 0, "throttled_time": 0}, Missing: []string{"cpuacct"}},
		},
		{
			name:  "v1 without cfs files",
			files: map[string]string{"cpu.shares": "2\n"},
			dir:   func(r string) files { return files{1, r, ""} },
			want: &CPU{Version: 1, CPUController: true, Shares: i64(2), Stat: map[string]int64{},
				Missing: []string{"cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.stat", "cpuacct"}},
		},
		{name: "bad cpu.max", files: map[string]string{"cpu.max": "lots 100000\n"}, dir: func(r string) files { return files{2, r, ""} }, err: "bad quota"},
		{name: "bad cpu.max period", files: map[string]string{"cpu.max": "max 0\n"}, dir: func(r string) files { return files{2, r, ""} }, err: "bad period"},
		{name: "bad cpu.stat", files: map[string]string{"cpu.stat": "usage_usec many\n"}, dir: func(r string) files { return files{2, r, ""} }, err: "cpu.stat"},
		{name: "bad shares", files: map[string]string{"cpu.shares": "x\n"}, dir: func(r string) files { return files{1, r, ""} }, err: "cpu.shares"},
		{name: "gone", dir: func(r string) files { return files{2, filepath.Join(r, "gone"), ""} }, err: "no such file"},
		{name: "bad version", dir: func(r string) files { return files{3, r, ""} }, err: "version 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range tt.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			d := tt.dir(root)
			got, err := ReadCPUFiles(d.version, d.dir, d.acct)
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
				t.Errorf("got  %s\nwant %s", dump(got), dump(tt.want))
			}
		})
	}
}

func dump(c *CPU) string {
	b, _ := json.Marshal(c)
	return string(b)
}

func TestCPUSub(t *testing.T) {
	b := &CPU{Version: 2, UsageNs: i64(100), NrPeriods: i64(10), NrThrottled: i64(1), ThrottledNs: i64(5)}
	e := &CPU{Version: 2, UsageNs: i64(350), NrPeriods: i64(14), NrThrottled: i64(3), ThrottledNs: i64(25), UserNs: i64(1)}
	d, err := e.Sub(b)
	if err != nil {
		t.Fatal(err)
	}
	want := CPUDelta{Periods: i64(4), Throttled: i64(2), ThrottledNs: i64(20), UsageNs: i64(250)}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("delta %+v, want %+v (user only at end: nil)", d, want)
	}
	for _, tt := range []struct {
		name       string
		begin, end *CPU
		want       string
	}{
		{"missing end", b, nil, "missing"},
		{"versions", b, &CPU{Version: 1}, "begin is v2, end is v1"},
		{"backwards", b, &CPU{Version: 2, NrThrottled: i64(0)}, "recreated"},
	} {
		_, err := tt.end.Sub(tt.begin)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
	if got := (&Bandwidth{QuotaUsec: 50000, PeriodUsec: 100000}).CPUs(); got != 0.5 {
		t.Errorf("CPUs() = %v, want 0.5", got)
	}
	if got := (&Bandwidth{Unlimited: true, PeriodUsec: 100000}).CPUs(); got != 0 {
		t.Errorf("unlimited CPUs() = %v, want 0", got)
	}
}
