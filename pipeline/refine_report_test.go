package pipeline

import (
	"strings"
	"testing"

	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/refine/ledger"
)

// TestRefineRunReport pins the summary refine and train print, with a
// refined profile written and without.
func TestRefineRunReport(t *testing.T) {
	res := &refine.Result{
		Calibration: []refine.Calibration{{Bg: 0, N: 8, CV: map[string]float64{"p99_ms": 0.031}}, {Bg: 2, N: 8, CV: map[string]float64{"p99_ms": 0.1}}},
		Rounds:      make([]refine.Round, 2),
		Accepted:    []refine.Step{{Group: "workers", Param: "treatment", From: "exclusive", To: "latency"}},
		Stopped:     "converged: round 2's winner did not gain enough to step",
		Final:       []ledger.Decision{{Step: "stock CFS vs refined", Line: "final  stock CFS vs refined  look 1/2  all levels  Δ -12.0% [-15.1% -9.0%]  p=0.001"}},
		Trials:      64,
		Noise:       0.052, FinalN: 12, Detectable: 0.18,
	}
	run := &RefineRun{Dir: "out", Ledger: "out/ledger.jsonl", Refined: "out/wl/2cpu.toml", Config: refine.Config{Metric: "p99_ms"}, Result: res}
	head := `calibration (A/A):
  bg=0  p99_ms CV 3.1% over 8 trials
  bg=2  p99_ms CV 10.0% over 8 trials
noise     p99_ms 5.2% per trial (pooled over the races); final n=12 per arm and level, detects ≥ 18.0% (90% power)
hill climbing: 2 round(s), 1 step(s) taken; converged: round 2's winner did not gain enough to step
  step  group "workers": treatment exclusive → latency
final (stock CFS vs refined):
  final  stock CFS vs refined  look 1/2  all levels  Δ -12.0% [-15.1% -9.0%]  p=0.001
trials    64
ledger    out/ledger.jsonl
report    out/REPORT.md
`
	for _, tc := range []struct {
		refined, tail string
	}{
		{"out/wl/2cpu.toml", "refined   out/wl/2cpu.toml\n"},
		{"", "refined   none written: the refined profile did not beat stock CFS in the final comparison\n"},
	} {
		run.Refined = tc.refined
		var b strings.Builder
		if err := run.Report(&b); err != nil {
			t.Fatal(err)
		}
		if want := head + tc.tail; b.String() != want {
			t.Errorf("Report() =\n%s\nwant\n%s", b.String(), want)
		}
	}
}
