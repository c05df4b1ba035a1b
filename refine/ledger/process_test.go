package ledger

import (
	"path/filepath"
	"testing"
)

// TestProcesses reads back the process records, and the text notes older
// ledgers kept the same facts in.
func TestProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []any{
		Note{Text: "pid 41; cfs state file /run/temper/41.json"}, // an older ledger's
		Note{Text: "pid of nothing"},
		Process{Pid: 42, StateFile: "/run/temper/42.json"},
	} {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	l, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Process{{Pid: 41, StateFile: "/run/temper/41.json"}, {Pid: 42, StateFile: "/run/temper/42.json"}}
	if len(l.Processes) != len(want) {
		t.Fatalf("processes %+v, want %+v", l.Processes, want)
	}
	for i, p := range l.Processes {
		if p.Type != KindProcess || p.Pid != want[i].Pid || p.StateFile != want[i].StateFile || p.Time.IsZero() {
			t.Errorf("process %d: %+v, want %+v", i, p, want[i])
		}
	}
}
