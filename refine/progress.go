package refine

import (
	"fmt"
	"time"
)

// String is the one-line progress of a run, for a terminal's status line:
// trials done of planned, stage, the step being measured (cut to 40
// characters), round, steps accepted, elapsed time and ETA.
func (p Progress) String() string {
	return fmt.Sprintf("trial %d/~%d  %s  %s  round %d, %d accepted  %s elapsed, ETA %s",
		p.Trials, p.Planned, p.Stage, truncate(p.Step, 40), p.Round, p.Accepted,
		p.Elapsed.Round(time.Second), p.ETA.Round(time.Second))
}

// truncate cuts s to n runes, the last one an ellipsis when it was longer.
func truncate(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
