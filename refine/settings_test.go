package refine

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"temper.codes/temper-train/refine/stats"
)

func TestParsePercent(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		err  string
	}{
		{in: "5%", want: 0.05},
		{in: " -5% ", want: -0.05},
		{in: "0.05", want: 0.05},
		{in: "0", want: 0},
		{in: "five", err: `"five" is not a percentage (e.g. 5%)`},
		{in: "%", err: `"%" is not a percentage`},
	} {
		got, err := ParsePercent(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParsePercent(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParsePercent(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseGuard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Guard
		err  string
	}{
		{in: "throughput:-5%", want: Guard{Metric: "throughput", Dir: stats.HigherIsBetter, Bound: 0.05}},
		{in: "errors:0%", want: Guard{Metric: "errors", Dir: stats.LowerIsBetter, Count: true}},
		{in: "GET/dropped_errors:-10%", want: Guard{Metric: "GET/dropped_errors", Dir: stats.LowerIsBetter, Bound: 0.1, Count: true}},
		{in: "p99_ms:-0.1", want: Guard{Metric: "p99_ms", Dir: stats.LowerIsBetter, Bound: 0.1}},
		{in: "throughput", err: `"throughput": want METRIC:BOUND`},
		{in: ":-5%", err: `":-5%": want METRIC:BOUND`},
		{in: "throughput:x", err: `"throughput:x": "x" is not a percentage`},
		{in: "throughput:5%", err: `"throughput:5%": the bound is how much worse is tolerated, ≤ 0`},
		{in: "widgets:-5%", err: `"widgets:-5%": `},
	} {
		got, err := ParseGuard(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("ParseGuard(%q) = %+v, %v; want error %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParseGuard(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseLadder(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{in: "0,1,2,4", want: []int{0, 1, 2, 4}},
		{in: " 8 ", want: []int{8}},
		{in: "0,256", want: []int{0, 256}},
		{in: "0,257", err: `"0,257": "257" is not a spinner count 0..256`},
		{in: "1,-1", err: `"1,-1": "-1" is not a spinner count`},
		{in: "1,,2", err: `"1,,2": "" is not a spinner count`},
	} {
		got, err := ParseLadder(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("ParseLadder(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || !reflect.DeepEqual(got, tc.want)):
			t.Errorf("ParseLadder(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// Parse names the setting that does not parse; the guard on the primary
// metric goes, the ladder replaces the background, a zero seed is drawn.
func TestSettingsParse(t *testing.T) {
	base := func() Settings {
		return Settings{Config: Config{Metric: "p99_ms", Alpha: 0.05, Warmup: time.Second},
			MinEffect: "5%", Guards: []string{"throughput:-5%", "p99_ms:-1%"}, Background: 2}
	}
	c, err := base().Parse()
	if err != nil {
		t.Fatal(err)
	}
	want := []Guard{{Metric: "throughput", Dir: stats.HigherIsBetter, Bound: 0.05}}
	if c.Dir != stats.LowerIsBetter || c.MinEffect != 0.05 || !reflect.DeepEqual(c.Guards, want) ||
		!reflect.DeepEqual(c.Ladder, []int{2}) || c.Seed == 0 || c.RaceN != 1 || c.Harm != 0.05 {
		t.Errorf("Parse() = %+v", c)
	}
	for name, tc := range map[string]struct {
		edit    func(*Settings)
		setting string // "": not a *SettingError
		want    string
	}{
		"metric":  {func(s *Settings) { s.Config.Metric = "widgets" }, "Metric", "Metric: "},
		"effect":  {func(s *Settings) { s.MinEffect = "lots" }, "MinEffect", `MinEffect: "lots" is not a percentage`},
		"guard":   {func(s *Settings) { s.Guards = []string{"throughput"} }, "Guards", `Guards: "throughput": want METRIC:BOUND`},
		"ladder":  {func(s *Settings) { s.Ladder = "0,x" }, "Ladder", `Ladder: "0,x": "x" is not a spinner count`},
		"ladder2": {func(s *Settings) { s.Ladder = "0,4" }, "", ""},
		"check":   {func(s *Settings) { s.Config.FinalN = 3 }, "", "final n = 3"},
		"harm":    {func(s *Settings) { s.Harm = "0%" }, "Harm", "Harm: 0%: no finite number of trials"},
		"harm2":   {func(s *Settings) { s.Harm = "much" }, "Harm", `Harm: "much" is not a percentage`},
	} {
		s := base()
		tc.edit(&s)
		c, err := s.Parse()
		var se *SettingError
		switch {
		case tc.want == "":
			if err != nil || !reflect.DeepEqual(c.Ladder, []int{0, 4}) {
				t.Errorf("%s: Parse() = ladder %v, %v", name, c.Ladder, err)
			}
		case err == nil || !strings.HasPrefix(err.Error(), tc.want):
			t.Errorf("%s: Parse() error %v; want %q", name, err, tc.want)
		case errors.As(err, &se) != (tc.setting != "") || (se != nil && se.Setting != tc.setting):
			t.Errorf("%s: Parse() error %#v; want setting %q", name, err, tc.setting)
		}
	}
	s := base()
	s.Config.Seed = 42
	if c, _ := s.Parse(); c.Seed != 42 {
		t.Errorf("a given seed became %d", c.Seed)
	}
}

func TestProgressString(t *testing.T) {
	p := Progress{Stage: "race", Step: strings.Repeat("x", 50), Trials: 3, Planned: 40, Round: 1, Accepted: 0,
		Elapsed: 61500 * time.Millisecond, ETA: 10 * time.Minute}
	want := "trial 3/~40  race  " + strings.Repeat("x", 39) + "…  round 1, 0 accepted  1m2s elapsed, ETA 10m0s"
	if got := p.String(); got != want {
		t.Errorf("String() =\n%q; want\n%q", got, want)
	}
	if got := truncate("héllo", 5); got != "héllo" {
		t.Errorf("truncate kept %q", got)
	}
}
