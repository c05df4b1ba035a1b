package analyze

import (
	"fmt"
	"strings"

	"temper.codes/temper-train/internal/table"
)

// clusterTable is the CLUSTERS table: by default the class and the numbers
// it is decided by (CPU share, run p90, wake rate, wake-latency p99, as
// member medians) with the families last; the wide view adds the sample
// counts and the rest of the evidence. Under each row, the reason for its
// class and the four scores.
func clusterTable(a *Analysis) *table.Table {
	t := table.New(
		table.Column{Name: "CLUSTER"},
		table.Column{Name: "CLASS", Left: true},
		table.Column{Name: "CONF"},
		table.Column{Name: "THREADS"},
		table.Column{Name: "CPU%"},
		table.Column{Name: "RUN p50", Wide: true},
		table.Column{Name: "RUN p90"},
		table.Column{Name: "RUNS", Wide: true},
		table.Column{Name: "TIME-W RUN p50", Wide: true},
		table.Column{Name: "WAKES/s"},
		table.Column{Name: "WAKEUPS", Wide: true},
		table.Column{Name: "WAKE p99"},
		table.Column{Name: "D%", Wide: true},
		table.Column{Name: "SRC/CHAIN/IO/HARDIRQ", Wide: true},
		table.Column{Name: "FAMILIES", Left: true, Fit: true},
	)
	for _, c := range a.Clusters {
		fams := make([]string, len(c.Families))
		for i, f := range c.Families {
			fams[i] = fmt.Sprintf("%s×%d", f.Family, f.Count)
		}
		e := c.Evidence
		runs := memberDists(a, c.ID, func(f *Features) Dist { return f.Run })
		wakes := memberDists(a, c.ID, func(f *Features) Dist { return f.WakeLatency })
		t.Row(fmt.Sprint(c.ID), string(c.Class), fmt.Sprintf("%.2f", c.Confidence), fmt.Sprint(len(c.Members)), pct(c.CPUShare),
			medianOf(runs, func(d Dist) int64 { return d.P50 }), medianOf(runs, func(d Dist) int64 { return d.P90 }),
			fmt.Sprint(e.Runs), fmtDur(e.RunTimeP50),
			fmt.Sprintf("%.1f", e.WakeRate), fmt.Sprint(e.Wakeups), medianOf(wakes, func(d Dist) int64 { return d.P99 }),
			pct(e.DiskShare), fmt.Sprintf("%.2f/%.2f/%.2f/%.2f", e.Source, e.Chain, e.IOWake, e.HardIRQ),
			strings.Join(fams, " "))
		t.Note(fmt.Sprintf("%s; scores sync %.2f / latency %.2f / chain %.2f / sporadic %.2f", c.Reason,
			c.Scores.SyncCompute, c.Scores.LatencyCritical, c.Scores.IOWakeChain, c.Scores.Sporadic))
	}
	return t
}

// memberDists are the distributions of a cluster's members that have
// samples.
func memberDists(a *Analysis, cluster int, dist func(*Features) Dist) []Dist {
	var out []Dist
	for i := range a.Threads {
		if a.Threads[i].Cluster == cluster {
			if d := dist(&a.Threads[i].Features); d.N > 0 {
				out = append(out, d)
			}
		}
	}
	return out
}

// medianOf is the median over dists of one quantile, "-" without samples.
func medianOf(dists []Dist, q func(Dist) int64) string {
	if len(dists) == 0 {
		return "-"
	}
	v := make([]float64, len(dists))
	for i, d := range dists {
		v[i] = float64(q(d))
	}
	return fmtDur(int64(median(v)))
}

// threadTable is the THREADS table: by default each thread's cluster and
// class, CPU share, run p90, wake rate, wake-latency p99 and top waker; the
// wide view adds the family, the thread's own class, the other quantiles
// with their sample counts, how it leaves the CPU, migrations and latency
// criticality.
func threadTable(threads []Thread) *table.Table {
	t := table.New(
		table.Column{Name: "TID"},
		table.Column{Name: "COMM", Left: true},
		table.Column{Name: "FAMILY", Left: true, Wide: true},
		table.Column{Name: "CL"},
		table.Column{Name: "CLASS", Left: true},
		table.Column{Name: "OWN CLASS", Left: true, Wide: true},
		table.Column{Name: "CPU%"},
		table.Column{Name: "RUNS", Wide: true},
		table.Column{Name: "RUN p50", Wide: true},
		table.Column{Name: "RUN p90"},
		table.Column{Name: "RUN p99", Wide: true},
		table.Column{Name: "WAKEUPS", Wide: true},
		table.Column{Name: "WAKES/s"},
		table.Column{Name: "WAKE p50", Wide: true},
		table.Column{Name: "WAKE p90", Wide: true},
		table.Column{Name: "WAKE p99"},
		table.Column{Name: "PREEMPT/S/D %", Wide: true},
		table.Column{Name: "MIGR", Wide: true},
		table.Column{Name: "CPUS", Wide: true},
		table.Column{Name: "LATCRIT", Wide: true},
		table.Column{Name: "TOP WAKER", Left: true, Fit: true},
	)
	for _, th := range threads {
		f := th.Features
		waker := "-"
		if len(th.WokenBy) > 0 {
			waker = fmt.Sprintf("%s %.0f%%", th.WokenBy[0].Node, 100*th.WokenBy[0].Share)
		}
		own := "-"
		if th.OwnClass != th.Class {
			own = string(th.OwnClass)
		}
		run, lat := f.Run, f.WakeLatency
		t.Row(fmt.Sprint(th.Tid), th.Comm, th.Family, fmt.Sprint(th.Cluster), string(th.Class), own, pct(f.CPUShare),
			fmt.Sprint(run.N), durOrDash(run.P50, run.N), durOrDash(run.P90, run.N), durOrDash(run.P99, run.N),
			fmt.Sprint(f.Wakeups), fmt.Sprintf("%.1f", f.WakeRate),
			durOrDash(lat.P50, lat.N), durOrDash(lat.P90, lat.N), durOrDash(lat.P99, lat.N),
			fmt.Sprintf("%.0f/%.0f/%.0f of %d", 100*f.PreemptShare, 100*f.SleepShare, 100*f.DiskShare, f.SwitchOuts),
			fmt.Sprint(f.Migrations), fmt.Sprint(len(f.CPUs)), fmt.Sprintf("%.0f", th.LatCrit.Normalised), waker)
	}
	return t
}
