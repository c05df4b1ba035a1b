package refine

import (
	"encoding/json"
	"fmt"
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
	seen := map[string]bool{}
	inputHash := ""
	refHash := StockHash
	for _, s := range l.Starts {
		e, ok := done[s.Trial]
		if !ok || seen[s.Trial] {
			continue
		}
		seen[s.Trial] = true
		r.Trials++
		byArm[key{s.Candidate, s.Bg}] = append(byArm[key{s.Candidate, s.Bg}], e.Metrics)
		if s.Stage == StageCalibration && refHash == StockHash {
			refHash = s.Candidate // the canary's profile in force, or stock
		}
		if s.Stage == StageFinal {
			finalArm[key{s.Candidate, s.Bg}] = append(finalArm[key{s.Candidate, s.Bg}], e.Metrics)
		}
		if inputHash == "" && s.Stage == StageScreen && s.Arm == "A" {
			inputHash = s.Candidate
		}
	}
	tierKey := StockHash + TierSuffix
	refinedHash := ""
	for _, d := range l.Decisions {
		if d.Stage == StageFinal {
			if d.Candidate == tierKey {
				r.Tier = true
			}
			refinedHash = d.Candidate // the decision is recorded last
			r.Kept = d.Accepted
			r.Final = append(r.Final, d.Line+"  → "+d.Reason)
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
		r.Arms = append(r.Arms, report.Arm{Name: "tier only", Desc: "no profile; the node's tier in force (BestEffort pods an idle entity)"})
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
			if d.Stage != StageFinal || d.Bg != bg {
				continue
			}
			delta := &report.Delta{NBase: d.N[0], NCand: d.N[1], Effect: d.Effect.Stats(), P: float64(d.P), Verdict: d.Verdict}
			switch {
			case r.Tier && d.Candidate == tierKey:
			case r.Tier && !strings.HasSuffix(d.Step, "vs tier only"):
				lv.Product = delta
			default:
				lv.Delta = delta
			}
		}
		r.Ladder = append(r.Ladder, lv)
	}

	worstCV := 0.0
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
			worstCV = max(worstCV, c.CV[cfg.Metric])
			r.Calibration = append(r.Calibration, c)
		case StageScreen, StageConfirm:
			s := report.Step{Round: d.Round, Stage: d.Stage, Name: d.Step, Group: d.Group, Bg: d.Bg, Base: d.Base.Stats(), Cand: d.Cand.Stats(),
				Accepted: d.Accepted, Verdict: d.Verdict, Line: d.Line + "  → " + d.Reason}
			for _, g := range d.Guards {
				s.Guards = append(s.Guards, fmt.Sprintf("%s: %s (bound %s), p=%.3g, regresses %v", g.Metric, g.Change(), guardBound(g), float64(g.P), g.Regresses))
			}
			if m := d.Mechanism; m != nil {
				s.Mechanism = mechanismText(m)
				s.Suspect = m.Suspect
			}
			r.Steps = append(r.Steps, s)
		}
	}
	// The decision rule's error rates at the noise this run measured and
	// the n it used, by simulation (stats.Simulate).
	if worstCV > 0 {
		k := 0
		for _, d := range l.Decisions {
			if d.Stage == StageScreen && d.Round == 1 {
				k++
			}
		}
		k = max(1, k/max(1, len(cfg.Ladder)))
		r.Rates = stats.ErrorRates(stats.Sim{Rule: r.Rule, K: k, Screen: cfg.ScreenN, ScreenP: cfg.ScreenP, Confirm: confirmN(l, cfg),
			CV: worstCV, Rounds: 400, Seed: h.Seed})
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

// confirmN is the confirmation n the run used (calibration may have
// raised it above the configuration's).
func confirmN(l *ledger.Ledger, cfg Config) int {
	n := cfg.ConfirmN
	for _, d := range l.Decisions {
		switch d.Stage {
		case StageConfirm:
			return d.N[1]
		case StageFinal:
			n = max(n, d.N[1]) // calibration raised the n of both
		}
	}
	return n
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

// guardBound prints a ledger guard's bound the way Guard.String does.
func guardBound(g ledger.Guard) string {
	return strings.TrimPrefix(Guard{Metric: g.Metric, Bound: g.Bound}.String(), g.Metric+":")
}
