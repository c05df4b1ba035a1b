package refine

import (
	"testing"

	"temper.codes/temper-train/refine/ledger"
)

// TestMechanism: the check compares preemptions per run, not per second,
// so a yield group made normal — which runs far more often and is therefore
// preempted more often per second — counts as moved when each run is cut
// short less often; trials without dispatches of the group are left out.
func TestMechanism(t *testing.T) {
	// arm builds n trials of the group with the given dispatches and
	// preemptions per second, jittered so that the arms have a spread.
	arm := func(n int, switches, preempts float64) []sample {
		var xs []sample
		for i := range n {
			j := 1 + 0.02*float64(i%3-1)
			xs = append(xs, sample{groups: map[string]ledger.GroupRates{
				"rest": {SwitchesPerS: switches * j, PreemptsPerS: preempts / j},
			}})
		}
		return xs
	}
	idle := func(n int) []sample {
		var xs []sample
		for range n {
			xs = append(xs, sample{groups: map[string]ledger.GroupRates{"rest": {}}})
		}
		return xs
	}
	cases := []struct {
		name      string
		favour    int8
		p         pair
		predicted string
		moved     bool
		base      float64 // median preemptions per run of arm A, 0: not checked
		note      bool
	}{
		// Per second 5 → 50 (up), per run 0.5 → 0.05 (down, as predicted).
		{"yield → normal: fewer preemptions per run, more per second", +1,
			pair{arm(8, 10, 5), arm(8, 1000, 50)}, "down", true, 0.5, false},
		{"favoured less: more preemptions per run", -1,
			pair{arm(8, 1000, 50), arm(8, 10, 5)}, "up", true, 0.05, false},
		{"per run unchanged while per second doubles", +1,
			pair{arm(8, 100, 10), arm(8, 200, 20)}, "down", false, 0.1, false},
		{"trials without dispatches are left out", +1,
			pair{append(idle(6), arm(8, 10, 5)...), append(idle(6), arm(8, 1000, 50)...)}, "down", true, 0.5, false},
		{"no dispatches in one arm", +1,
			pair{arm(8, 10, 5), idle(8)}, "down", false, 0, true},
	}
	e := &engine{cfg: Config{Alpha: 0.05}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := e.mechanism(Step{Group: "rest", Favour: c.favour}, &c.p)
			if m.Counter != "preempts_per_run" || m.Predicted != c.predicted || m.Moved != c.moved || (m.Note != "") != c.note {
				t.Errorf("mechanism %+v; want counter preempts_per_run, predicted %s, moved %v, note %v", *m, c.predicted, c.moved, c.note)
			}
			if c.base > 0 && (float64(m.Base) < c.base*0.95 || float64(m.Base) > c.base*1.05) {
				t.Errorf("base median %v preemptions per run, want about %v", m.Base, c.base)
			}
		})
	}
	if m := e.mechanism(Step{}, &pair{}); m != nil {
		t.Errorf("a whole-profile arm has a mechanism: %+v", *m)
	}
}
