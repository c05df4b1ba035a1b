package synthesize

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"temper.codes/temper-train/profiles"
)

// Risk names a portfolio profile by how far it moves the kernel from stock.
type Risk string

// The portfolio's risks, least first.
const (
	// Conservative: slices only. Groups the profile favours are latency
	// without a weight (on CFS: their slice, nice 0), everything else
	// normal: no SCHED_IDLE, no SCHED_BATCH, no cpuset. With a load
	// generator on the node nothing is favoured, so every group is normal.
	Conservative Risk = "conservative"
	// Moderate: the profile without exclusive cores: an exclusive group is
	// normal with its slice, as a demoted one is. No cpuset changes.
	Moderate Risk = "moderate"
	// Aggressive: the profile itself, with exclusive cores where the rules
	// allow them.
	Aggressive Risk = "aggressive"
)

// Alternative is one profile of a portfolio.
type Alternative struct {
	Risk Risk
	// Result is the profile with its header; the synthesized profile
	// itself (the same *Result) for the alternative that equals it.
	Result *Result
	// Main: this alternative is the synthesized profile.
	Main bool
}

// portfolio derives the alternatives from r's profile, least risky first,
// without two that set the same groups the same way (compared on their
// matchers, treatments and knobs, not on evidence or description): where
// the profile has no exclusive group, moderate is the profile; where it
// favours nothing, conservative may be too. Each alternative lints clean.
func portfolio(r *Result, loadGenerator bool) ([]Alternative, error) {
	var out []Alternative
	var keys [][]byte
	for _, risk := range []Risk{Conservative, Moderate, Aggressive} {
		alt := Alternative{Risk: risk, Result: r, Main: risk == Aggressive}
		if risk != Aggressive {
			p := derive(r.Profile, risk, loadGenerator)
			alt.Result = &Result{Profile: p, Warnings: r.Warnings,
				Header: append(slices.Clone(r.Header), fmt.Sprintf("portfolio: the %s alternative (%s) of the synthesized profile", risk, riskText[risk]))}
			errs, advice := profiles.Split(profiles.Lint(p, profiles.LintOptions{}))
			if len(errs) > 0 {
				return nil, fmt.Errorf("internal error: the %s alternative fails lint: %s", risk, errs[0])
			}
			alt.Result.Lint = advice
		}
		key, err := groupsKey(alt.Result.Profile)
		if err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(keys, func(k []byte) bool { return bytes.Equal(k, key) }); i >= 0 {
			// The same profile under a lower risk: it is that one.
			if alt.Main {
				out[i] = Alternative{Risk: out[i].Risk, Result: r, Main: true}
			}
			continue
		}
		keys = append(keys, key)
		out = append(out, alt)
	}
	return out, nil
}

var riskText = map[Risk]string{
	Conservative: "slices only: favoured groups latency without a weight, the rest normal",
	Moderate:     "no exclusive cores: exclusive groups normal with their slice",
	Aggressive:   "exclusive cores where allowed",
}

// derive is p taken down to a risk.
func derive(p *profiles.Profile, risk Risk, loadGenerator bool) *profiles.Profile {
	q := *p
	q.ThreadGroups = slices.Clone(p.ThreadGroups)
	for i := range q.ThreadGroups {
		g := &q.ThreadGroups[i]
		if g.Evidence != nil {
			e := *g.Evidence
			g.Evidence = &e
		}
		was := g.Treatment
		switch {
		case risk == Moderate && was == profiles.Exclusive:
			g.Treatment = profiles.Normal
		case risk == Conservative && favoured(was) && !loadGenerator:
			g.Treatment = profiles.Latency
		case risk == Conservative:
			g.Treatment = profiles.Normal
		}
		if g.Treatment == was {
			continue
		}
		g.ExclusiveCores, g.CPUFraction = 0, 0
		g.Weight, g.Preempt = 0, false
		if g.Evidence != nil {
			g.Evidence.Arithmetic += fmt.Sprintf("; %s alternative: %s, not %s", risk, g.Treatment, was)
		}
	}
	// Most favoured first, the catch-all last, as Profile orders them; the
	// matchers are disjoint, so the order moves no thread.
	if n := len(q.ThreadGroups); n > 1 {
		slices.SortStableFunc(q.ThreadGroups[:n-1], func(x, y profiles.ThreadGroup) int {
			return cmp.Compare(rank(x.Treatment), rank(y.Treatment))
		})
	}
	q.Description = fmt.Sprintf("The %s alternative (%s) of: %s", risk, riskText[risk], p.Description)
	return &q
}

// groupsKey is what an alternative sets: its groups without evidence.
func groupsKey(p *profiles.Profile) ([]byte, error) {
	gs := slices.Clone(p.ThreadGroups)
	for i := range gs {
		gs[i].Evidence = nil
	}
	return json.Marshal(gs)
}

// PortfolioDir is where WritePortfolio puts the alternatives, under the
// profile's directory: hidden, so that profiles.LoadDir (one profile per
// <id>/<shape-key>.toml) does not take them for profiles.
const PortfolioDir = ".portfolio"

// PortfolioPath is where an alternative goes under dir:
// <dir>/<id>/.portfolio/<shape-key>.<risk>.toml.
func (a Alternative) PortfolioPath(dir string) string {
	p := a.Result.Profile
	return filepath.Join(dir, p.ID, PortfolioDir, p.MachineShape.Key()+"."+string(a.Risk)+".toml")
}

// WritePortfolio writes every alternative but the profile itself (which
// WriteFile writes) atomically and returns their paths, least risky first.
func (r *Result) WritePortfolio(dir string) ([]string, error) {
	var paths []string
	for _, a := range r.Portfolio {
		if a.Main {
			continue
		}
		data, err := a.Result.TOML()
		if err != nil {
			return paths, err
		}
		path := a.PortfolioPath(dir)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return paths, fmt.Errorf("portfolio %s: %w", path, err)
		}
		if err := writeFile(path, data); err != nil {
			return paths, fmt.Errorf("portfolio %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}
