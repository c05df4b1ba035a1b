package pipeline

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"temper.codes/temper-train/refine/report"
)

// Report writes the summary of a refine run: the A/A calibration's noise
// per background level (when one was asked for), the noise the race
// measured, the steps the hill climbing took and why it stopped, the
// final comparison's looks and levels against the reference, and where the
// ledger, the report and the refined profile went (or why none was
// written).
func (r *RefineRun) Report(w io.Writer) error {
	res, metric := r.Result, r.Config.Metric
	if len(res.Calibration) > 0 {
		fmt.Fprintf(w, "calibration (A/A):\n")
		for _, c := range res.Calibration {
			fmt.Fprintf(w, "  bg=%d  %s CV %.1f%% over %d trials\n", c.Bg, metric, 100*c.CV[metric], c.N)
		}
	}
	if r.Config.Equivalence > 0 && !math.IsNaN(res.Noise) && res.Noise > 0 {
		fmt.Fprintf(w, "noise     %s %.1f%% per trial (within each arm, the first look's trials); last look n=%d per arm and level\n", metric, 100*res.Noise, res.FinalN)
	} else if !math.IsNaN(res.Noise) && res.Noise > 0 {
		fmt.Fprintf(w, "noise     %s %.1f%% per trial (pooled over the races); final n=%d per arm and level, detects ≥ %.1f%% (90%% power)\n", metric, 100*res.Noise, res.FinalN, 100*res.Detectable)
	}
	if r.Config.Equivalence > 0 {
		fmt.Fprintf(w, "equivalence check within ±%g%%: %s\n", 100*r.Config.Equivalence, res.Equivalence)
	} else {
		fmt.Fprintf(w, "hill climbing: %d round(s), %d step(s) taken; %s\n", len(res.Rounds), len(res.Accepted), res.Stopped)
	}
	for _, s := range res.Accepted {
		fmt.Fprintf(w, "  step  %s\n", s)
	}
	if len(res.Final) > 0 {
		fmt.Fprintf(w, "final (%s):\n", res.Final[0].Step)
	}
	for _, d := range res.Final {
		fmt.Fprintf(w, "  %s\n", d.Line)
	}
	fmt.Fprintf(w, "trials    %d\n", res.Trials)
	fmt.Fprintf(w, "ledger    %s\n", r.Ledger)
	fmt.Fprintf(w, "report    %s\n", filepath.Join(r.Dir, report.File))
	if r.Refined == "" && r.Config.Equivalence > 0 {
		_, err := fmt.Fprintf(w, "refined   none: an equivalence check searches nothing\n")
		return err
	}
	if r.Refined == "" {
		base := cmp.Or(res.Reference, "stock CFS")
		if r.Config.Tier {
			base = "tier only"
		}
		_, err := fmt.Fprintf(w, "refined   none written: the refined profile did not beat %s in the final comparison\n", base)
		return err
	}
	_, err := fmt.Fprintf(w, "refined   %s\n", r.Refined)
	return err
}
