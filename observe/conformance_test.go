package observe

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/need"
)

// conformanceDir finds the Perfetto trace_processor cases shipped beside the
// repository (../shared/conformance/perfetto), or $TEMPER_CONFORMANCE_DIR.
func conformanceDir(t *testing.T) string {
	t.Helper()
	if d := conformanceDirOrEmpty(); d != "" {
		return d
	}
	need.Unmet(t, "the Perfetto conformance cases", "put them in ../shared/conformance/perfetto beside the repository, or set TEMPER_CONFORMANCE_DIR")
	return ""
}

// model is everything the conformance queries look at.
type model struct {
	threads *Threads
	slices  []SliceRow
	states  []StateRow
}

func loadModel(t *testing.T, path string) *model {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer r.Close()
	m := &model{threads: NewThreads()}
	s := NewSched(m.threads)
	s.Rows = RowFuncs{
		OnSlice: func(r SliceRow) { m.slices = append(m.slices, r) },
		OnState: func(r StateRow) { m.states = append(m.states, r) },
	}
	if err := ForEach(r, func(ev *Event) error { s.Add(ev); return nil }); err != nil {
		t.Fatalf("read: %v", err)
	}
	s.Finish()
	return m
}

func q(s string) string { return `"` + s + `"` }

const null = `"[NULL]"`

func orNull(v int64) string {
	if v == 0 {
		return null
	}
	return fmt.Sprint(v)
}

// queries computes, from our model, what each case's query.sql asks
// trace_processor for, as CSV in trace_processor's spelling.
var queries = map[string]func(m *model) []string{
	// select cpu, ts, dur, tid, thread.name from sched join thread using (utid) order by cpu, ts
	"test_crop_compact_sched_switch": func(m *model) []string {
		rows := append([]SliceRow(nil), m.slices...)
		sort.Slice(rows, func(i, j int) bool {
			if rows[i].CPU != rows[j].CPU {
				return rows[i].CPU < rows[j].CPU
			}
			return rows[i].TS < rows[j].TS
		})
		out := []string{`"cpu","ts","dur","tid","name"`}
		for _, r := range rows {
			th := m.threads.All()[r.UTID]
			out = append(out, fmt.Sprintf("%d,%d,%d,%d,%s", r.CPU, r.TS, r.Dur, th.Tid, q(th.Name)))
		}
		return out
	},
	// SELECT ts, tid, io_wait FROM thread_state JOIN thread USING (utid) WHERE state = 'D' ORDER BY ts
	"test_sched_blocked_systrace_state_d": func(m *model) []string {
		out := []string{`"ts","tid","io_wait"`}
		rows := sortedStates(m)
		for _, r := range rows {
			if r.State != StateUninterruptible {
				continue
			}
			io := null
			if r.IOWait >= 0 {
				io = fmt.Sprint(r.IOWait)
			}
			out = append(out, fmt.Sprintf("%d,%d,%s", r.TS, m.threads.All()[r.UTID].Tid, io))
		}
		return out
	},
	// SELECT utid, tid, name from thread where tid = 0
	"test_task_newtask_swapper_by_init": func(m *model) []string {
		out := []string{`"utid","tid","name"`}
		for _, th := range m.threads.All() {
			if th.Tid == 0 {
				out = append(out, fmt.Sprintf("%d,%d,%s", th.UTID, th.Tid, q(th.Name)))
			}
		}
		return out
	},
	// SELECT waker_utid FROM thread_state
	"test_task_newtask_waker_utid": func(m *model) []string {
		out := []string{`"waker_utid"`}
		for _, r := range sortedStates(m) {
			w := null
			if r.Waker >= 0 {
				w = fmt.Sprint(r.Waker)
			}
			out = append(out, w)
		}
		return out
	},
	// select utid, tid, name, start_ts, end_ts from thread
	"test_thread_new_task_rename": threadTable,
	"test_thread_task_rename":     threadTable,
	// SELECT tid, pid, process.name AS pname, thread.name AS tname FROM thread
	// LEFT JOIN process USING(upid) WHERE tid > 0 ORDER BY tid
	"test_unknown_thread_name_tracking": func(m *model) []string {
		out := []string{`"tid","pid","pname","tname"`}
		ths := append([]*Thread(nil), m.threads.All()...)
		sort.SliceStable(ths, func(i, j int) bool { return ths[i].Tid < ths[j].Tid })
		for _, th := range ths {
			if th.Tid <= 0 {
				continue
			}
			pid, pname := null, null
			if th.Tgid != 0 {
				pid = fmt.Sprint(th.Tgid)
				if main := m.threads.Lookup(th.Tgid); main != nil {
					pname = q(main.Name)
				}
			}
			out = append(out, fmt.Sprintf("%d,%s,%s,%s", th.Tid, pid, pname, q(th.Name)))
		}
		return out
	},
}

func threadTable(m *model) []string {
	out := []string{`"utid","tid","name","start_ts","end_ts"`}
	for _, th := range m.threads.All() {
		out = append(out, fmt.Sprintf("%d,%d,%s,%s,%s", th.UTID, th.Tid, q(th.Name), orNull(th.StartTS), orNull(th.EndTS)))
	}
	return out
}

// sortedStates orders state rows as trace_processor's table holds them: by
// the time each row was opened.
func sortedStates(m *model) []StateRow {
	rows := append([]StateRow(nil), m.states...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].TS < rows[j].TS })
	return rows
}

func TestPerfettoConformance(t *testing.T) {
	dir := conformanceDir(t)
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index []struct {
		Case   string `json:"case"`
		Source string `json:"source"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(index) == 0 {
		t.Fatal("index.json lists no cases")
	}
	for _, c := range index {
		t.Run(c.Case, func(t *testing.T) {
			query, ok := queries[c.Case]
			if !ok {
				t.Fatalf("no adapter for case %s (from %s): write one for its query.sql", c.Case, c.Source)
			}
			cdir := filepath.Join(dir, c.Case)
			trace := filepath.Join(cdir, "trace.pb")
			if _, err := os.Stat(trace); err != nil {
				trace = filepath.Join(cdir, "trace.systrace")
			}
			want, err := os.ReadFile(filepath.Join(cdir, "expected.csv"))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(query(loadModel(t, trace)), "\n")
			if strings.TrimSpace(string(want)) != got {
				sql, _ := os.ReadFile(filepath.Join(cdir, "query.sql"))
				t.Errorf("%s\ntrace_processor:\n%s\nours:\n%s", sql, want, got)
			}
		})
	}
}
