package refine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"temper.codes/temper-train/refine/bench"
)

// Settings are a run's configuration as a person writes it: the effect,
// the guards and the background ladder as text, parsed and checked by
// Parse into a Config.
type Settings struct {
	// Config holds what is taken as given: Metric, Alpha, the sample sizes,
	// the budget, Warmup and Seed. Its Dir, MinEffect, Guards and Ladder
	// are set from the fields below.
	Config Config
	// MinEffect is the smallest relative improvement worth a change, as
	// ParsePercent reads it.
	MinEffect string
	// Harm is the loss of the primary metric tolerated at any level, as
	// ParsePercent reads it; "" is the minimum effect.
	Harm string
	// Equivalence is the margin of an equivalence check, as ParsePercent
	// reads it; "" runs a search.
	Equivalence string
	// Guards are METRIC:BOUND (ParseGuard); a guard on Config.Metric itself
	// is dropped, the primary metric being decided on already.
	Guards []string
	// Ladder lists background levels, "0,1,2,4" (ParseLadder); "" measures
	// at Background spinners only.
	Ladder     string
	Background int
}

// SettingError is a setting Parse cannot read: Setting names the Settings
// field ("MinEffect", "Harm", "Equivalence", "Guards", "Ladder") or "Metric" for a metric whose
// direction is unknown. The command maps it to its flag.
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string { return e.Setting + ": " + e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// Parse reads s into the configuration of a run: the metric's direction
// from its name (bench.DirectionOf), the effect, guards and ladder parsed,
// a zero seed drawn at random (the ledger records it), the defaults filled
// in and the result checked (Config.Check). A setting that does not parse
// is a *SettingError; a configuration refine cannot run is Check's error.
func (s Settings) Parse() (Config, error) {
	c := s.Config
	d, err := bench.DirectionOf(c.Metric)
	if err != nil {
		return c, &SettingError{"Metric", err}
	}
	c.Dir = d
	if c.MinEffect, err = ParsePercent(s.MinEffect); err != nil {
		return c, &SettingError{"MinEffect", err}
	}
	if s.Harm != "" {
		if c.Harm, err = ParsePercent(s.Harm); err != nil {
			return c, &SettingError{"Harm", err}
		}
		if c.Harm == 0 {
			return c, &SettingError{"Harm", fmt.Errorf("0%%: no finite number of trials can show that nothing at all was lost; tolerate a loss such as 2%%")}
		}
	}
	if s.Equivalence != "" {
		if c.Equivalence, err = ParsePercent(s.Equivalence); err != nil {
			return c, &SettingError{"Equivalence", err}
		}
		if !(c.Equivalence > 0 && c.Equivalence < 1) {
			return c, &SettingError{"Equivalence", fmt.Errorf("%q: want a margin above 0 and below 100%%, e.g. 3%%", s.Equivalence)}
		}
	}
	for _, g := range s.Guards {
		gd, err := ParseGuard(g)
		if err != nil {
			return c, &SettingError{"Guards", err}
		}
		if gd.Metric != c.Metric {
			c.Guards = append(c.Guards, gd)
		}
	}
	c.Ladder = []int{s.Background}
	if s.Ladder != "" {
		if c.Ladder, err = ParseLadder(s.Ladder); err != nil {
			return c, &SettingError{"Ladder", err}
		}
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	c.Defaults()
	return c, c.Check()
}

// ParsePercent reads a relative amount as a fraction: "5%", "-5%" or
// "0.05".
func ParsePercent(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a percentage (e.g. 5%%)", s)
	}
	if pct {
		v /= 100
	}
	return v, nil
}

// ParseGuard reads METRIC:BOUND, the bound being how much worse the metric
// may get, ≤ 0: throughput:-5% tolerates 5% less throughput, errors:0% no
// significant increase in errors. The metric's direction, and whether it
// is a count, come from its name (bench.DirectionOf, bench.IsCount). Errors start with the
// guard, quoted.
func ParseGuard(s string) (Guard, error) {
	m, b, ok := strings.Cut(s, ":")
	if !ok || m == "" {
		return Guard{}, fmt.Errorf("%q: want METRIC:BOUND, e.g. throughput:-5%%", s)
	}
	v, err := ParsePercent(b)
	if err != nil {
		return Guard{}, fmt.Errorf("%q: %v", s, err)
	}
	d, err := bench.DirectionOf(m)
	if err != nil {
		return Guard{}, fmt.Errorf("%q: %w", s, err)
	}
	if v > 0 {
		return Guard{}, fmt.Errorf("%q: the bound is how much worse is tolerated, ≤ 0 (e.g. -5%%)", s)
	}
	return Guard{Metric: m, Dir: d, Bound: math.Abs(v), Count: bench.IsCount(m)}, nil
}

// MaxSpinners bounds a background level.
const MaxSpinners = 256

// ParseLadder reads background levels, "0,1,2,4": spinner counts from 0 to
// MaxSpinners. Errors start with the ladder, quoted.
func ParseLadder(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > MaxSpinners {
			return nil, fmt.Errorf("%q: %q is not a spinner count 0..%d", s, p, MaxSpinners)
		}
		out = append(out, n)
	}
	return out, nil
}
