package refine

import (
	"cmp"
	"fmt"
	"time"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/ledger"
)

// WithEvidence returns a copy of the refined profile with refine's numbers
// in it: the final comparison against stock in traits.refined, and each
// accepted step's decision in its group's evidence.refined. ledgerName
// names the ledger the numbers come from.
func WithEvidence(r *Result, ledgerName string, now time.Time) *profiles.Profile {
	p := cloneProfile(r.Refined)
	day := now.UTC().Format("2006-01-02")
	for _, d := range r.Final {
		p.Traits.Refined = append(p.Traits.Refined, fmt.Sprintf("%s vs %s (ledger %s): %s", day, cmp.Or(r.Reference, "stock CFS"), ledgerName, evidenceLine(d)))
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
	return fmt.Sprintf("%s at bg=%d: %.4g → %.4g (%s), n=%d+%d, p=%.2g",
		d.Metric, d.Bg, d.Base.Center, d.Cand.Center, d.Shift(), d.N[0], d.N[1], d.P)
}
