package ledger

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func header() Header {
	return Header{Profile: "p.toml", ProfileHash: "abc", Machine: Machine{Hostname: "h", Shape: "2cpu-2c-smt1", Kernel: "6.18"}, Seed: 7,
		Target: "pid 42 (redis)", Bench: []string{"./load", "-n", "1"}, Adapter: "jsonl", Backend: "cfs",
		Tools: map[string]string{"temper-train": "v1", "go": "go1.26"}}
}

// TestRoundTrip writes every record kind and reads them back, with the
// trial cut off by a crash reported as open.
func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	recs := []any{
		TrialStart{Trial: "cal/000", Stage: "calibration", Arm: "A", Candidate: "stock", Start: now, Spinners: []int{1, 2}},
		TrialEnd{Trial: "cal/000", Metrics: map[string]float64{"p99_ms": 1.5}, End: now.Add(time.Second)},
		TrialStart{Trial: "cal/001", Stage: "calibration", Arm: "B", Candidate: "stock", Start: now.Add(2 * time.Second), Spinners: []int{3}},
		Decision{Stage: "confirm", Metric: "p99_ms", N: [2]int{8, 8}, P: 0.01, Accepted: true},
		Note{Text: "hello"},
		Cycle{Cycle: 2, State: "failed", Before: "abc", After: "abc", Candidate: "def", Drill: true, Drift: []string{"matches-nothing: x"}, Reason: "rolled back"},
	}
	for _, r := range recs {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.Header.Seed != 7 || len(l.Starts) != 2 || len(l.Ends) != 1 || len(l.Decisions) != 1 || len(l.Notes) != 1 || l.Torn {
		t.Fatalf("read back %+v", l)
	}
	if len(l.Cycles) != 1 || l.Cycles[0].Type != KindCycle || !l.Cycles[0].Drill || l.Cycles[0].Drift[0] != "matches-nothing: x" {
		t.Errorf("cycles %+v", l.Cycles)
	}
	if !l.Decisions[0].Accepted || l.Decisions[0].Type != KindDecision {
		t.Errorf("decision %+v", l.Decisions[0])
	}
	open := l.Open()
	if len(open) != 1 || open[0].Trial != "cal/001" || open[0].Spinners[0] != 3 {
		t.Errorf("open trials %+v, want cal/001 with its spinner", open)
	}
	if d := l.Done(); len(d) != 1 || d["cal/000"].Metrics["p99_ms"] != 1.5 {
		t.Errorf("done %+v", d)
	}
}

// TestTornLine: a write cut off mid-line (SIGKILL) is dropped on reading
// and cut off before the next append.
func TestTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"type":"trial_start","trial":"x`)
	f.Close()
	l, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Torn || len(l.Starts) != 0 {
		t.Fatalf("torn %v starts %d", l.Torn, len(l.Starts))
	}
	w, err = Append(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(Note{Text: "resumed"}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	l, err = Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.Torn || len(l.Notes) != 1 {
		t.Fatalf("after append: torn %v notes %d", l.Torn, len(l.Notes))
	}
}

func TestBad(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "no header"},
		{"no header", `{"type":"note","text":"x"}` + "\n", "line 1: want the header"},
		{"garbage", `{"type":"header","version":1}` + "\nnot json\n", "line 2: not JSON"},
		{"unknown", `{"type":"header","version":1}` + "\n" + `{"type":"what"}` + "\n", `line 2: unknown record type "what"`},
		{"version", `{"type":"header","version":9}` + "\n", "version 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l.jsonl")
			os.WriteFile(path, []byte(tc.text), 0o644)
			_, err := Read(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCreateRefusesExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	os.WriteFile(path, nil, 0o644)
	if _, err := Create(path, header()); err == nil {
		t.Fatal("Create overwrote an existing ledger")
	}
}

// A decision read back from the ledger prints its effect as the decision
// line did.
func TestDecisionShift(t *testing.T) {
	d := Decision{Effect: Interval{Lo: -0.11, Center: -0.072, Hi: Num(math.Inf(1))}}
	if got, want := d.Shift(), "-7.2% [-11.0% +∞]"; got != want {
		t.Errorf("Shift() = %q; want %q", got, want)
	}
}

// TestReadRefusesOtherVersion: a ledger of another format version (an
// older engine's screen and confirm) is refused on reading, with a line
// that says what to do, so that no run resumes it.
func TestReadRefusesOtherVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	if err := os.WriteFile(path, []byte(`{"type":"header","version":1,"profile":"p.toml"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Read(path)
	if err == nil || !strings.Contains(err.Error(), "version 1, this temper-train reads version 2") || !strings.Contains(err.Error(), "start a new run") {
		t.Fatalf("err %v", err)
	}
}
