package refine

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/report"
	"temper.codes/temper-train/refine/stats"
)

// ReportInfo is what the report says that the ledger does not hold.
type ReportInfo struct {
	OpenLoop bool
	Caveats  []string
	// Resume says how to resume a run that was cut off, in the words of
	// the caller (a command names its flag); empty: the report says only
	// that the ledger can resume it.
	Resume string
}

// ReportOf builds the report of a run from its ledger alone, so a report
// can be rewritten from any ledger (a finished run's, or one cut off).
func ReportOf(l *ledger.Ledger, info ReportInfo) (report.Report, error) {
	var cfg Config
	if err := json.Unmarshal(l.Header.Config, &cfg); err != nil {
		return report.Report{}, fmt.Errorf("ledger header: config: %w", err)
	}
	cfg.Defaults()
	h := l.Header
	r := report.Report{
		Title:    "refine " + h.Profile,
		Profile:  h.Profile,
		Bench:    strings.Join(h.Bench, " "),
		Tool:     h.Adapter,
		OpenLoop: info.OpenLoop,
		Backend:  h.Backend,
		Machine:  fmt.Sprintf("%s: %s, %s, kernel %s", h.Machine.Hostname, h.Machine.Shape, h.Machine.CPUModel, h.Machine.Kernel),
		Started:  h.Start,
		Rule:     stats.Rule{Metric: cfg.Metric, Alpha: cfg.Alpha, MinEffect: cfg.MinEffect, Dir: cfg.Dir},
		Caveats:  info.Caveats,
		Rig:      h.Rig,
	}
	for _, g := range cfg.Guards {
		r.Guards = append(r.Guards, g.String())
	}
	if l.End != nil {
		r.Stopped = l.End.Reason
		r.Refined = l.End.Refined
		r.Duration = l.End.Time.Sub(h.Start)
	} else {
		r.Stopped = "the run did not finish (cut off; its ledger can resume it)"
		if info.Resume != "" {
			r.Stopped = "the run did not finish (cut off; resume it with " + info.Resume + ")"
		}
		// A run cut off has no end record: its length is up to the last
		// trial that finished.
		for _, e := range l.Ends {
			if d := e.End.Sub(h.Start); d > r.Duration {
				r.Duration = d
			}
		}
	}
	for _, n := range l.Notes {
		r.Notes = append(r.Notes, n.Text)
	}

	// Trials by candidate and level, in ledger order.
	type key struct {
		cand string
		bg   int
	}
	done := l.Done()
	byArm := map[key][]map[string]float64{}
	// The final comparison's own trials, so a ladder cell of an arm that
	// was in it shows the same trials as its Δ, not every stage pooled.
	finalArm := map[key][]map[string]float64{}
	// The same trials whole, for the pod's CPU usage (the quota table).
	ends, finalEnds := map[key][]ledger.TrialEnd{}, map[key][]ledger.TrialEnd{}
	seen := map[string]bool{}
	inputHash := ""
	refHash := ""
	for _, s := range l.Starts {
		e, ok := done[s.Trial]
		if !ok || seen[s.Trial] {
			continue
		}
		seen[s.Trial] = true
		r.Trials++
		byArm[key{s.Candidate, s.Bg}] = append(byArm[key{s.Candidate, s.Bg}], e.Metrics)
		ends[key{s.Candidate, s.Bg}] = append(ends[key{s.Candidate, s.Bg}], e)
		switch s.Stage {
		case StageCalibration, StageFinal:
			if refHash == "" && s.Arm == "A" {
				refHash = s.Candidate // the canary's profile in force, or stock
			}
		case StageRace:
			if inputHash == "" && s.Arm == "A" {
				inputHash = s.Candidate
			}
		}
		if s.Stage == StageFinal {
			finalArm[key{s.Candidate, s.Bg}] = append(finalArm[key{s.Candidate, s.Bg}], e.Metrics)
			finalEnds[key{s.Candidate, s.Bg}] = append(finalEnds[key{s.Candidate, s.Bg}], e)
		}
	}
	if refHash == "" {
		refHash = StockHash
	}
	tierKey := StockHash + TierSuffix
	refinedHash := ""
	r.Noise = math.NaN()
	if cfg.Equivalence > 0 {
		r.Equivalence = &report.Equivalence{Margin: cfg.Equivalence, Finding: "not shown", Reason: "the run did not finish"}
	}
	for _, d := range l.Decisions {
		if d.Stage != StageFinal {
			continue
		}
		if r.Equivalence != nil && d.Bg == ledger.AllLevels {
			r.Equivalence.Finding, r.Equivalence.Reason = d.Verdict, d.Reason
		}
		if d.Candidate == tierKey {
			r.Tier = true
		}
		if lk := d.Look; lk != nil {
			refinedHash = d.Candidate
			r.Kept = d.Accepted
			r.Noise, r.FinalN, r.Detectable = float64(lk.Noise), lk.N, float64(lk.Detectable)
			r.Looks = append(r.Looks, report.Look{Index: lk.Index, Of: lk.Of, Alpha: float64(lk.Alpha), Spent: float64(lk.Spent), N: d.N,
				Effect: d.Effect.Stats(), Confidence: 1 - 2*float64(lk.Alpha), P: float64(d.P), Outcome: lk.Outcome, Reason: d.Reason})
		}
	}
	if inputHash == "" {
		inputHash = refinedHash
	}
	r.Arms = []report.Arm{{Name: "stock CFS", Desc: "no profile"}}
	if refHash != StockHash {
		r.Arms = []report.Arm{{Name: "profile in force", Desc: fmt.Sprintf("the last good profile (%s)", refHash)}}
	}
	hashes := []string{refHash}
	if r.Tier {
		r.Arms = append(r.Arms, report.Arm{Name: "tier only", Desc: "no profile; the node's tier in force (" + TierDesc(h.Backend) + ")"})
		hashes = append(hashes, tierKey)
		r.DeltaBase = 1
	}
	if inputHash != "" && inputHash != refHash {
		r.Arms = append(r.Arms, report.Arm{Name: armName(inputHash, "input profile"), Desc: fmt.Sprintf("%s (%s)", h.Profile, inputHash)})
		hashes = append(hashes, inputHash)
	}
	if refinedHash != "" && refinedHash != inputHash {
		r.Arms = append(r.Arms, report.Arm{Name: armName(refinedHash, "refined"), Desc: fmt.Sprintf("refined profile (%s)", refinedHash)})
		hashes = append(hashes, refinedHash)
	}
	metrics := map[string]bool{}
	for _, ms := range byArm {
		for _, m := range ms {
			for k := range m {
				metrics[k] = true
			}
		}
	}
	if metrics["throughput"] && cfg.Metric != "throughput" {
		r.Columns = []string{"throughput", cfg.Metric}
	} else {
		r.Columns = []string{cfg.Metric}
	}
	conf := 1 - cfg.Alpha
	for _, bg := range cfg.Ladder {
		lv := report.Level{Bg: bg}
		for _, hsh := range hashes {
			vals := map[string][]float64{}
			trials := finalArm[key{hsh, bg}]
			if len(trials) == 0 {
				trials = byArm[key{hsh, bg}]
			}
			for _, m := range trials {
				for _, c := range r.Columns {
					if v, ok := m[c]; ok {
						vals[c] = append(vals[c], v)
					}
				}
			}
			lv.Cells = append(lv.Cells, report.NewCell(conf, vals))
		}
		for _, d := range l.Decisions {
			if d.Stage != StageFinal || d.Bg != bg || d.Look != nil {
				continue
			}
			delta := &report.Delta{NBase: d.N[0], NCand: d.N[1], Effect: d.Effect.Stats(), P: float64(d.P)}
			if d.Verdict == verdictDescribed && cfg.Equivalence > 0 {
				lv.Delta = delta // the input profile against the reference
				continue
			}
			if d.Verdict == verdictDescribed {
				// Tier only or tier + refined against the reference:
				// the latter is the product.
				if d.Candidate != tierKey {
					lv.Product = delta
				}
				continue
			}
			// The decided contrast: its harm check, with the loss's
			// upper bound read from the interval the check used.
			delta.Harm, delta.Tolerance = d.Verdict, cfg.Harm
			delta.Worst = -float64(d.Effect.Lo) // a loss of a metric higher is better
			if cfg.Dir == stats.LowerIsBetter {
				delta.Worst = float64(d.Effect.Hi)
			}
			lv.Delta = delta
			for _, g := range d.Guards {
				lv.Guards = append(lv.Guards, report.GuardCheck{Metric: g.Metric, Change: g.Change(), Worst: worstChange(cfg, g), Tolerance: guardBound(g), Vetoed: g.Regresses})
			}
		}
		r.Ladder = append(r.Ladder, lv)
	}
	var names []string
	for _, a := range r.Arms {
		names = append(names, a.Name)
	}
	r.Quota = quotaRows(h.Backend, cfg.Ladder, hashes, names, r.Columns, func(hsh string, bg int) []ledger.TrialEnd {
		if t := finalEnds[key{hsh, bg}]; len(t) > 0 {
			return t
		}
		return ends[key{hsh, bg}]
	})
	races := map[int]*report.Race{}
	var order []int
	for _, d := range l.Decisions {
		switch d.Stage {
		case StageCalibration:
			c := report.Calibration{Bg: d.Bg, CV: map[string]float64{}, Line: d.Line + "  → " + d.Reason, FalseAccept: d.Verdict == stats.Better.String()}
			vals := map[string][]float64{}
			for _, m := range byArm[key{refHash, d.Bg}][:min(len(byArm[key{refHash, d.Bg}]), d.N[0]+d.N[1])] {
				for k, v := range m {
					vals[k] = append(vals[k], v)
				}
			}
			for k, v := range vals {
				c.CV[k] = stats.CV(v)
				c.N = max(c.N, len(v))
			}
			r.Calibration = append(r.Calibration, c)
		case StageRace:
			rc := races[d.Round]
			if rc == nil {
				rc = &report.Race{Round: d.Round}
				races[d.Round] = rc
				order = append(order, d.Round)
			}
			x := d.Race
			if x == nil {
				continue
			}
			if d.Verdict == report.Carried {
				rc.Carried++
			} else {
				rc.Candidates++
			}
			rc.Rungs = max(rc.Rungs, x.Rungs)
			en := report.RaceEntry{Name: d.Step, Group: d.Group, Trials: x.Trials, Shift: float64(d.Effect.Center), Gain: float64(x.Gain), GainSE: float64(x.GainSE),
				Rung: x.Rung, Rank: x.Rank, Of: x.Of, Verdict: d.Verdict}
			if m := d.Mechanism; m != nil {
				en.Mechanism = mechanismText(m)
				en.Suspect = m.Suspect
			}
			if d.Verdict == report.Carried {
				en.Reason = carriedText(x)
			} else if x.Failed != "" {
				en.Reason = failedUnder + ": " + x.Failed
			} else if d.Verdict != report.Dropped {
				rc.Stopped = d.Reason
			}
			rc.Entries = append(rc.Entries, en)
		}
	}
	for _, n := range order {
		r.Races = append(r.Races, *races[n])
	}
	// The final rule's error rates at the noise this run measured and the
	// n it used, by simulation.
	if !math.IsNaN(r.Noise) && r.FinalN > 0 {
		r.Rates = finalRates(cfg, r.Noise, r.FinalN, h.Seed)
	}
	return r, nil
}

// armName names a profile arm, "tier + NAME" when the tier was in force
// with it.
func armName(key, name string) string {
	if strings.HasSuffix(key, TierSuffix) {
		return "tier + " + name
	}
	return name
}

func mechanismText(m *ledger.Mechanism) string {
	if m.Note != "" {
		return fmt.Sprintf("group %q: %s", m.Group, m.Note)
	}
	moved := "did not move"
	if m.Moved {
		moved = "moved"
	}
	return fmt.Sprintf("group %q %s %.3g → %.3g (predicted %s, p=%.3g): %s", m.Group, m.Counter, float64(m.Base), float64(m.Cand), m.Predicted, float64(m.P), moved)
}

// worstChange is a guard's loss bound as a change of the metric, signed
// as Change is ("-4.7%" of throughput, "+4" errors), the way the report's
// guard table prints it.
func worstChange(cfg Config, g ledger.Guard) string {
	w := float64(g.Worst)
	for _, c := range cfg.Guards {
		if c.Metric == g.Metric && c.Dir == stats.HigherIsBetter {
			w = -w
		}
	}
	m := stats.Relative
	if g.Count {
		m = stats.Count
	}
	return stats.FormatChange(m, w)
}

// guardBound prints a ledger guard's bound the way Guard.String does.
func guardBound(g ledger.Guard) string {
	return strings.TrimPrefix(Guard{Metric: g.Metric, Bound: g.Bound}.String(), g.Metric+":")
}

// finalRates are the final rule's keep rates, simulated at the noise the
// run measured with the n and looks it used: with no effect (false keeps),
// at the minimum effect (the gate: at most α) and at 1.5× the minimum
// effect (the power it was sized for).
func finalRates(cfg Config, noise float64, n int, seed uint64) []report.Rate {
	const runs = 400
	plan := stats.Sequential{Rule: stats.Rule{Metric: cfg.Metric, Alpha: cfg.Alpha, MinEffect: cfg.MinEffect, Dir: cfg.Dir}, Harm: cfg.Harm, Looks: looks(n)}
	var rs []report.Rate
	for _, x := range []struct {
		what   string
		effect float64
	}{{"no effect", 0}, {"effect = minimum effect", cfg.MinEffect}, {"effect = 1.5× minimum effect", 1.5 * cfg.MinEffect}} {
		rs = append(rs, report.Rate{What: x.what, Effect: x.effect, Runs: runs, Keeps: stats.SimulateFinal(plan, len(cfg.Ladder), noise, x.effect, runs, seed)})
	}
	return rs
}

// carriedText says in a few words what a carried race entry rests on.
func carriedText(x *ledger.Race) string {
	switch x.Basis {
	case basisState:
		return fmt.Sprintf("from round %d, its state by difference with the winner", x.CarriedFrom)
	case basisMove:
		return fmt.Sprintf("from round %d, its move on an untouched group (groups assumed to add)", x.CarriedFrom)
	}
	return fmt.Sprintf("from round %d", x.CarriedFrom)
}
