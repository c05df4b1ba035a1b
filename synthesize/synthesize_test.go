package synthesize

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/observe/snapshot"
	"temper.codes/temper-train/profiles"
)

// mkSnapshot is a snapshot of a machine with the given cores and SMT width
// and a pod whose two containers have the given CPU requests and limits.
func mkSnapshot(cores, tpc int, requests, limits [2]int64) *snapshot.Snapshot {
	t := &machine.Topology{}
	for c := range cores {
		core := machine.Core{CoreID: c}
		for s := range tpc {
			core.CPUs = append(core.CPUs, c+s*cores)
		}
		t.Cores = append(t.Cores, core)
	}
	var all []int
	for cpu := range cores * tpc {
		all = append(all, cpu)
	}
	t.Online = all
	t.NUMANodes = []machine.NUMANode{{ID: 0, CPUs: all}}
	// The node was busy a third of the time: room for exclusive cores.
	n := int64(cores * tpc)
	return &snapshot.Snapshot{
		Schema:   snapshot.Schema,
		Topology: t,
		NodeCPU:  &snapshot.NodeCPU{Begin: &snapshot.CPUTimes{}, End: &snapshot.CPUTimes{User: 100 * n, Idle: 200 * n}},
		Pod: &snapshot.Pod{Namespace: "ml", Name: "llama-0", Containers: []snapshot.Container{
			{Name: "server", Image: "ghcr.io/acme/llama-server:1.2@sha256:abcd", CPURequestMilli: requests[0], CPULimitMilli: limits[0]},
			{Name: "sidecar", Image: "busybox", CPURequestMilli: requests[1], CPULimitMilli: limits[1]},
		}},
	}
}

// inference is a two-thread inference server: the seed's llama.cpp case.
func inference() *analyze.Analysis {
	return mkAnalysis(map[int]analyze.Class{1: analyze.ClassSyncCompute, 2: analyze.ClassSporadic},
		th{tid: 100, tgid: 100, comm: "llama-server", cluster: 2, share: 0.01},
		th{tid: 101, tgid: 100, comm: "llama-infer-0", cluster: 1, share: 0.95, p90us: 4000},
		th{tid: 102, tgid: 100, comm: "llama-infer-1", cluster: 1, share: 0.94, p90us: 3900},
		th{tid: 103, tgid: 100, comm: "llama-http", cluster: 2, share: 0.02},
	)
}

func TestSynthesize(t *testing.T) {
	cases := []struct {
		name    string
		a       *analyze.Analysis
		opt     Options
		want    []string // summary lines
		arith   string   // in some group's arithmetic
		warning string   // in a warning ("" = none expected)
		desc    string   // in the description
	}{
		{
			name: "two hot threads, 2250m: 0.85 not 0.9",
			a:    inference(),
			opt:  Options{Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 2250, NodeBusyCPUs: 2.5},
			want: []string{
				"compute exclusive cores=2 fraction=0.85 comm=llama-infer",
				"rest normal all",
			},
			arith: "cpu_fraction 0.85 → ceil(0.85 × 2.25) = ceil(1.9125) = 2 cores (0.9 would give ceil(0.9 × 2.25) = ceil(2.025) = 3 cores for 2 hot threads)",
		},
		{
			name:  "the node's arithmetic is written out",
			a:     inference(),
			opt:   Options{Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 2250, NodeBusyCPUs: 2.5},
			want:  []string{"compute exclusive cores=2 fraction=0.85 comm=llama-infer", "rest normal all"},
			arith: "shared CPUs L − n·T = 8 − 2·2 = 4 ≥ 2; rest of the node's demand 2.5 − 1.89 = 0.61 CPUs ≤ 0.7 × 4 = 2.8 CPUs (node-wide use: given by the caller)",
		},
		{
			name:    "the rest of the node does not fit in 0.7 of the shared CPUs",
			a:       inference(),
			opt:     Options{Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 2250, NodeBusyCPUs: 4.8},
			want:    []string{"compute normal comm=llama-infer", "rest yield all"},
			arith:   "the rest of the node's demand 4.8 − 1.89 = 2.91 CPUs does not fit in 0.7 of the 4 shared CPUs (2.8)",
			warning: "demoted to normal",
		},
		{
			name:    "node-wide use unknown: no exclusive cores",
			a:       inference(),
			opt:     Options{Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 2250},
			want:    []string{"compute normal comm=llama-infer", "rest yield all"},
			arith:   "the node-wide CPU use is not measured: no snapshot",
			warning: "demoted to normal",
		},
		{
			name:    "a request of 1500m holds one whole CPU, not two",
			a:       inference(),
			opt:     Options{Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 1500, NodeBusyCPUs: 2.5},
			want:    []string{"compute normal comm=llama-infer", "rest yield all"},
			arith:   "2 hot threads need 2 whole cores and the request 1500m holds 1 whole CPU",
			warning: "demoted to normal",
		},
		{
			// Redis with a real request on the 2-core node its trace came
			// from: a core of its own would leave one CPU for the rest.
			name: "one core would stay shared on a 2-core node",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassLatencyCritical, 2: analyze.ClassSporadic},
				th{tid: 1, tgid: 1, comm: "redis-server", cluster: 1, share: 0.43},
				th{tid: 2, tgid: 1, comm: "bio_aof_fsync", cluster: 2}),
			opt:     Options{Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}, RequestMillicores: 1000, NodeBusyCPUs: 0.6},
			want:    []string{"latency-critical normal comm=redis-server", "rest yield all"},
			arith:   "C − n = 2 − 1 = 1 cores would stay shared, fewer than 2",
			warning: "demoted to normal",
		},
		{
			name: "request, shape and node-wide use from the snapshot",
			a:    inference(),
			opt:  Options{Snapshot: mkSnapshot(4, 2, [2]int64{2000, 250}, [2]int64{2000, 250}), SnapshotPath: "snap.json"},
			want: []string{
				"compute exclusive cores=2 fraction=0.85 comm=llama-infer",
				"rest normal all",
			},
			arith: "rest of the node's demand 2.667 − 1.89 = 0.777 CPUs ≤ 0.7 × 4 = 2.8 CPUs (node-wide use: the snapshot's node_cpu",
		},
		{
			// The Redis case: 0.43 CPU of use rounded up to 1000m
			// bought a whole core of a 2-core node.
			name:    "a request inferred from use buys no exclusive cores",
			a:       inference(),
			opt:     Options{Shape: &profiles.Shape{Cores: 4, ThreadsPerCore: 2}, NodeBusyCPUs: 2.5},
			want:    []string{"compute normal comm=llama-infer", "rest yield all"},
			arith:   "demoted to normal: the request 2000m was inferred from the observed use, not promised: an inferred request buys no exclusive cores",
			warning: "demoted to normal",
		},
		{
			name: "three hot threads on two cores are demoted",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassSyncCompute},
				th{tid: 1, tgid: 1, comm: "onnx", cluster: 1, share: 0.9},
				th{tid: 2, tgid: 1, comm: "onnx-op-1", family: "onnx", cluster: 1, share: 0.9},
				th{tid: 3, tgid: 1, comm: "onnx-op-2", family: "onnx", cluster: 1, share: 0.9}),
			opt:     Options{Shape: &profiles.Shape{LogicalCPUs: 4, Cores: 2, ThreadsPerCore: 2}, RequestMillicores: 3000},
			want:    []string{"compute normal comm=onnx", "rest normal all"},
			arith:   "demoted to normal: 3 hot threads need 3 whole cores; the shape has 2 cores, 0 taken by earlier exclusive groups and 1 kept shared, so 1 can be given",
			warning: "no profile can manufacture a core",
		},
		{
			name: "three hot threads on a 4-core node would leave one core shared",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassSyncCompute},
				th{tid: 1, tgid: 1, comm: "onnx", cluster: 1, share: 0.9},
				th{tid: 2, tgid: 1, comm: "onnx-op-1", family: "onnx", cluster: 1, share: 0.9},
				th{tid: 3, tgid: 1, comm: "onnx-op-2", family: "onnx", cluster: 1, share: 0.9}),
			opt:     Options{Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 3000, NodeBusyCPUs: 3},
			want:    []string{"compute normal comm=onnx", "rest normal all"},
			arith:   "C − n = 4 − 3 = 1 cores would stay shared, fewer than 2",
			warning: "demoted to normal",
		},
		{
			name: "three hot threads, three cores on a 5-core node",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassSyncCompute},
				th{tid: 1, tgid: 1, comm: "onnx", cluster: 1, share: 0.9},
				th{tid: 2, tgid: 1, comm: "onnx-op-1", family: "onnx", cluster: 1, share: 0.9},
				th{tid: 3, tgid: 1, comm: "onnx-op-2", family: "onnx", cluster: 1, share: 0.9}),
			opt:  Options{Shape: &profiles.Shape{LogicalCPUs: 10, Cores: 5, ThreadsPerCore: 2}, RequestMillicores: 3000, NodeBusyCPUs: 3},
			want: []string{"compute exclusive cores=3 fraction=1 comm=onnx", "rest normal all"},
		},
		{
			name:    "a request too small for the hot threads demotes",
			a:       inference(),
			opt:     Options{Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 1000},
			want:    []string{"compute normal comm=llama-infer", "rest yield all"},
			arith:   "2 hot threads need 2 whole cores and the request 1000m holds 1 whole CPU",
			warning: "demoted to normal",
		},
		{
			name: "a hot latency-critical thread gets its core after compute",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassLatencyCritical, 2: analyze.ClassSporadic, 3: analyze.ClassSyncCompute},
				th{tid: 1, tgid: 1, comm: "redis-server", cluster: 1, share: 0.8},
				th{tid: 2, tgid: 1, comm: "bio_close_file", cluster: 2},
				th{tid: 3, tgid: 1, comm: "bio_aof", cluster: 2},
				th{tid: 4, tgid: 1, comm: "io_thd_1", cluster: 3, share: 0.5}),
			opt: Options{Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 2000, NodeBusyCPUs: 2},
			want: []string{
				"compute exclusive cores=1 fraction=0.5 comm=io_thd",
				"latency-critical exclusive cores=1 fraction=0.5 comm=redis-server",
				"rest yield all",
			},
			arith: "shape 4 cores: 1 taken before, 1 here, 2 left shared",
		},
		{
			name: "a shorter family name excludes a longer one",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassLatencyCritical, 2: analyze.ClassIOWakeChain},
				th{tid: 1, tgid: 1, comm: "wl", cluster: 1, share: 0.1},
				th{tid: 2, tgid: 1, comm: "wl-worker-0", cluster: 2, share: 0.1},
				th{tid: 3, tgid: 1, comm: "wl-worker-1", cluster: 2, share: 0.1}),
			opt: Options{Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}},
			want: []string{
				"latency-critical latency comm=wl exclude=wl-worker",
				"io-chain latency comm=wl-worker",
				"rest normal all",
			},
		},
		{
			name: "main thread and workers share a name: group_leader splits them",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassLatencyCritical, 2: analyze.ClassSporadic},
				th{tid: 1, tgid: 1, comm: "mariadbd", cluster: 2},
				th{tid: 2, tgid: 1, comm: "mariadbd", cluster: 1, share: 0.1},
				th{tid: 3, tgid: 1, comm: "mariadbd", cluster: 1, share: 0.1}),
			opt:   Options{Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}},
			want:  []string{"latency-critical latency comm=mariadbd leader=false", "rest normal all"},
			arith: "normal, not yield: it holds the main thread mariadbd of process 1, whose threads in group latency-critical are favoured",
		},
		{
			name: "one thread name in two programs: pcomm_prefix splits them",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassLatencyCritical, 2: analyze.ClassSporadic},
				th{tid: 10, tgid: 10, comm: "nginx", cluster: 2},
				th{tid: 11, tgid: 10, comm: "worker", cluster: 1, share: 0.2},
				th{tid: 20, tgid: 20, comm: "php-fpm", cluster: 2},
				th{tid: 21, tgid: 20, comm: "worker", cluster: 2}),
			opt:  Options{Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}},
			want: []string{"latency-critical latency comm=worker pcomm=nginx", "rest normal all"},
		},
		{
			name: "PostgreSQL roles all named postgres are merged, and the description says so",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassLatencyCritical, 2: analyze.ClassIOWakeChain, 3: analyze.ClassSporadic},
				th{tid: 10, tgid: 10, comm: "postgres", cluster: 3},
				th{tid: 11, tgid: 11, comm: "postgres", cluster: 1, share: 0.2},
				th{tid: 12, tgid: 12, comm: "postgres", cluster: 2, share: 0.05},
				th{tid: 13, tgid: 13, comm: "postgres", cluster: 3}),
			opt:     Options{Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}},
			want:    []string{"latency-critical latency comm=postgres", "rest normal all"},
			warning: "family postgres: threads that wanted groups io-chain, latency-critical, rest cannot be told apart by comm prefix, leadership or process comm (the analysis has no command lines for them: analyze with observe's snapshot): all are in group latency-critical",
			desc:    "cannot be told apart",
		},
		{
			name: "a family name longer than the kernel's comm is cut to 15 bytes",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassIOWakeChain, 2: analyze.ClassSporadic},
				th{tid: 1, tgid: 1, comm: "main", cluster: 2},
				th{tid: 2, tgid: 1, comm: "very-long-threa", family: "very-long-thread-pool", cluster: 1}),
			opt:  Options{Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}},
			want: []string{"io-chain latency comm=very-long-threa", "rest normal all"},
		},
		{
			name: "a comm cut inside a character is matched up to the last whole one",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassIOWakeChain, 2: analyze.ClassSporadic},
				th{tid: 1, tgid: 1, comm: "main", cluster: 2},
				th{tid: 2, tgid: 1, comm: "ab数据库线程池", cluster: 1}),
			opt:  Options{Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}},
			want: []string{"io-chain latency comm=ab数据库线", "rest normal all"},
		},
		{
			name: "a thread without a printable comm stays in rest",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassIOWakeChain, 2: analyze.ClassSporadic},
				th{tid: 1, tgid: 1, comm: "main", cluster: 2},
				th{tid: 2, tgid: 1, comm: "", cluster: 1},
				th{tid: 3, tgid: 1, comm: "\x01ctl", cluster: 1},
				th{tid: 4, tgid: 1, comm: "logger", cluster: 1}),
			opt:     Options{Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}},
			want:    []string{"io-chain latency comm=logger", "rest normal all"},
			warning: `thread 2 (comm "") wanted group io-chain but has no printable comm prefix`,
		},
		{
			name: "kernel threads are left out",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassIOWakeChain},
				th{tid: 1, tgid: 1, comm: "app", cluster: 1},
				th{tid: 2, tgid: 2, comm: "kworker/0:1", cluster: 1, kernel: true}),
			opt:  Options{Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}},
			want: []string{"io-chain latency comm=app", "rest normal all"},
		},
		{
			name: "nothing stands out: one normal catch-all",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassSporadic},
				th{tid: 1, tgid: 1, comm: "idle", cluster: 1}),
			opt:  Options{Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}},
			want: []string{"rest normal all"},
		},
		{
			name: "compute without a hot thread is batch",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassSyncCompute, 2: analyze.ClassSporadic},
				th{tid: 1, tgid: 1, comm: "main", cluster: 2},
				th{tid: 2, tgid: 1, comm: "crunch", cluster: 1, share: 0.2}),
			opt:  Options{Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}},
			want: []string{"compute batch comm=crunch", "rest yield all"},
		},
		{
			name: "logical CPUs from the trace only: no exclusive cores, and it says so",
			a: func() *analyze.Analysis {
				a := inference()
				a.Trace.NumCPUs = 8
				return a
			}(),
			opt:     Options{},
			want:    []string{"compute normal comm=llama-infer", "rest yield all"},
			warning: "has no core count",
			desc:    "logical CPUs only, cores and SMT unknown",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opt.ID = "test"
			r, err := Profile(c.a, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(r.Profile); !slices.Equal(got, c.want) {
				t.Errorf("groups:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
			if c.arith != "" && !slices.ContainsFunc(r.Profile.ThreadGroups, func(g profiles.ThreadGroup) bool {
				return strings.Contains(g.Evidence.Arithmetic, c.arith)
			}) {
				t.Errorf("no arithmetic contains %q:\n%s", c.arith, arithmetics(r.Profile))
			}
			switch {
			case c.warning == "" && len(r.Warnings) > 0:
				t.Errorf("unexpected warnings: %q", r.Warnings)
			case c.warning != "" && !slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, c.warning) }):
				t.Errorf("no warning contains %q: %q", c.warning, r.Warnings)
			}
			if c.desc != "" && !strings.Contains(r.Profile.Description, c.desc) {
				t.Errorf("description lacks %q: %s", c.desc, r.Profile.Description)
			}
			checkProfile(t, c.a, r)
		})
	}
}

func arithmetics(p *profiles.Profile) string {
	var s []string
	for _, g := range p.ThreadGroups {
		s = append(s, g.Name+": "+g.Evidence.Arithmetic)
	}
	return strings.Join(s, "\n")
}

func TestSynthesizeErrors(t *testing.T) {
	eightCPUs := &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}
	cases := []struct {
		name string
		a    *analyze.Analysis
		opt  Options
		want string
	}{
		{"no id", inference(), Options{Shape: eightCPUs}, "no profile id: give one"},
		{"bad id", inference(), Options{ID: "My_Service", Shape: eightCPUs}, `profile id "My_Service": use lowercase letters`},
		{"no threads", mkAnalysis(map[int]analyze.Class{1: analyze.ClassSporadic}), Options{ID: "x", Shape: eightCPUs}, "no threads: nothing to group"},
		{"only kernel threads", mkAnalysis(map[int]analyze.Class{1: analyze.ClassSporadic}, th{tid: 2, tgid: 2, comm: "kthreadd", cluster: 1, kernel: true}),
			Options{ID: "x", Shape: eightCPUs}, "every thread is a kernel thread"},
		{"unknown class", mkAnalysis(map[int]analyze.Class{1: "gpu_feeder"}, th{tid: 1, tgid: 1, comm: "a", cluster: 1}),
			Options{ID: "x", Shape: eightCPUs}, `cluster 1 has class "gpu_feeder"`},
		{"unknown cluster", func() *analyze.Analysis {
			a := inference()
			a.Threads[0].Cluster = 9
			return a
		}(), Options{ID: "x", Shape: eightCPUs}, "is in cluster 9, which the analysis does not list"},
		{"NaN share", func() *analyze.Analysis {
			a := inference()
			a.Threads[1].Features.CPUShare = math.NaN()
			return a
		}(), Options{ID: "x", Shape: eightCPUs}, "cpu_share NaN is not a rate or share"},
		{"no shape at all", inference(), Options{ID: "x"}, "no machine shape: no snapshot, no shape given, and the analysis' trace did not record its CPU count"},
		{"shape any", inference(), Options{ID: "x", Shape: &profiles.Shape{}}, "shape any"},
		{"shape against the trace's CPU count", func() *analyze.Analysis {
			a := inference()
			a.Trace.NumCPUs = 2
			return a
		}(), Options{ID: "x", Shape: eightCPUs}, "--shape 8cpu-4c-smt2 has 8 logical CPUs but the trace was recorded on 2"},
		{"thread on a CPU the shape lacks", func() *analyze.Analysis {
			a := inference()
			a.Threads[2].Features.CPUs = []int{0, 5}
			return a
		}(), Options{ID: "x", Shape: &profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}}, `thread 102 ("llama-infer-1") ran on CPU 5, which --shape 2cpu-2c-smt1 does not have`},
		{"shape against the snapshot", inference(), Options{ID: "x", Shape: &profiles.Shape{Cores: 8}, Snapshot: mkSnapshot(4, 2, [2]int64{}, [2]int64{})},
			"shape 8c contradicts the snapshot's topology 8cpu-4c-smt2"},
		{"request above the limit", inference(), Options{ID: "x", RequestMillicores: 3000, Snapshot: mkSnapshot(4, 2, [2]int64{1000, 0}, [2]int64{2000, 250})},
			"request 3000m (from --request) is above the CPU limit 2250m"},
	}
	// The option each error points at, for the command to name its flag.
	option := map[string]error{
		"no id": ErrID, "bad id": ErrID, "no shape at all": ErrNoShape, "shape any": ErrShape,
		"shape against the snapshot": ErrShape, "request above the limit": ErrRequest,
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Profile(c.a, c.opt)
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, c.want)
			}
			if o := option[c.name]; o != nil && !errors.Is(err, o) {
				t.Errorf("error %q does not wrap %v", err, o)
			}
		})
	}
}

func TestReadAnalysis(t *testing.T) {
	var good bytes.Buffer
	if err := inference().Write(&good); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, data, want string
	}{
		{"empty", "  \n", "empty file"},
		{"not JSON", "schema_version = 1\n", "invalid JSON at byte 1"},
		{"array", "[1, 2]", "not an analysis: top-level JSON array"},
		{"no schema", `{"threads": []}`, `no "schema" field: not a temper-train analysis`},
		{"snapshot", `{"schema": "temper-train/snapshot/v1"}`, `schema "temper-train/snapshot/v1", want "temper-train/analysis/v1"`},
		{"truncated", good.String()[:good.Len()/2], "truncated JSON"},
		{"wrong type", `{"schema": "temper-train/analysis/v1", "threads": [{"tid": "x"}]}`, "field threads.tid: JSON string where int32 is expected"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadAnalysis([]byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line containing %q", err, c.want)
			}
			// Data that is no analysis at all is told apart from a broken one.
			if notAnalysis := c.name == "empty" || c.name == "no schema" || c.name == "snapshot"; errors.Is(err, ErrNotAnalysis) != notAnalysis {
				t.Errorf("error %v: errors.Is(ErrNotAnalysis) = %v, want %v", err, !notAnalysis, notAnalysis)
			}
		})
	}
	a, err := ReadAnalysis(good.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Threads) != 4 || a.Threads[1].Comm != "llama-infer-0" {
		t.Errorf("read back %d threads", len(a.Threads))
	}
}

// TestDeterministic: the same analysis, also after a JSON round trip, gives
// byte-identical TOML.
func TestDeterministic(t *testing.T) {
	opt := Options{ID: "llama", Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 2250, Source: "a.json"}
	var outs [][]byte
	for i := range 3 {
		a := inference()
		if i == 2 {
			var b bytes.Buffer
			if err := a.Write(&b); err != nil {
				t.Fatal(err)
			}
			var err error
			if a, err = ReadAnalysis(b.Bytes()); err != nil {
				t.Fatal(err)
			}
		}
		r, err := Profile(a, opt)
		if err != nil {
			t.Fatal(err)
		}
		data, err := r.TOML()
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, data)
	}
	for i := 1; i < len(outs); i++ {
		if !bytes.Equal(outs[0], outs[i]) {
			t.Fatalf("run %d differs:\n%s\n---\n%s", i, outs[0], outs[i])
		}
	}
}

func TestImageGlobs(t *testing.T) {
	cases := map[string][]string{
		"mariadb:11.4":          {"mariadb:*"},
		"busybox":               {"busybox:*"},
		"localhost:5000/app:v1": {"localhost:5000/app:*"},
		"ghcr.io/acme/llama-server:1.2@sha256:abcd": {"ghcr.io/acme/llama-server:*", "ghcr.io/acme/llama-server@*"},
		"":           nil,
		"weird[name": nil,
	}
	for img, want := range cases {
		if got := imageGlobs(img); !slices.Equal(got, want) {
			t.Errorf("imageGlobs(%q) = %q, want %q", img, got, want)
		}
	}
}

func TestFingerprintFromSnapshot(t *testing.T) {
	r, err := Profile(inference(), Options{ID: "llama", Snapshot: mkSnapshot(4, 2, [2]int64{2000, 250}, [2]int64{2000, 250})})
	if err != nil {
		t.Fatal(err)
	}
	f := r.Profile.Fingerprint
	want := []string{"busybox:*", "ghcr.io/acme/llama-server:*", "ghcr.io/acme/llama-server@*"}
	if !slices.Equal(f.Images, want) || f.Annotation != "llama" || !slices.Equal(f.ProcessNames, []string{"llama-server"}) {
		t.Errorf("fingerprint %+v", f)
	}
	if tr := r.Profile.Traits; tr.CPURequestMillicores != 2250 || tr.CPULimitMillicores != 2250 || tr.HotThreads != 2 || tr.Threads != 4 {
		t.Errorf("traits %+v", tr)
	}
	if k := r.Profile.MachineShape.Key(); k != "8cpu-4c-smt2" {
		t.Errorf("shape %s", k)
	}
}
