package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"temper.codes/temper-train/observe"
)

// The committed trace is a tracefs recording of testdata/workload/workload.c
// (pid 19560, 1.5 s, 2 CPUs; see testdata/traces/workload-tracefs.json).
const (
	workloadTrace = "../testdata/traces/workload-tracefs.txt.gz"
	workloadPid   = 19560
)

// workloadClasses are the classes the program's documented design
// (testdata/workload/README.md, "Roles") calls for, per family:
//
//   - wl-compute: a fork/join pool, ~2 ms of arithmetic per round, then a
//     barrier and a 3 ms sleep: ~40 % CPU each → sync_compute.
//   - wl-worker: waits on the request condvar, woken by the acceptor for
//     every request (~250/s each), ~30 µs of CPU → latency_critical.
//   - wl-logger: the WAL writer, woken by the four workers (fan-in) →
//     io_wake_chain.
//   - wl-syncer: woken by the logger, fdatasync()s in D → io_wake_chain.
//   - wl-timer (10 Hz, ~5 µs), wl-idle (never woken), wl-main (waits for a
//     signal) → sporadic.
//   - wl-acceptor: the accept loop. It is woken ~1000/s by its own
//     clock_nanosleep timer (hard interrupt context), runs a few µs and
//     wakes one worker per request. A self-paced thread is judged by what
//     it hands on (classify.go): nearly all its wakings go to threads that
//     are themselves request-serving, so it is latency_critical, the head
//     of the request path — as the lavd heuristic makes a waker as critical
//     as its wakees, and as a network-woken accept loop would be. (A timer
//     thread ticking as often but handing nothing on, such as memcached's
//     LRU maintainer, is sporadic housekeeping.)
var workloadClasses = map[string]Class{
	"wl-compute":  ClassSyncCompute,
	"wl-worker":   ClassLatencyCritical,
	"wl-acceptor": ClassLatencyCritical,
	"wl-logger":   ClassIOWakeChain,
	"wl-syncer":   ClassIOWakeChain,
	"wl-timer":    ClassSporadic,
	"wl-idle":     ClassSporadic,
	"wl-main":     ClassSporadic,
}

func analyzeWorkload(t testing.TB, rename func(tid int32, comm string) string) *Analysis {
	t.Helper()
	r, err := observe.Open(workloadTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rd observe.Reader = r
	if rename != nil {
		rd = &renamingReader{Reader: r, rename: rename}
	}
	a, err := Trace(rd, Options{Path: "workload-tracefs.txt.gz", Pids: []int{workloadPid}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestWorkloadClasses(t *testing.T) {
	a := analyzeWorkload(t, nil)
	if len(a.Threads) != 13 {
		t.Fatalf("%d target threads, want the workload's 13", len(a.Threads))
	}
	for _, th := range a.Threads {
		want, ok := workloadClasses[th.Family]
		if !ok {
			t.Errorf("unexpected family %q (comm %q)", th.Family, th.Comm)
			continue
		}
		if th.Class != want {
			t.Errorf("%s/%d: class %s, want %s (own %s, scores %+v)", th.Comm, th.Tid, th.Class, want, th.OwnClass, th.Scores)
		}
		if th.OwnClass != want {
			t.Errorf("%s/%d: own class %s, want %s (scores %+v)", th.Comm, th.Tid, th.OwnClass, want, th.Scores)
		}
	}
	for _, f := range a.Families {
		if len(f.Clusters) != 1 {
			t.Errorf("family %s split over clusters %v", f.Family, f.Clusters)
		}
	}
	// The scores decide clearly; confidence says so too where enough runs
	// back the cluster (the idle and timer threads run a few times only).
	for _, c := range a.Clusters {
		if _, share := c.Scores.best(); share < 0.6 {
			t.Errorf("cluster %d (%s): score share %.2f is low; scores %+v", c.ID, c.Class, share, c.Scores)
		}
		if c.Evidence.Runs >= 100 && c.Confidence < 0.6 {
			t.Errorf("cluster %d (%s): confidence %.2f is low with %d runs; scores %+v", c.ID, c.Class, c.Confidence, c.Evidence.Runs, c.Scores)
		}
	}
}

// TestWorkloadGraph checks the wake structure the program is written to
// have: acceptor → workers, workers → logger, logger → syncer, the compute
// pair waking each other at the barrier.
func TestWorkloadGraph(t *testing.T) {
	a := analyzeWorkload(t, nil)
	top := map[string]Peer{}
	for _, th := range a.Threads {
		for _, p := range th.WokenBy {
			if strings.HasPrefix(p.Node, "wl-") {
				top[th.Comm] = p // the busiest workload waker
				break
			}
		}
	}
	for _, w := range []string{"wl-worker-0", "wl-worker-1", "wl-worker-2", "wl-worker-3"} {
		if p := top[w]; !strings.HasPrefix(p.Node, "wl-acceptor/") || p.Share < 0.9 {
			t.Errorf("%s: top workload waker %+v, want wl-acceptor with ≥ 90%% of its wakeups", w, p)
		}
	}
	if p := top["wl-logger"]; !strings.HasPrefix(p.Node, "wl-worker-") {
		t.Errorf("wl-logger: top waker %+v, want a worker", p)
	}
	if p := top["wl-syncer"]; !strings.HasPrefix(p.Node, "wl-logger/") {
		t.Errorf("wl-syncer: top workload waker %+v, want wl-logger", p)
	}
	if p := top["wl-compute-0"]; !strings.HasPrefix(p.Node, "wl-compute-1/") {
		t.Errorf("wl-compute-0: top workload waker %+v, want its peer", p)
	}
	logger := threadFeatures(t, a, "wl-logger")
	if logger.FanIn < 3.5 || logger.Chain < 0.9 {
		t.Errorf("wl-logger: fan-in %.2f, chain %.2f; want ~4 workers feeding it", logger.FanIn, logger.Chain)
	}
	if s := threadFeatures(t, a, "wl-syncer"); s.DiskShare < 0.5 {
		t.Errorf("wl-syncer: D share %.2f, want most switch-outs in D (fdatasync)", s.DiskShare)
	}
	want := []string{"hardirq", "wl-acceptor", "wl-worker", "wl-logger", "wl-syncer"}
	found := false
	for _, c := range a.Graph.Chains {
		if len(c.Path) >= len(want) && slices.Equal(c.Path[:len(want)], want) {
			found = true
		}
	}
	if !found {
		t.Errorf("chains %+v lack %v", a.Graph.Chains, want)
	}
	hubs := map[string]Hub{}
	for _, h := range a.Graph.Hubs {
		hubs[strings.Split(h.Node, "/")[0]] = h
	}
	if hubs["wl-acceptor"].FanOut != 4 || hubs["wl-logger"].FanIn < 4 {
		t.Errorf("hubs %+v: want wl-acceptor fanning out to 4 and wl-logger fanned into by ≥ 4", a.Graph.Hubs)
	}
	// Latency criticality: the request path ranks above housekeeping.
	lc := map[string]float64{}
	for _, th := range a.Threads {
		lc[th.Family] = max(lc[th.Family], th.LatCrit.Final)
	}
	for _, low := range []string{"wl-timer", "wl-idle", "wl-main"} {
		if lc[low] >= lc["wl-worker"] || lc[low] >= lc["wl-acceptor"] {
			t.Errorf("latency criticality of %s (%.0f) not below the request path (worker %.0f, acceptor %.0f)",
				low, lc[low], lc["wl-worker"], lc["wl-acceptor"])
		}
	}
}

func threadFeatures(t *testing.T, a *Analysis, comm string) Features {
	t.Helper()
	for _, th := range a.Threads {
		if th.Comm == comm {
			return th.Features
		}
	}
	t.Fatalf("no thread %s", comm)
	return Features{}
}

// TestClassesIgnoreNames renames every thread and checks each thread keeps
// its class: opaque distinct names (no families) and one name for all (one
// family). Classification must come from behaviour alone.
func TestClassesIgnoreNames(t *testing.T) {
	base := analyzeWorkload(t, nil)
	want := map[int32]Class{}
	for _, th := range base.Threads {
		want[th.Tid] = th.Class
	}
	for name, rename := range map[string]func(int32, string) string{
		"opaque": func(tid int32, _ string) string { return fmt.Sprintf("t%x", tid*7919) },
		"same":   func(int32, string) string { return "app" },
	} {
		a := analyzeWorkload(t, rename)
		for _, th := range a.Threads {
			if want[th.Tid] != th.Class {
				t.Errorf("%s names: tid %d (%s) is %s, was %s", name, th.Tid, th.Comm, th.Class, want[th.Tid])
			}
		}
	}
}

// renamingReader rewrites every comm in the stream.
type renamingReader struct {
	observe.Reader
	rename func(tid int32, comm string) string
}

func (r *renamingReader) Next(ev *observe.Event) error {
	if err := r.Reader.Next(ev); err != nil {
		return err
	}
	if ev.Comm != "" {
		ev.Comm = r.rename(ev.Tid, ev.Comm)
	}
	if ev.PrevComm != "" && ev.Kind != observe.KindRename {
		ev.PrevComm = r.rename(ev.PrevTid, ev.PrevComm)
	}
	return nil
}

// TestDeterministicJSON analyses the same trace twice: the JSON must be
// byte-identical (map iteration order differs between the runs).
func TestDeterministicJSON(t *testing.T) {
	var out [2][]byte
	for i := range out {
		var b bytes.Buffer
		if err := analyzeWorkload(t, nil).Write(&b); err != nil {
			t.Fatal(err)
		}
		out[i] = b.Bytes()
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Fatal("two analyses of the same trace differ")
	}
	var doc map[string]any
	if err := json.Unmarshal(out[0], &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema"] != Schema {
		t.Errorf("schema %v, want %s", doc["schema"], Schema)
	}
	for _, key := range []string{"threads", "clusters", "graph", "lint", "families", "target", "trace"} {
		if _, ok := doc[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	th := doc["threads"].([]any)[0].(map[string]any)
	for _, key := range []string{"tid", "tgid", "comm", "family", "cluster", "class", "features"} {
		if _, ok := th[key]; !ok {
			t.Errorf("threads[0] lacks %q", key)
		}
	}
	if os.Getenv("ANALYZE_DUMP") != "" {
		os.Stdout.Write(out[0])
	}
}

// TestReportAndDOT renders the report and the DOT graph of the workload.
func TestReportAndDOT(t *testing.T) {
	a := analyzeWorkload(t, nil)
	var rep bytes.Buffer
	if err := a.Report(&rep, ReportOptions{Edges: 15}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CLUSTERS", "sync_compute", "latency_critical", "io_wake_chain", "sporadic",
		"WAKE EDGES (top 15", "CHAINS", "HUBS", "COMMUNITIES", "SMT stacking: no SMT information", "CFS bandwidth: no snapshot"} {
		if !strings.Contains(rep.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if testing.Verbose() {
		t.Log("\n" + rep.String())
	}
	var dot bytes.Buffer
	if err := a.WriteDOT(&dot); err != nil {
		t.Fatal(err)
	}
	d := dot.String()
	if !strings.HasPrefix(d, "digraph wakes {") || !strings.Contains(d, `"wl-acceptor/19561" -> "wl-worker-0/19562"`) ||
		strings.Count(d, "subgraph cluster_") != len(a.Clusters) {
		t.Errorf("unexpected DOT:\n%s", d)
	}
}

// TestReportThreadLimit: a large target's THREADS table shows the busiest
// threads only, and says so.
func TestReportThreadLimit(t *testing.T) {
	var threads []Thread
	for i := 0; i < 100; i++ {
		threads = append(threads, Thread{Tid: int32(i), Comm: fmt.Sprint("t", i), Features: Features{RunNs: int64(i)}})
	}
	shown := reportThreads(threads, 10)
	if len(shown) != 10 || shown[0].Tid != 90 || shown[9].Tid != 99 {
		t.Errorf("shown %d threads from %d to %d, want the 10 busiest (90..99) in order", len(shown), shown[0].Tid, shown[len(shown)-1].Tid)
	}
	a := &Analysis{Threads: threads}
	for _, c := range []struct{ allThreads, want string }{
		{"", "THREADS (the 60 busiest of 100)\n"},
		{"--json", "THREADS (the 60 busiest of 100; all are in --json)\n"},
	} {
		var b bytes.Buffer
		if err := a.Report(&b, ReportOptions{Edges: 5, AllThreads: c.allThreads}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("AllThreads %q: report does not say %q:\n%s", c.allThreads, c.want, b.String())
		}
	}
}
