package pipeline

import (
	"fmt"
	"io"
	"path/filepath"

	"temper.codes/temper-train/refine/report"
)

// Report writes the summary of a refine run: the calibration's noise per
// background level, the steps the hill climbing accepted and why it
// stopped, the final comparison against the reference, and where the
// ledger, the report and the refined profile went (or why none was
// written).
func (r *RefineRun) Report(w io.Writer) error {
	res, metric := r.Result, r.Config.Metric
	fmt.Fprintf(w, "calibration (stock vs stock):\n")
	for _, c := range res.Calibration {
		fmt.Fprintf(w, "  bg=%d  %s CV %.1f%% over %d trials\n", c.Bg, metric, 100*c.CV[metric], c.N)
	}
	fmt.Fprintf(w, "hill climbing: %d round(s), %d step(s) accepted; %s\n", len(res.Rounds), len(res.Accepted), res.Stopped)
	for _, s := range res.Accepted {
		fmt.Fprintf(w, "  accepted  %s\n", s)
	}
	fmt.Fprintf(w, "final (stock A vs refined B):\n")
	for _, d := range res.Final {
		fmt.Fprintf(w, "  %s\n", d.Line)
	}
	fmt.Fprintf(w, "trials    %d\n", res.Trials)
	fmt.Fprintf(w, "ledger    %s\n", r.Ledger)
	fmt.Fprintf(w, "report    %s\n", filepath.Join(r.Dir, report.File))
	if r.Refined == "" {
		_, err := fmt.Fprintf(w, "refined   none written: the refined profile did not beat stock CFS in the final comparison\n")
		return err
	}
	_, err := fmt.Fprintf(w, "refined   %s\n", r.Refined)
	return err
}
