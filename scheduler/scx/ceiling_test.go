package scx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"temper.codes/temper-train/profiles"
)

// fakeHierarchy writes cgroups with the given cpu.max (v2) or quota and
// period (v1) under a temporary root; "" leaves a cgroup unlimited.
func fakeHierarchy(t *testing.T, version int, limits map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, limit := range limits {
		dir := filepath.Join(root, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{"cpu.stat": "usage_usec 0\n"}
		switch {
		case version == 2 && limit == "":
			files["cpu.max"] = "max 100000\n"
		case version == 2:
			files["cpu.max"] = limit + "\n"
		case limit == "":
			files["cpu.cfs_quota_us"], files["cpu.cfs_period_us"] = "-1\n", "100000\n"
		default:
			var q, p string
			if _, err := fmt.Sscan(limit, &q, &p); err != nil {
				t.Fatal(err)
			}
			files["cpu.cfs_quota_us"], files["cpu.cfs_period_us"] = q+"\n", p+"\n"
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func TestLimitsAbove(t *testing.T) {
	limits := map[string]string{
		"kubepods":                   "",
		"kubepods/burstable":         "",
		"kubepods/burstable/pod1":    "150000 100000",
		"kubepods/burstable/pod1/c1": "50000 100000",
		"kubepods/burstable/pod1/c2": "",
	}
	for _, version := range []int{1, 2} {
		root := fakeHierarchy(t, version, limits)
		tests := []struct {
			rel  string
			want []Ceiling
		}{
			{"/kubepods/burstable/pod1/c1", []Ceiling{
				{Cgroup: "/kubepods/burstable/pod1/c1", Quota: 50 * time.Millisecond, Period: 100 * time.Millisecond},
				{Cgroup: "/kubepods/burstable/pod1", Quota: 150 * time.Millisecond, Period: 100 * time.Millisecond},
			}},
			{"/kubepods/burstable/pod1/c2", []Ceiling{{Cgroup: "/kubepods/burstable/pod1", Quota: 150 * time.Millisecond, Period: 100 * time.Millisecond}}},
			{"/kubepods", nil},
			{"/", nil},
			{"/kubepods/gone", nil},
		}
		for _, tt := range tests {
			got, err := limitsAbove(root, version, tt.rel)
			if err != nil {
				t.Fatalf("v%d %s: %v", version, tt.rel, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("v%d %s: %v, want %v", version, tt.rel, got, tt.want)
			}
		}
	}
	if c := (Ceiling{Quota: 50 * time.Millisecond, Period: 100 * time.Millisecond}); c.CPUs() != 0.5 {
		t.Errorf("CPUs of 50 ms per 100 ms: %v, want 0.5", c.CPUs())
	}
}

func TestCeilingTable(t *testing.T) {
	pod := Ceiling{Cgroup: "/pod", Quota: 150 * time.Millisecond, Period: 100 * time.Millisecond}
	c1 := Ceiling{Cgroup: "/pod/c1", Quota: 25 * time.Millisecond, Period: 50 * time.Millisecond}
	reads := 0
	read := func(rel string) ([]Ceiling, error) {
		reads++
		switch rel {
		case "/pod/c1":
			return []Ceiling{c1, pod}, nil
		case "/pod/c2":
			return []Ceiling{pod}, nil
		case "/broken":
			return nil, errors.New("unreadable")
		}
		return nil, nil
	}
	tbl := newCeilingTable(read)
	if tbl.tick() != defaultCeilingTick {
		t.Errorf("tick with no ceilings: %v, want %v", tbl.tick(), defaultCeilingTick)
	}
	threads := []profiles.Thread{
		{Tid: 1, Cgroup: "/pod/c2"},
		{Tid: 2, Cgroup: "/pod/c1"},
		{Tid: 3, Cgroup: "/pod/c1"},
		{Tid: 4, Cgroup: "/free"},
		{Tid: 5},
	}
	got, err := tbl.assign(threads)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32]taskCeilings{
		1: {Idx: [maxTaskCeilings]uint32{0, noCeiling, noCeiling, noCeiling}},
		2: {Idx: [maxTaskCeilings]uint32{1, 0, noCeiling, noCeiling}},
		3: {Idx: [maxTaskCeilings]uint32{1, 0, noCeiling, noCeiling}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("assign: %v, want %v", got, want)
	}
	if !reflect.DeepEqual(tbl.slots, []Ceiling{pod, c1}) {
		t.Errorf("slots %v", tbl.slots)
	}
	if tbl.tick() != 50*time.Millisecond {
		t.Errorf("tick %v, want the shortest period, 50ms", tbl.tick())
	}
	// Again: cgroups are read once, slots stay.
	before := reads
	if _, err := tbl.assign(threads); err != nil || len(tbl.slots) != 2 || reads != before {
		t.Errorf("second assign: %d slots, %d reads, err %v; want nothing new", len(tbl.slots), reads-before, err)
	}
	if _, err := tbl.assign([]profiles.Thread{{Tid: 9, Cgroup: "/broken"}}); err == nil {
		t.Error("an unreadable cgroup gave no error")
	}

	// More limited cgroups than slots.
	many := newCeilingTable(func(rel string) ([]Ceiling, error) {
		return []Ceiling{{Cgroup: rel, Quota: time.Millisecond, Period: 100 * time.Millisecond}}, nil
	})
	var ts []profiles.Thread
	for i := range maxCeilings + 1 {
		ts = append(ts, profiles.Thread{Tid: i + 1, Cgroup: "/c" + string(rune('a'+i))})
	}
	if _, err := many.assign(ts); !errors.Is(err, ErrTooManyCeilings) {
		t.Errorf("%d limited cgroups: %v, want ErrTooManyCeilings", maxCeilings+1, err)
	}
}
