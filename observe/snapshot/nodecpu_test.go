package snapshot

import (
	"math"
	"testing"
)

func TestNodeCPU(t *testing.T) {
	cases := []struct {
		name        string
		begin, end  string
		logical     int
		want        float64
		ok, badLine bool
	}{
		{name: "half busy on 2 CPUs", logical: 2, ok: true, want: 1,
			begin: "cpu  100 0 100 200 0 0 0 0 0 0", end: "cpu  200 0 200 400 0 0 0 0 0 0"},
		{name: "steal and iowait are not busy", logical: 4, ok: true, want: 1,
			begin: "cpu  0 0 0 0 0 0 0 0", end: "cpu  50 0 0 100 25 0 0 25"},
		{name: "old kernel: four fields and iowait", logical: 1, ok: true, want: 0.25,
			begin: "cpu 0 0 0 0 0", end: "cpu 10 0 0 30 0"},
		{name: "counters did not move", logical: 2, begin: "cpu 1 1 1 1 1", end: "cpu 1 1 1 1 1"},
		{name: "not the aggregate line", logical: 2, begin: "cpu0 1 1 1 1 1", end: "cpu 1 1 1 1 1", badLine: true},
		{name: "negative field", logical: 2, begin: "cpu -1 1 1 1 1", end: "cpu 1 1 1 1 1", badLine: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, errB := parseCPUTimes(c.begin)
			e, errE := parseCPUTimes(c.end)
			if (errB != nil || errE != nil) != c.badLine {
				t.Fatalf("parse errors %v, %v; want error %v", errB, errE, c.badLine)
			}
			if c.badLine {
				return
			}
			got, ok := (&NodeCPU{Begin: b, End: e}).BusyCPUs(c.logical)
			if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
				t.Errorf("BusyCPUs = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
	if _, ok := (*NodeCPU)(nil).BusyCPUs(2); ok {
		t.Error("a nil NodeCPU has a busy count")
	}
}
