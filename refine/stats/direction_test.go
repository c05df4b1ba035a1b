package stats

import (
	"errors"
	"strings"
	"testing"
)

func TestDirectionCheck(t *testing.T) {
	for _, tc := range []struct {
		d      Direction
		better string
		ok     bool
	}{
		{LowerIsBetter, "lower", true},
		{HigherIsBetter, "higher", true},
		{0, "", false},
		{2, "", false},
	} {
		err := tc.d.Check()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrNoDirection)) {
			t.Errorf("Direction(%d).Check() = %v; want ok=%v or ErrNoDirection", tc.d, err, tc.ok)
		}
		if tc.ok && tc.d.Better() != tc.better {
			t.Errorf("Direction(%d).Better() = %q; want %q", tc.d, tc.d.Better(), tc.better)
		}
	}
}

// The zero Direction is refused by every decision function, never taken
// for one of the two.
func TestZeroDirectionPanics(t *testing.T) {
	base := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	for name, f := range map[string]func(){
		"Decide":      func() { Decide(base, base, Rule{Metric: "m", Alpha: 0.05}) },
		"NonInferior": func() { NonInferior(base, base, 0, Relative, 0.05, 0.05) },
		"Look": func() {
			Sequential{Rule: Rule{Metric: "m", Alpha: 0.05}, Looks: []int{8}}.Look(0, []Pair{{base, base}}, nil, nil)
		},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, ErrNoDirection.Error()) {
					t.Errorf("%s with no direction: recovered %v; want a panic naming the missing direction", name, r)
				}
			}()
			f()
		}()
	}
}
