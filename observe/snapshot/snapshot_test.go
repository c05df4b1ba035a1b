package snapshot

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/machine"
)

const goldenPath = "testdata/snapshot.golden.json"

// fixedSnapshot exercises every part of the schema: a thread present
// throughout, one created and one exited during the trace, a v1 cgroup with
// a quota and a v2 one without the cpu controller, an agent that answered
// at begin and failed at end.
func fixedSnapshot() *Snapshot {
	begin := &ThreadState{
		Comm: "a) b (c)", State: "S", CPU: 1, CPUsAllowedList: "0-3", CPUsAllowed: []int{0, 1, 2, 3},
		Policy: "SCHED_OTHER", PolicyNum: 0, Nice: 5, VoluntaryCtxtSwitches: 10, NonvoluntaryCtxtSwitches: 2,
		UtimeNs: 20_000_000, StimeNs: 10_000_000, Cgroup: ThreadCgroup{V2: "/", V1CPU: "/kubepods/pod1"},
	}
	end := *begin
	end.State, end.CPU, end.VoluntaryCtxtSwitches, end.UtimeNs = "R", 3, 250, 90_000_000
	ext := &ThreadState{
		Comm: "worker", State: "R", CPU: 2, CPUsAllowedList: "2", CPUsAllowed: []int{2},
		Policy: "SCHED_EXT", PolicyNum: 7, Cgroup: ThreadCgroup{V2: "/", V1CPU: "/kubepods/pod1"},
	}
	fifo := &ThreadState{
		Comm: "rt", State: "S", CPU: 0, CPUsAllowedList: "0-3", CPUsAllowed: []int{0, 1, 2, 3},
		Policy: "SCHED_FIFO", PolicyNum: 1, RTPriority: 50, VoluntaryCtxtSwitches: 1, Cgroup: ThreadCgroup{V2: "/"},
	}
	wall := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	return &Snapshot{
		Schema: Schema,
		Host:   Host{Hostname: "node-a", KernelRelease: "6.12.0", BootID: "0f8e5a2c-1b7d-4c1e-9a55-3d2f6e7b8c90", NumCPU: 4, ClockTicks: 100},
		Taken: Taken{
			Begin: Stamp{Wall: wall, MonotonicNs: 1_000_000_000, DoneMonotonicNs: 1_002_000_000, Clock: "CLOCK_MONOTONIC",
				BoottimeNs: 1_500_000_000, DoneBoottimeNs: 1_502_000_000},
			End: &Stamp{Wall: wall.Add(10 * time.Second), MonotonicNs: 11_000_000_000, DoneMonotonicNs: 11_003_000_000, Clock: "CLOCK_MONOTONIC",
				BoottimeNs: 11_500_000_000, DoneBoottimeNs: 11_503_000_000},
		},
		Target: Target{Description: "pod default/web", Tgids: []int{100}},
		Pod: &Pod{Namespace: "default", Name: "web", UID: "uid-1", Node: "node-a", QOSClass: "Burstable",
			Annotations: map[string]string{"temper.codes/profile": "latency"},
			Containers:  []Container{{Name: "app", Image: "web:1", CPURequestMilli: 500, CPULimitMilli: 2000}}},
		Trace:  TraceParams{Attach: "tp_btf", DurationNs: 10_000_000_000, MaxEvents: 1 << 20, Params: map[string]string{"buffer": "8MiB"}},
		Events: EventCounts{Total: 123456, LostPerCPU: []int64{0, 3, 0, 0}},
		Topology: &machine.Topology{
			OnlineList: "0-3", Online: []int{0, 1, 2, 3},
			CPUs: []machine.CPU{
				{ID: 0, CoreID: 0, Package: 0, Siblings: []int{0, 2}, Core: 0, LLC: 0, NUMANode: 0},
				{ID: 1, CoreID: 1, Package: 0, Siblings: []int{1, 3}, Core: 1, LLC: 0, NUMANode: 0},
				{ID: 2, CoreID: 0, Package: 0, Siblings: []int{0, 2}, Core: 0, LLC: 0, NUMANode: 0},
				{ID: 3, CoreID: 1, Package: 0, Siblings: []int{1, 3}, Core: 1, LLC: 0, NUMANode: 0},
			},
			Cores:     []machine.Core{{Package: 0, CoreID: 0, CPUs: []int{0, 2}}, {Package: 0, CoreID: 1, CPUs: []int{1, 3}}},
			LLCs:      []machine.LLC{{ID: 0, Level: 3, CPUs: []int{0, 1, 2, 3}}},
			NUMANodes: []machine.NUMANode{{ID: 0, CPUs: []int{0, 1, 2, 3}}},
		},
		Threads: []Thread{
			{Tid: 100, Tgid: 100, StartTicks: 5000, Comm: "a) b (c)", PresentAtBegin: true, PresentAtEnd: true, Begin: begin, End: &end},
			{Tid: 101, Tgid: 100, StartTicks: 5001, Comm: "rt", PresentAtBegin: true, Begin: fifo},
			{Tid: 107, Tgid: 100, StartTicks: 5300, Comm: "worker", PresentAtEnd: true, End: ext},
		},
		Cgroups: []CgroupRecord{
			{
				Version: 1, Path: "/sys/fs/cgroup/cpu/kubepods/pod1", CPUAcctPath: "/sys/fs/cgroup/cpuacct/kubepods/pod1", Source: "process",
				Begin: &CgroupCPU{Version: 1, CPUController: true, Bandwidth: &Bandwidth{QuotaUsec: 200000, PeriodUsec: 100000}, Shares: i64(512),
					UsageNs: i64(1e9), UserNs: i64(8e8), SystemNs: i64(2e8), NrPeriods: i64(10), NrThrottled: i64(1), ThrottledNs: i64(5e6),
					Stat: map[string]int64{"nr_periods": 10, "nr_throttled": 1, "throttled_time": 5e6}},
				End: &CgroupCPU{Version: 1, CPUController: true, Bandwidth: &Bandwidth{QuotaUsec: 200000, PeriodUsec: 100000}, Shares: i64(512),
					UsageNs: i64(3e9), UserNs: i64(2e9), SystemNs: i64(1e9), NrPeriods: i64(110), NrThrottled: i64(31), ThrottledNs: i64(4e8),
					Stat: map[string]int64{"nr_periods": 110, "nr_throttled": 31, "throttled_time": 4e8}},
			},
			{
				Version: 2, Path: "/sys/fs/cgroup/unified", Source: "process",
				Begin: &CgroupCPU{Version: 2, UsageNs: i64(5e9), Stat: map[string]int64{"usage_usec": 5e6}, Missing: []string{"cpu.max", "cpu.weight"}},
			},
		},
		Agent: &Agent{
			URL:   "http://127.0.0.1:9090/observe",
			Begin: &AgentFetch{FetchedAt: wall, DurationNs: 1_500_000, Status: 200, Body: json.RawMessage(`{"profile":"latency","version":3}`)},
			End:   &AgentFetch{FetchedAt: wall.Add(10 * time.Second), DurationNs: 300_000, Error: "agent http://127.0.0.1:9090/observe: connection refused"},
		},
		Warnings: []string{"end: agent http://127.0.0.1:9090/observe: connection refused", "end: cgroup /sys/fs/cgroup/unified: no such file or directory"},
	}
}

func TestGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := fixedSnapshot().Write(&buf); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, goldenPath, buf.Bytes())

	// Load gives back the same snapshot, and writing it again the same bytes.
	s, err := Load(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	s.Write(&again)
	if !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Errorf("Load of %s then Write differs from the snapshot written:\n%s", goldenPath, again.String())
	}
	if s.Threads[0].Comm != "a) b (c)" || s.Pod.Containers[0].Image != "web:1" || s.Events.Lost() != 3 {
		t.Errorf("loaded snapshot lost data: %+v", s)
	}
	d, ok := s.Threads[0].Delta()
	if !ok || d.VoluntaryCtxtSwitches != 240 || d.UtimeNs != 70_000_000 {
		t.Errorf("thread delta %+v %v", d, ok)
	}
	if _, ok := s.Threads[1].Delta(); ok {
		t.Error("delta of a thread absent at end")
	}
	cd, err := s.CPUCgroup().Delta()
	if err != nil || *cd.Throttled != 30 || *cd.Periods != 100 || *cd.UsageNs != 2e9 {
		t.Errorf("cgroup delta %v, %v", cd, err)
	}
	if s.CPUCgroup().End.Bandwidth.CPUs() != 2 {
		t.Errorf("bandwidth %+v, want 2 CPUs", s.CPUCgroup().End.Bandwidth)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "snapshot.json")
	if err := fixedSnapshot().WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("files left behind: %v", ents)
	}
	if err := fixedSnapshot().WriteFile(filepath.Join(dir, "missing", "snapshot.json")); err == nil || !strings.Contains(err.Error(), "snapshot ") {
		t.Errorf("write into a missing directory: %v", err)
	}
}

// badInputs are snapshot files Load must refuse, with what the error says.
func badInputs(t testing.TB) []struct{ name, content, want string } {
	good, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	g := string(good)
	return []struct{ name, content, want string }{
		{"empty", "", "empty file"},
		{"blank", " \n\t", "empty file"},
		{"truncated", g[:len(g)/2], "truncated JSON"},
		{"truncated at start", "{", "truncated JSON"},
		{"wrong schema", strings.Replace(g, Schema, "temper-train/snapshot/v2", 1), `schema "temper-train/snapshot/v2", want "temper-train/snapshot/v1"`},
		{"other schema shape", `{"schema": "temper-train/snapshot/v0", "threads": {"100": {}}}`, `schema "temper-train/snapshot/v0"`},
		{"no schema", `{"threads": []}`, `no "schema" field`},
		{"schema not a string", `{"schema": 1}`, "field schema"},
		{"array", `[]`, "want an object"},
		{"syntax", `{"schema": temper}`, "invalid JSON at byte"},
		{"trailing garbage", g + "}", "invalid JSON at byte"},
		{"wrong type", strings.Replace(g, `"tid": 101`, `"tid": "101"`, 1), "field threads.tid"},
		{"no topology", strings.Replace(g, `"topology": {`, `"topology": null, "x": {`, 1), "no topology"},
		{"no tgids", strings.Replace(g, "\"tgids\": [\n      100\n    ]", `"tgids": []`, 1), "no tgids"},
		{"present flag without state", strings.Replace(g, `"present_at_end": false`, `"present_at_end": true`, 1), "present_at_end is true but end is null"},
		{"bad cgroup version", strings.Replace(g, `"version": 2,`, `"version": 3,`, 1), "version 3"},
	}
}

func TestLoadBadInput(t *testing.T) {
	for _, tt := range badInputs(t) {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "snapshot.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if !strings.HasPrefix(err.Error(), "snapshot "+path+": ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want \"snapshot %s: ...%s...\"", err, path, tt.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.json")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// FuzzLoad: no input panics Read, and whatever it accepts survives a
// write/read round trip unchanged.
func FuzzLoad(f *testing.F) {
	good, err := os.ReadFile(goldenPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	for _, b := range badInputs(f) {
		f.Add([]byte(b.content))
	}
	f.Add([]byte(`{"schema":"temper-train/snapshot/v1","topology":{},"target":{"tgids":[1]},"taken":{"begin":{"wall":"2025-01-01T00:00:00Z"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		var w1 bytes.Buffer
		if err := s.Write(&w1); err != nil {
			t.Fatalf("accepted snapshot does not encode: %v", err)
		}
		s2, err := Read(bytes.NewReader(w1.Bytes()))
		if err != nil {
			t.Fatalf("re-reading an accepted snapshot: %v\n%s", err, w1.Bytes())
		}
		var w2 bytes.Buffer
		s2.Write(&w2)
		if !bytes.Equal(w1.Bytes(), w2.Bytes()) {
			t.Fatalf("round trip changed the snapshot:\n%s\n%s", w1.Bytes(), w2.Bytes())
		}
	})
}
