package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"temper.codes/temper-train/chart"
	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/refine/stats"
)

// File names Write uses inside its directory.
const (
	File        = "REPORT.md"
	StepPlot    = "metric-per-step" // .svg and .png
	LadderPlot  = "metric-per-bg"
	pictureNote = "SVG and PNG"
)

// Write writes REPORT.md and the pictures (metric per step, metric per
// background level; SVG and PNG) into dir, creating it if needed. Every
// file is rendered before the first is written and each is written
// atomically; REPORT.md goes last, so a REPORT.md on disk always has its
// pictures beside it. The same Report gives the same bytes.
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

// Figures returns the pictures Write writes, by file name: the primary
// metric's medians per decision (reference arm and candidate) and per
// background level (every arm), each with its interval as an error bar.
// Arms at the same level are drawn slightly apart so their bars do not
// hide each other.
func (r Report) Figures() []chart.Named {
	m := r.Rule.Metric
	y := chart.Axis{Label: m + " (median of trials, " + r.Rule.Dir.Better() + " is better)"}
	const apart = 0.06
	var base, cand []chart.Point
	var baseBars, candBars bars
	for i, s := range r.Steps {
		x := float64(i + 1)
		if finite(s.Base.Center) && finite(s.Cand.Center) {
			base = append(base, chart.Point{X: x - apart, Y: s.Base.Center})
			cand = append(cand, chart.Point{X: x + apart, Y: s.Cand.Center})
			baseBars.add(x-apart, s.Base)
			candBars.add(x+apart, s.Cand)
		}
	}
	steps := chart.Lines(m+" per step (bars: "+r.confidence()+" intervals)", chart.Axis{Label: "decision (in order)"}, y,
		chart.Series{Label: "reference arm", Points: base, Marks: true},
		chart.Series{Label: "candidate", Points: cand, Marks: true})
	addBars(steps, 0, &baseBars)
	addBars(steps, 1, &candBars)

	var series []chart.Series
	var arms []bars
	for a, arm := range r.Arms {
		s := chart.Series{Label: arm.Name, Marks: true}
		var b bars
		dx := apart * (float64(a) - float64(len(r.Arms)-1)/2)
		for _, l := range r.Ladder {
			if v, ok := l.Cells[a].Values[m]; ok && l.Cells[a].N > 0 && finite(v.Center) {
				s.Points = append(s.Points, chart.Point{X: float64(l.Bg) + dx, Y: v.Center})
				b.add(float64(l.Bg)+dx, v)
			}
		}
		series = append(series, s)
		arms = append(arms, b)
	}
	ladder := chart.Lines(m+" per background level (bars: "+r.confidence()+" intervals)", chart.Axis{Label: "background CPU spinners"}, y, series...)
	for a := range arms {
		addBars(ladder, a, &arms[a])
	}
	return []chart.Named{{Name: StepPlot, Figure: steps}, {Name: LadderPlot, Figure: ladder}}
}

// Markdown writes REPORT.md's text.
func (r Report) Markdown(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	title := r.Title
	if title == "" {
		title = "refine report"
	}
	p("# %s\n\n", title)
	switch {
	case r.Kept && r.Refined != "":
		p("**Kept**: the refined profile beat %s in the final comparison on fresh trials; written to `%s`.\n\n", r.armName(r.DeltaBase), r.Refined)
	case r.Kept:
		p("**Kept**: the refined profile beat %s in the final comparison on fresh trials.\n\n", r.armName(r.DeltaBase))
	default:
		p("**Nothing kept**: no profile was shown to beat %s with significance and by at least %s; no refined profile was written.\n\n", r.armName(r.DeltaBase), pct(r.Rule.MinEffect))
	}

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
	if r.Trials > 0 {
		row("trials", fmt.Sprintf("%d in %s", r.Trials, r.Duration.Round(time.Second)))
	}
	row("stopped", r.Stopped)
	p("\n")

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
	r.calibration(w)
	r.rates(w)
	r.steps(w)

	if len(r.Final) > 0 {
		p("## Final comparison (fresh trials)\n\n```\n%s\n```\n\n", strings.Join(r.Final, "\n"))
	}

	p("## Pictures\n\n")
	p("![%s per step](%s.svg)\n\n![%s per background level](%s.svg)\n\n", r.Rule.Metric, StepPlot, r.Rule.Metric, LadderPlot)
	p("(%s: `%s.png`, `%s.png`.)\n\n", pictureNote, StepPlot, LadderPlot)

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

func (r Report) ladder(w io.Writer) {
	if len(r.Ladder) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	cols := r.Columns
	if len(cols) == 0 {
		cols = []string{r.Rule.Metric}
	}
	p("## Background ladder\n\n")
	cell := cols[0]
	if len(cols) > 1 {
		cell += " (" + strings.Join(cols[1:], ", ") + ")"
	}
	p("Medians across trials (one trial, one sample), %s per cell; an arm in the final comparison shows that comparison's trials only.", cell)
	if len(r.Arms) > 1 {
		p(" Δ is %s of **%s** against **%s**: the Hodges–Lehmann relative shift with its interval, Mann–Whitney p, n per arm.", r.Rule.Metric, r.armName(len(r.Arms)-1), r.armName(r.DeltaBase))
		if r.Tier {
			p(" Δ vs %s describes the product (tier and profile together) and decides nothing.", r.armName(0))
		}
	}
	p("\n\n| bg spinners |")
	for _, a := range r.Arms {
		p(" %s %s |", cellText(a.Name), cell)
	}
	if len(r.Arms) > 1 {
		p(" Δ %s | p | n |", r.Rule.Metric)
	}
	if r.Tier {
		p(" Δ vs %s | p |", cellText(r.armName(0)))
	}
	p("\n|---|")
	for range r.Arms {
		p("---|")
	}
	if len(r.Arms) > 1 {
		p("---|---|---|")
	}
	if r.Tier {
		p("---|---|")
	}
	p("\n")
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
		if len(r.Arms) > 1 {
			if d := l.Delta; d != nil {
				p(" %s [%s, %s] | %s | %d+%d |", spct(d.Effect.Center), spct(d.Effect.Lo), spct(d.Effect.Hi), pval(d.P), d.NBase, d.NCand)
			} else {
				p(" — | — | — |")
			}
		}
		if r.Tier {
			if d := l.Product; d != nil {
				p(" %s [%s, %s] | %s |", spct(d.Effect.Center), spct(d.Effect.Lo), spct(d.Effect.Hi), pval(d.P))
			} else {
				p(" — | — |")
			}
		}
		p("\n")
	}
	p("\nWith intervals (medians and their distribution-free %s intervals; ±∞ where n is too small for one):\n\n", r.confidence())
	p("| bg | arm | n |")
	for _, m := range cols {
		p(" %s |", m)
	}
	p("\n|---|---|---|")
	for range cols {
		p("---|")
	}
	p("\n")
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
				p(" %s [%s, %s] |", num(v.Center), num(v.Lo), num(v.Hi))
			}
			p("\n")
		}
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
	p("Run-to-run noise as the coefficient of variation of one trial's value. A noise larger than the minimum effect (%s) needs more trials per arm to resolve it.\n\n", pct(r.Rule.MinEffect))
	p("| bg | n |")
	for _, m := range cols {
		p(" CV %s |", m)
	}
	p(" A/A decision |\n|---|---|")
	for range cols {
		p("---|")
	}
	p("---|\n")
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
		if c.Line != "" {
			lines = append(lines, fmt.Sprintf("bg=%d  %s", c.Bg, c.Line))
		}
	}
	p("\nMeasured: %d of %d A/A decisions accepted a difference that cannot exist.\n", falseAcc, len(r.Calibration))
	if len(lines) > 0 {
		p("\n```\n%s\n```\n", strings.Join(lines, "\n"))
	}
	p("\n")
}

func (r Report) rates(w io.Writer) {
	if len(r.Rates) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## Error rates of the decision rule\n\n")
	p("Measured by simulating the rule as this run applied it (lognormal trial values at the noise shown, fixed seed): how often a candidate with no effect is accepted, and how often one with the given true effect is. Brackets: 95%% Clopper–Pearson intervals of the simulation itself.\n\n")
	p("| procedure | noise CV | true effect | rounds | false accepts per candidate | rounds with a false accept | power |\n")
	p("|---|---|---|---|---|---|---|\n")
	for _, s := range r.Rates {
		power := "—"
		if s.Sim.Effect != 0 {
			power = rate(s.Power)
		}
		p("| %s | %s | %s | %d | %s | %s | %s |\n", procedure(s.Sim), pct(s.Sim.CV), pct(s.Sim.Effect), s.Sim.Rounds,
			rate(s.FalseAcceptRate), rate(s.FWER), power)
	}
	p("\n")
}

// procedure names a simulated procedure the way the run used it.
func procedure(s stats.Sim) string {
	var b strings.Builder
	if s.K <= 1 && s.Screen == 0 {
		fmt.Fprintf(&b, "one decision, n=%d per arm", s.Confirm)
		return b.String()
	}
	fmt.Fprintf(&b, "round of %d: ", max(s.K, 1))
	if s.Screen > 0 {
		fmt.Fprintf(&b, "screen n=%d", s.Screen)
		switch {
		case s.ScreenP > 0:
			fmt.Fprintf(&b, " (p < %g)", s.ScreenP)
		case s.ScreenHolm:
			b.WriteString(" (Holm)")
		}
		b.WriteString(", ")
	}
	fmt.Fprintf(&b, "confirm n=%d fresh (Holm)", s.Confirm)
	return b.String()
}

func (r Report) steps(w io.Writer) {
	if len(r.Steps) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## Steps\n\n")
	var acc, rej int
	for _, s := range r.Steps {
		if s.Accepted {
			acc++
		} else {
			rej++
		}
	}
	p("%d decisions: %d accepted, %d rejected. A step is accepted only when the Mann–Whitney test is significant (Holm across its round) **and** the interval of the relative shift clears %s **and** no guard regresses.\n\n", len(r.Steps), acc, rej, pct(r.Rule.MinEffect))
	p("| # | round | stage | step | bg | %s: reference → candidate | verdict | mechanism |\n", r.Rule.Metric)
	p("|---|---|---|---|---|---|---|---|\n")
	for i, s := range r.Steps {
		var verdict string
		switch {
		case s.Accepted:
			verdict = "**accepted**"
		case s.Verdict == "":
			verdict = "rejected"
		default:
			verdict = "rejected: " + s.Verdict
		}
		mech := orDash(s.Mechanism)
		if s.Suspect {
			mech = "**suspect**: " + mech
		}
		p("| %d | %d | %s | %s | %d | %s → %s | %s | %s |\n", i+1, s.Round, s.Stage, cellText(s.Name), s.Bg,
			num(s.Base.Center), num(s.Cand.Center), verdict, cellText(mech))
	}
	p("\nDecision lines (metric, reference → candidate medians [interval], n per arm, Δ [interval] (confidence), p, why):\n\n```\n")
	for i, s := range r.Steps {
		p("#%d %s\n", i+1, s.Line)
		for _, g := range s.Guards {
			p("   guard %s\n", g)
		}
	}
	p("```\n\n")
}

func (r Report) armName(i int) string {
	if i < len(r.Arms) {
		return r.Arms[i].Name
	}
	return "the baseline"
}

func (r Report) confidence() string {
	if r.Rule.Alpha > 0 && r.Rule.Alpha < 1 {
		return pct(1 - r.Rule.Alpha)
	}
	return "95%"
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func num(x float64) string  { return stats.FormatValue(x) }
func spct(x float64) string { return stats.FormatShift(x) }

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

func rate(iv stats.Interval) string {
	if math.IsNaN(iv.Center) {
		return "—"
	}
	return fmt.Sprintf("%.4f [%.4f, %.4f]", iv.Center, iv.Lo, iv.Hi)
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
