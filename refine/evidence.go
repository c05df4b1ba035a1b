package refine

import (
	"cmp"
	"fmt"
	"time"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/stats"
)

// WithEvidence returns a copy of the refined profile with refine's numbers
// in it: the final comparison against stock in traits.refined, and each
// accepted step's decision in its group's evidence.refined. ledgerName
// names the ledger the numbers come from.
func WithEvidence(r *Result, ledgerName string, now time.Time) *profiles.Profile {
	p := cloneProfile(r.Refined)
	day := now.UTC().Format("2006-01-02")
	// The final's deciding look: the common effect across the levels.
	var last *ledger.Decision
	for i, d := range r.Final {
		if d.Look != nil {
			last = &r.Final[i]
		}
	}
	if last != nil {
		p.Traits.Refined = append(p.Traits.Refined, fmt.Sprintf("%s vs %s (ledger %s): %s", day, cmp.Or(r.Reference, "stock CFS"), ledgerName, evidenceLine(*last)))
	}
	for _, round := range r.Rounds {
		if round.Accepted == nil {
			continue
		}
		for _, d := range round.Decisions {
			if !d.Accepted || d.Step != round.Accepted.String() {
				continue
			}
			for i := range p.ThreadGroups {
				g := &p.ThreadGroups[i]
				if g.Name != round.Accepted.Group || g.Evidence == nil {
					continue
				}
				g.Evidence.Refined = append(g.Evidence.Refined, fmt.Sprintf("%s round %d: %s → %s accepted (ledger %s): %s",
					day, round.Index, round.Accepted.Param, round.Accepted.To, ledgerName, evidenceLine(d)))
			}
		}
	}
	return p
}

func evidenceLine(d ledger.Decision) string {
	switch {
	case d.Look != nil:
		return fmt.Sprintf("%s at every level: %s, n=%d+%d, p=%.2g (look %d of %d, one-sided α %.3g)",
			d.Metric, d.Shift(), d.N[0], d.N[1], d.P, d.Look.Index, d.Look.Of, float64(d.Look.Alpha))
	case d.Race != nil:
		return fmt.Sprintf("%s ≈ %s over %d trials, won rung %d of %d (a race: an estimate, not a test)",
			d.Metric, stats.FormatShift(float64(d.Effect.Center)), d.Race.Trials, d.Race.Rung, d.Race.Rungs)
	}
	return fmt.Sprintf("%s at bg=%d: %.4g → %.4g (%s), n=%d+%d, p=%.2g",
		d.Metric, d.Bg, d.Base.Center, d.Cand.Center, d.Shift(), d.N[0], d.N[1], d.P)
}
