package refine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/scheduler"
)

// TestEquivalence runs the equivalence check on the fake benchmark: a
// profile that changes nothing the benchmark sees is shown equivalent, one
// 20% slower different, and one the backend realises as no change at all
// runs no trial. The report says which.
func TestEquivalence(t *testing.T) {
	for _, tc := range []struct {
		name      string
		effect    float64
		unchanged bool
		want      string
		fails     bool // the benchmark fails under the profile
	}{
		{"no effect", 1, false, "equivalent", false},
		{"20% slower", 1.2, false, "different", false},
		{"realised as stock", 1.2, true, verdictIdentical, false},
		{"the benchmark fails under it", 1, false, "different", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched := &fakeScheduler{}
			inner := noisyBench(sched, 3, 0.04, func(p *profiles.Profile) float64 {
				if p == nil {
					return 1
				}
				return tc.effect
			})
			starved := fmt.Errorf("jsonl: %w: no requests completed in the window", exec.Command("sh", "-c", "exit 1").Run())
			env := testEnv(t, sched, func(ctx context.Context, dir string) (map[string]float64, error) {
				if tc.fails && sched.current() != nil {
					return nil, starved
				}
				return inner(ctx, dir)
			})
			cfg := testConfig(5)
			cfg.Equivalence = 0.05
			cfg.Defaults()
			if err := cfg.Check(); err != nil {
				t.Fatal(err)
			}
			// The ledger's header holds the configuration, as a real run's does.
			raw, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			lw, err := ledger.Create(filepath.Join(t.TempDir(), "ledger.jsonl"), ledger.Header{Config: raw})
			if err != nil {
				t.Fatal(err)
			}
			defer lw.Close()
			env.Ledger = lw
			env.Realise = func(p *profiles.Profile) (string, error) {
				if tc.unchanged {
					return scheduler.UnchangedKey, nil
				}
				return "some state", nil
			}
			res, err := Run(context.Background(), cfg, testProfile(), env)
			if err != nil {
				t.Fatal(err)
			}
			if res.Equivalence != tc.want || res.Kept || len(res.Rounds) != 0 {
				t.Fatalf("equivalence %q, kept %v, %d rounds: want %q, nothing kept, no search", res.Equivalence, res.Kept, len(res.Rounds), tc.want)
			}
			l, err := ledger.Read(lw.Path())
			if err != nil {
				t.Fatal(err)
			}
			if tc.unchanged && len(l.Starts) != 0 {
				t.Errorf("%d trials run for a profile realised as stock", len(l.Starts))
			}
			if !tc.unchanged && !tc.fails && len(l.Starts) < 2*equivalencePilot {
				t.Errorf("%d trials: want at least the first look's %d", len(l.Starts), 2*equivalencePilot)
			}
			rep, err := ReportOf(l, ReportInfo{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Equivalence == nil || rep.Equivalence.Finding != tc.want {
				t.Fatalf("report equivalence %+v, want %q", rep.Equivalence, tc.want)
			}
			var md bytes.Buffer
			rep.Markdown(&md)
			head := map[string]string{"equivalent": "**Equivalent**", "different": "**Different**", verdictIdentical: "**Identical kernel state**"}[tc.want]
			if !strings.HasPrefix(strings.SplitN(md.String(), "\n\n", 2)[1], head) {
				t.Errorf("REPORT.md does not open with %s:\n%.600s", head, md.String())
			}
			if want := "the benchmark failed under the input profile"; tc.fails && (!strings.Contains(md.String(), want) || !strings.Contains(res.Stopped, starved.Error())) {
				t.Errorf("the report or the stop reason (%q) does not say %q:\n%s", res.Stopped, want, md.String())
			}
			t.Logf("%s: %d trials; %s", tc.name, len(l.Starts), res.Stopped)
		})
	}
}
