package report

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"temper.codes/temper-train/chart"
	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/refine/stats"
)

// File names Write uses inside its directory.
const (
	File        = "REPORT.md"
	RacePlot    = "gain-per-race" // .svg and .png
	LadderPlot  = "metric-per-bg"
	pictureNote = "SVG and PNG"
)

// Write writes REPORT.md and the pictures (the race entries' gains, the
// metric per background level; SVG and PNG) into dir, creating it if
// needed. Every file is rendered before the first is written and each is
// written atomically; REPORT.md goes last, so a REPORT.md on disk always
// has its pictures beside it. The same Report gives the same bytes.
func Write(dir string, r Report) error {
	if err := r.check(); err != nil {
		return fmt.Errorf("report %s: %w", filepath.Join(dir, File), err)
	}
	var md bytes.Buffer
	r.Markdown(&md)
	if _, err := chart.Write(dir, r.Figures()); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, File), 0o644, func(w io.Writer) error {
		_, err := w.Write(md.Bytes())
		return err
	})
}

// check refuses a Report the tables cannot be drawn from.
func (r Report) check() error {
	if r.Rule.Metric == "" {
		return errors.New("no primary metric (Rule.Metric)")
	}
	if err := r.Rule.Dir.Check(); err != nil {
		return fmt.Errorf("primary metric %s: %w", r.Rule.Metric, err)
	}
	for _, l := range r.Ladder {
		if len(l.Cells) != len(r.Arms) {
			return fmt.Errorf("ladder level bg=%d has %d cells for %d arms", l.Bg, len(l.Cells), len(r.Arms))
		}
	}
	return nil
}

// Markdown writes REPORT.md's text.
func (r Report) Markdown(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	title := r.Title
	if title == "" {
		title = "refine report"
	}
	p("# %s\n\n", title)
	ref := r.armName(r.DeltaBase)
	switch eq := r.Equivalence; {
	case eq != nil:
		p("**%s** (an equivalence check within ±%s on %s, no search): %s.\n\n", equivalenceHead(eq.Finding), pct(eq.Margin), r.Rule.Metric, strings.TrimPrefix(eq.Reason, eq.Finding+": "))
	case r.Kept && r.Refined != "":
		p("**Kept**: the refined profile beat %s in the final test on fresh trials; written to `%s`.\n\n", ref, r.Refined)
	case r.Kept:
		p("**Kept**: the refined profile beat %s in the final test on fresh trials.\n\n", ref)
	case len(r.Looks) == 0:
		p("**Nothing kept**: no final test ran; no refined profile was written.\n\n")
	default:
		p("**Nothing kept**: the final test did not keep the refined profile against %s (its last look says why); no refined profile was written.\n\n", ref)
	}
	if r.blind() {
		p("**This run could not have shown the minimum effect**: at the noise it measured and the final's n it had 90%% power only for effects of %s or more, over twice the minimum effect of %s.\n\n", pct(r.Detectable), pct(r.Rule.MinEffect))
	}
	r.header(w)

	if len(r.Rig) > 0 {
		p("## Rig: a node on this machine\n\n")
		for _, l := range r.Rig {
			p("- %s\n", l)
		}
		p("\n")
	}
	if len(r.Arms) > 0 {
		p("## Arms\n\n")
		for _, a := range r.Arms {
			p("- **%s**: %s\n", a.Name, a.Desc)
		}
		p("\n")
	}

	r.ladder(w)
	r.quota(w)
	r.final(w)
	r.races(w)
	r.rates(w)
	r.calibration(w)

	p("## Pictures\n\n")
	p("![estimated gain per race entry](%s.svg)\n\n![%s per background level](%s.svg)\n\n", RacePlot, r.Rule.Metric, LadderPlot)
	p("(%s: `%s.png`, `%s.png`.)\n\n", pictureNote, RacePlot, LadderPlot)

	p("## Caveats\n\n")
	machine := r.Machine
	if machine == "" {
		machine = "this machine"
	}
	p("- One machine (%s), one benchmark configuration: the figures say what happened here, not on another node shape or workload mix.\n", machine)
	if r.OpenLoop {
		p("- Open-loop load (fixed request rate): the tail percentiles include queueing behind slow requests.\n")
	} else {
		p("- Closed-loop load: the client waits for each reply before sending the next, so slow replies also slow the offered load and the tail percentiles understate queueing (coordinated omission) — in every arm alike.\n")
	}
	p("- Background load is CPU spinners in a BestEffort-like cgroup (lowest CPU weight); memory, cache and I/O contention were not part of any arm and are not isolated.\n")
	p("- A win is credited to the profile as a whole step; effects of steps accepted earlier and of the order of steps are not isolated.\n")
	if r.unenforced() {
		p("- The arms are not limit-identical: %s.\n", quotaCaveat)
	}
	for _, c := range r.Caveats {
		p("- %s\n", c)
	}
	if len(r.Notes) > 0 {
		p("\n## Notes\n\n")
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
	}
}

// blind says the final could not have shown the minimum effect: the
// smallest effect it had the power for is over twice that.
func (r Report) blind() bool {
	return finite(r.Detectable) && r.Detectable > 2*r.Rule.MinEffect
}

func (r Report) header(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("| | |\n|---|---|\n")
	row := func(k, v string) {
		if v != "" {
			p("| %s | %s |\n", k, cellText(v))
		}
	}
	row("profile", code(r.Profile))
	row("refined profile", code(r.Refined))
	loop := "closed loop"
	if r.OpenLoop {
		loop = "open loop (fixed rate)"
	}
	if r.Bench != "" {
		row("benchmark", fmt.Sprintf("%s (%s, %s)", code(r.Bench), orDash(r.Tool), loop))
	}
	row("backend", r.Backend)
	row("machine", r.Machine)
	if !r.Started.IsZero() {
		row("started", r.Started.UTC().Format(time.RFC3339))
	}
	row("primary metric", fmt.Sprintf("%s (%s is better), α = %g, minimum effect %s", r.Rule.Metric, r.Rule.Dir.Better(), r.Rule.Alpha, pct(r.Rule.MinEffect)))
	row("guards", strings.Join(r.Guards, ", "))
	if finite(r.Noise) && r.Noise > 0 {
		row("noise", fmt.Sprintf("σ %.3g of log %s per trial (about %s), pooled over the races' repeats (the incumbent's block ends and each candidate's trials)", r.Noise, r.Rule.Metric, pct(math.Expm1(r.Noise))))
	}
	if r.FinalN > 0 {
		levels := ""
		if len(r.Ladder) > 1 {
			levels = fmt.Sprintf(" (%d background levels)", len(r.Ladder))
		}
		row("final n", fmt.Sprintf("%d trials per arm and level%s", r.FinalN, levels))
	}
	if finite(r.Detectable) && r.Detectable > 0 {
		s := pct(r.Detectable) + " (90% power at this noise and final n)"
		if r.blind() {
			s += ": **over twice the minimum effect**"
		}
		row("detectable effect", s)
	}
	if r.Trials > 0 {
		row("trials", fmt.Sprintf("%d in %s", r.Trials, r.Duration.Round(time.Second)))
	}
	row("stopped", r.Stopped)
	p("\n")
}

func (r Report) ladder(w io.Writer) {
	if len(r.Ladder) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	cols := r.Columns
	if len(cols) == 0 {
		cols = []string{r.Rule.Metric}
	}
	conf := r.confidence()
	hasDelta, harm, guards := false, false, false
	for _, l := range r.Ladder {
		hasDelta = hasDelta || l.Delta != nil
		harm = harm || (l.Delta != nil && l.Delta.Harm != "")
		guards = guards || len(l.Guards) > 0
	}
	deltas := len(r.Arms) > 1
	p("## Background ladder\n\n")
	cell := cols[0]
	if len(cols) > 1 {
		cell += " (" + strings.Join(cols[1:], ", ") + ")"
	}
	p("Medians across trials (one trial, one sample), %s per cell; an arm in the final shows the final's trials only.", cell)
	if deltas {
		p(" Δ is %s of **%s** against **%s** at each level, descriptive (the final's one stratified test decides): the Hodges–Lehmann relative shift, the unadjusted Mann–Whitney p, n per arm; `~` where p ≥ α = %g (no significant difference at that level).", r.Rule.Metric, r.armName(len(r.Arms)-1), r.armName(r.DeltaBase), r.Rule.Alpha)
		if harm {
			p(" Harm is the level's non-inferiority check: the upper confidence bound of the loss (worst) against the harm tolerance.")
		}
		if r.Tier {
			p(" Δ vs %s describes the product (tier and profile together) and decides nothing.", r.armName(0))
		}
	}
	p("\n\n| bg spinners |")
	for _, a := range r.Arms {
		p(" %s %s |", cellText(a.Name), cell)
	}
	sep := "|---|" + strings.Repeat("---|", len(r.Arms))
	if deltas {
		p(" Δ %s | p | n |", r.Rule.Metric)
		sep += "---|---|---|"
		if harm {
			p(" harm |")
			sep += "---|"
		}
	}
	if r.Tier {
		p(" Δ vs %s | p |", cellText(r.armName(0)))
		sep += "---|---|"
	}
	p("\n%s\n", sep)
	for _, l := range r.Ladder {
		p("| %d |", l.Bg)
		for _, c := range l.Cells {
			if c.N == 0 {
				p(" — |")
				continue
			}
			s := num(c.Values[cols[0]].Center)
			if len(cols) > 1 {
				var rest []string
				for _, m := range cols[1:] {
					rest = append(rest, num(c.Values[m].Center))
				}
				s += " (" + strings.Join(rest, ", ") + ")"
			}
			p(" %s |", s)
		}
		if deltas {
			if d := l.Delta; d != nil {
				p(" %s | %s | %d+%d |", shift(d.Effect.Center, d.P, r.Rule.Alpha), pval(d.P), d.NBase, d.NCand)
			} else {
				p(" — | — | — |")
			}
			if harm {
				p(" %s |", harmText(l.Delta))
			}
		}
		if r.Tier {
			if d := l.Product; d != nil {
				p(" %s | %s |", shift(d.Effect.Center, d.P, r.Rule.Alpha), pval(d.P))
			} else {
				p(" — | — |")
			}
		}
		p("\n")
	}
	p("\n")

	if guards {
		p("Guards at each level, as non-inferiority: a guard vetoes when the upper confidence bound of its loss (worst) is past its tolerance.\n\n")
		p("| bg | guard | change | worst | tolerance | verdict |\n|---|---|---|---|---|---|\n")
		var fn footnotes
		for _, l := range r.Ladder {
			for _, g := range l.Guards {
				verdict := "holds"
				if g.Vetoed {
					verdict = "**vetoed**"
				}
				worst := orDash(g.Worst)
				if strings.Contains(worst, "∞") {
					worst = fn.mark("too few samples to bound the loss")
				}
				p("| %d | %s | %s | %s | %s | %s |\n", l.Bg, cellText(g.Metric), orDash(g.Change), worst, orDash(g.Tolerance), verdict)
			}
		}
		fn.write(w)
		p("\n")
	}

	var fn footnotes
	needMedian := fmt.Sprintf("needs ≥ %d samples for an interval at %s", medianNeed(conf), pct(conf))
	p("With intervals: medians and their distribution-free %s intervals.\n\n", pct(conf))
	p("| bg | arm | n |")
	for _, m := range cols {
		p(" %s |", m)
	}
	p("\n|---|---|---|%s\n", strings.Repeat("---|", len(cols)))
	for _, l := range r.Ladder {
		for a, c := range l.Cells {
			if c.N == 0 {
				continue
			}
			p("| %d | %s | %d |", l.Bg, cellText(r.armName(a)), c.N)
			for _, m := range cols {
				v, ok := c.Values[m]
				if !ok {
					p(" — |")
					continue
				}
				p(" %s %s |", num(v.Center), within(v, num, &fn, needMedian))
			}
			p("\n")
		}
	}
	if hasDelta {
		// A level's Δ interval is two-sided at 1 − 2α: the one-sided
		// bound at α its non-inferiority check reads (stats.NonInferior),
		// and the described contrasts are computed alike.
		dconf := 1 - 2*r.Rule.Alpha
		needShift := fmt.Sprintf("needs ≥ %d samples per arm for an interval at %s", stats.NeedN(1-dconf), pct(dconf))
		p("\n| bg | Δ %s [%s interval] |", r.Rule.Metric, pct(dconf))
		if r.Tier {
			p(" Δ vs %s |", cellText(r.armName(0)))
		}
		p("\n|---|---|")
		if r.Tier {
			p("---|")
		}
		p("\n")
		for _, l := range r.Ladder {
			if l.Delta == nil && l.Product == nil {
				continue
			}
			p("| %d | %s |", l.Bg, deltaInterval(l.Delta, &fn, needShift))
			if r.Tier {
				p(" %s |", deltaInterval(l.Product, &fn, needShift))
			}
			p("\n")
		}
	}
	fn.write(w)
	p("\n")
}

// harmText is a level's non-inferiority cell: the verdict with the loss's
// upper bound and the tolerance, in bold when harm is not excluded.
func harmText(d *Delta) string {
	if d == nil || d.Harm == "" {
		return "—"
	}
	if !finite(d.Worst) {
		return d.Harm
	}
	s := fmt.Sprintf("%s (worst %s vs %s)", d.Harm, spct(d.Worst), pct(d.Tolerance))
	if d.Worst > d.Tolerance {
		s = "**" + s + "**"
	}
	return s
}

func deltaInterval(d *Delta, fn *footnotes, need string) string {
	if d == nil {
		return "—"
	}
	return spct(d.Effect.Center) + " " + within(d.Effect, spct, fn, need)
}

func (r Report) final(w io.Writer) {
	if len(r.Looks) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	looks := r.Looks[len(r.Looks)-1].Of
	if eq := r.Equivalence; eq != nil {
		p("## Equivalence: %s against %s\n\n", r.armName(len(r.Arms)-1), r.armName(r.DeltaBase))
		p("Two one-sided tests of a common effect on %s, the background levels strata of one stratified rank test, with up to %s: equivalent when the look's interval at 1 − 2α lies within ±%s, different when it lies wholly beyond, each look's α from the α-spending rule (α = %g each side in all). The looks after the first were sized there from the noise within each arm, blind to the difference.\n\n",
			r.Rule.Metric, Count(looks, "look"), pct(eq.Margin), r.Rule.Alpha)
	} else {
		p("## Final: %s against %s\n\n", r.armName(len(r.Arms)-1), r.armName(r.DeltaBase))
		p("The one confirmatory test, on fresh trials: one stratified rank test of a common effect on %s, the background levels its strata, with up to %s. Each look's one-sided p is held to that look's nominal α from the α-spending rule (α = %g in all), printed beside it; `~`: no significant difference at that look. Each level's non-inferiority checks are in the ladder above.\n\n",
			r.Rule.Metric, Count(looks, "look"), r.Rule.Alpha)
	}
	p("| look | n | Δ %s | interval | p | nominal α | α spent | outcome |\n|---|---|---|---|---|---|---|---|\n", r.Rule.Metric)
	var fn footnotes
	for _, l := range r.Looks {
		iv := within(l.Effect, spct, &fn, "too few samples for an interval at this look's confidence")
		if l.Confidence > 0 && strings.HasPrefix(iv, "[") {
			iv += " at " + pct(l.Confidence)
		}
		outcome := orDash(l.Outcome)
		if l.Outcome == stats.Keep.String() || l.Outcome == stats.Equivalent.String() {
			outcome = "**" + l.Outcome + "**"
		}
		p("| %d of %d | %d+%d | %s | %s | %s | %s | %s | %s |\n", l.Index, l.Of, l.N[0], l.N[1], shift(l.Effect.Center, l.P, l.Alpha), iv,
			pval(l.P), pval(l.Alpha), pval(l.Spent), outcome)
	}
	fn.write(w)
	if last := r.Looks[len(r.Looks)-1]; last.Reason != "" {
		p("\nLook %d of %d: %s\n", last.Index, last.Of, last.Reason)
	}
	p("\n")
}

// equivalenceHead is an equivalence check's finding as REPORT.md's first
// words.
func equivalenceHead(finding string) string {
	switch finding {
	case stats.Equivalent.String():
		return "Equivalent"
	case stats.Different.String():
		return "Different"
	case "identical":
		return "Identical kernel state"
	}
	return "Equivalence not shown"
}

func (r Report) races(w io.Writer) {
	if len(r.Races) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## Races\n\n")
	p("Each round raced its candidates against the incumbent by successive halving: a race ranks by an estimated gain and tests nothing (its Δ is an estimate, ≈, without an interval), and only the final decides what is kept.\n\n")
	for _, race := range r.Races {
		p("### Round %d: %s over %s\n\n", race.Round, Count(race.Candidates, "candidate"), Count(race.Rungs, "rung"))
		var skipped []string
		if race.Unchanged > 0 {
			skipped = append(skipped, fmt.Sprintf("%d not run (same kernel state as an arm already measured)", race.Unchanged))
		}
		if race.Rejected > 0 {
			skipped = append(skipped, fmt.Sprintf("%d refused by lint", race.Rejected))
		}
		if race.Carried > 0 {
			skipped = append(skipped, fmt.Sprintf("%d not raced again: what an earlier race measured of them, carried to this incumbent, is below the step's threshold (the table's last rows)", race.Carried))
		}
		if len(skipped) > 0 {
			p("Also %s.\n\n", strings.Join(skipped, "; "))
		}
		mech := slices.ContainsFunc(race.Entries, func(e RaceEntry) bool { return e.Mechanism != "" || e.Suspect })
		if len(race.Entries) > 0 {
			p("| step | trials | Δ %s | gain ± SE | rung | verdict |", r.Rule.Metric)
			if mech {
				p(" mechanism |")
			}
			p("\n|---|---|---|---|---|---|")
			if mech {
				p("---|")
			}
			p("\n")
			es := slices.Clone(race.Entries)
			slices.SortStableFunc(es, func(a, b RaceEntry) int {
				return cmp.Or(cmp.Compare(b.Rung, a.Rung), cmp.Compare(a.Rank, b.Rank))
			})
			for _, e := range es {
				approx := "—"
				if finite(e.Shift) {
					approx = "≈ " + spct(e.Shift)
				}
				rung := fmt.Sprintf("%d of %d", e.Rung, race.Rungs)
				if e.Verdict == Carried {
					rung = "—"
				}
				p("| %s | %d | %s | %s | %s | %s |", cellText(e.Name), e.Trials, approx, gainText(e.Gain, e.GainSE), rung, verdictText(e))
				if mech {
					m := orDash(e.Mechanism)
					if e.Suspect {
						m = "**suspect**: " + m
					}
					p(" %s |", cellText(m))
				}
				p("\n")
			}
			p("\n")
		}
		if race.Stopped != "" {
			p("Round %d: %s\n\n", race.Round, race.Stopped)
		}
	}
}

func gainText(g, se float64) string {
	if !finite(g) {
		return "—"
	}
	if !finite(se) {
		return spct(g)
	}
	return spct(g) + " ± " + pct(se)
}

// verdictText is a race entry's one verdict.
func verdictText(e RaceEntry) string {
	switch e.Verdict {
	case Accepted:
		return "**accepted**: the next incumbent"
	case Unconfirmed:
		return "unconfirmed: held back by the step rule"
	case Carried:
		return "carried: " + orDash(e.Reason)
	case Dropped:
		if e.Reason != "" {
			return fmt.Sprintf("dropped at rung %d: %s", e.Rung, e.Reason)
		}
		if e.Of > 0 {
			return fmt.Sprintf("dropped, rank %d of %d", e.Rank, e.Of)
		}
	}
	return orDash(e.Verdict)
}

func (r Report) rates(w io.Writer) {
	if len(r.Rates) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## Error rates of the final rule\n\n")
	p("How often the final keeps a profile, simulated at this run's noise")
	if finite(r.Noise) && r.Noise > 0 {
		p(" (σ %.3g)", r.Noise)
	}
	p(" and final n")
	if r.FinalN > 0 {
		p(" (%d per arm and level)", r.FinalN)
	}
	p(": with no effect a keep is a false keep, with a true effect a keep is the power. Brackets: 95%% Clopper–Pearson intervals of the simulation itself.\n\n")
	p("| true effect | runs | kept |\n|---|---|---|\n")
	for _, s := range r.Rates {
		p("| %s (%s) | %d | %s |\n", cellText(s.What), pct(s.Effect), s.Runs, rate(s.Keeps))
	}
	p("\n")
}

func (r Report) calibration(w io.Writer) {
	if len(r.Calibration) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	cols := r.Columns
	if len(cols) == 0 {
		cols = []string{r.Rule.Metric}
	}
	p("## Calibration: %s against itself (A/A)\n\n", r.armName(0))
	p("The A/A measures false accepts: any difference it accepts cannot exist. It does not size the final (the race's noise does). CV is the coefficient of variation of one trial's value, in bold where it exceeds the minimum effect (%s).\n\n", pct(r.Rule.MinEffect))
	p("| bg | n |")
	for _, m := range cols {
		p(" CV %s |", m)
	}
	p(" A/A decision |\n|---|---|%s---|\n", strings.Repeat("---|", len(cols)))
	var lines []string
	falseAcc := 0
	for _, c := range r.Calibration {
		p("| %d | %d |", c.Bg, c.N)
		for _, m := range cols {
			cv, ok := c.CV[m]
			switch {
			case !ok:
				p(" — |")
			case cv > r.Rule.MinEffect:
				p(" **%s** |", pct(cv))
			default:
				p(" %s |", pct(cv))
			}
		}
		verdict := "no difference"
		if c.FalseAccept {
			verdict = "**accepted (a false accept)**"
			falseAcc++
		}
		p(" %s |\n", verdict)
		switch {
		case c.Line == "":
		case strings.Contains(c.Line, "bg="):
			lines = append(lines, c.Line)
		default:
			lines = append(lines, fmt.Sprintf("bg=%d  %s", c.Bg, c.Line))
		}
	}
	p("\nMeasured: %d of %d A/A decisions accepted a difference that cannot exist.\n", falseAcc, len(r.Calibration))
	if len(lines) > 0 {
		p("\n```\n%s\n```\n", strings.Join(lines, "\n"))
	}
	p("\n")
}

// footnotes collects the footnotes of one table, each text once under one
// marker, so a table says "too few samples" once instead of [-∞ +∞] on
// every line.
type footnotes struct{ texts []string }

func (f *footnotes) mark(text string) string {
	i := slices.Index(f.texts, text)
	if i < 0 {
		f.texts = append(f.texts, text)
		i = len(f.texts) - 1
	}
	return marker(i)
}

// write prints the footnotes collected, each its own paragraph, and
// forgets them.
func (f *footnotes) write(w io.Writer) {
	for i, t := range f.texts {
		fmt.Fprintf(w, "\n%s %s\n", marker(i), t)
	}
	f.texts = nil
}

func marker(i int) string {
	if m := []string{"¹", "²", "³", "⁴", "⁵"}; i < len(m) {
		return m[i]
	}
	return fmt.Sprintf("(%d)", i+1)
}

// within prints an interval's bounds "[lo, hi]" with format, or the marker
// of the footnote need when the sample was too small for an interval.
func within(iv stats.Interval, format func(float64) string, fn *footnotes, need string) string {
	switch {
	case math.IsNaN(iv.Lo) || math.IsNaN(iv.Hi):
		return "—"
	case !iv.Finite():
		return fn.mark(need)
	}
	return "[" + format(iv.Lo) + ", " + format(iv.Hi) + "]"
}

// medianNeed is the smallest sample whose median has a distribution-free
// interval at confidence: the widest, from the smallest to the largest
// value, covers the median with probability 1 − 2·2⁻ⁿ.
func medianNeed(confidence float64) int {
	n := 1
	for 1-2*math.Pow(0.5, float64(n)) < confidence-1e-12 && n < 64 {
		n++
	}
	return n
}

// shift is a Δ cell the way benchstat prints one: the estimate where p <
// alpha, ~ where the difference is not significant, — where unknown.
func shift(x, p, alpha float64) string {
	switch {
	case math.IsNaN(x) || math.IsNaN(p):
		return "—"
	case p >= alpha:
		return "~"
	}
	return spct(x)
}

func (r Report) armName(i int) string {
	if i < len(r.Arms) {
		return r.Arms[i].Name
	}
	return "the baseline"
}

func (r Report) confidence() float64 {
	if r.Rule.Alpha > 0 && r.Rule.Alpha < 1 {
		return 1 - r.Rule.Alpha
	}
	return 0.95
}

// Count is n with its noun, plural unless n is 1: "1 trial", "3 trials".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func num(x float64) string { return stats.FormatValue(x) }

// spct is a signed relative shift; a shift that rounds to zero prints as
// +0.0%, never -0.0%.
func spct(x float64) string {
	if s := stats.FormatShift(x); s != "-0.0%" {
		return s
	}
	return "+0.0%"
}

func pct(x float64) string {
	s := strings.TrimRight(fmt.Sprintf("%.2f", 100*x), "0")
	return strings.TrimSuffix(s, ".") + "%"
}

func pval(p float64) string {
	if math.IsNaN(p) {
		return "—"
	}
	return fmt.Sprintf("%.3g", p)
}

// rate is a simulated rate with its interval, in percent to three
// significant digits (0.31%, 2.25%, 61.0%).
func rate(iv stats.Interval) string {
	if math.IsNaN(iv.Center) {
		return "—"
	}
	f := func(x float64) string {
		switch x *= 100; {
		case x == 0 || x == 100:
			return fmt.Sprintf("%.0f%%", x)
		case x >= 10:
			return fmt.Sprintf("%.1f%%", x)
		}
		return fmt.Sprintf("%.2f%%", x)
	}
	return fmt.Sprintf("%s [%s, %s]", f(iv.Center), f(iv.Lo), f(iv.Hi))
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "`", "'") + "`"
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// cellText keeps a value inside its table cell.
func cellText(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
