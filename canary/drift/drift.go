// Package drift tells when a workload no longer matches the profile in
// force: the canary loop re-synthesizes instead of refining a profile
// written for threads that have changed. A fresh analysis is compared with
// the profile in force and with the profile synthesize makes from that
// analysis now; three kinds of change count:
//
//   - a group's threads changed class: most of the CPU of a group that
//     was synthesized for one class is now spent by threads of another;
//   - a matcher matches nothing: a group (not the catch-all) holds none of
//     the workload's threads any more;
//   - a new hot thread family: a thread busy enough for a group of its own
//     (cpu_share ≥ synthesize.HotShare) lands in the profile's catch-all
//     (or no group) while the fresh profile gives it a group of its own.
package drift

import (
	"fmt"
	"sort"
	"strings"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/synthesize"
)

// Kinds of drift, as findings name them.
const (
	ClassChanged = "class-changed"
	MatchesNone  = "matches-nothing"
	NewHot       = "new-hot-family"
)

// Finding is one way the workload left the profile.
type Finding struct {
	Kind  string
	Group string // the group of the profile in force concerned ("" for none)
	Text  string // one line, what changed
}

func (f Finding) String() string { return f.Kind + ": " + f.Text }

// Find compares the analysis a with the profile in force and the profile
// freshly synthesized from a. It returns nothing when inForce is nil
// (stock: nothing to drift from).
func Find(a *analyze.Analysis, inForce, fresh *profiles.Profile) ([]Finding, error) {
	if inForce == nil {
		return nil, nil
	}
	old, err := profiles.Compile(inForce)
	if err != nil {
		return nil, fmt.Errorf("profile in force: %w", err)
	}
	var now *profiles.Classifier
	if fresh != nil {
		if now, err = profiles.Compile(fresh); err != nil {
			return nil, fmt.Errorf("fresh profile: %w", err)
		}
	}
	type load struct {
		threads int
		byClass map[string]float64
	}
	groups := make([]load, len(inForce.ThreadGroups))
	for i := range groups {
		groups[i].byClass = map[string]float64{}
	}
	var out []Finding
	hotSeen := map[string]bool{}
	for _, t := range a.Threads {
		if t.Kernel || t.NeverRan {
			continue
		}
		v := synthesize.MatcherView(t)
		g := old.Group(v)
		if g >= 0 {
			groups[g].threads++
			groups[g].byClass[string(t.Class)] += t.Features.CPUShare
		}
		if now == nil || t.Features.CPUShare < synthesize.HotShare {
			continue
		}
		if (g < 0 || catchAll(inForce.ThreadGroups[g])) && !hotSeen[t.Family] {
			if f := now.Group(v); f >= 0 && !catchAll(fresh.ThreadGroups[f]) {
				hotSeen[t.Family] = true
				where := "no group"
				if g >= 0 {
					where = fmt.Sprintf("the catch-all %q", inForce.ThreadGroups[g].Name)
				}
				out = append(out, Finding{Kind: NewHot, Text: fmt.Sprintf("thread %d %q (family %s, %s, cpu_share %.2f) lands in %s; the fresh profile gives it group %q (%s)",
					t.Tid, t.Comm, t.Family, t.Class, t.Features.CPUShare, where, fresh.ThreadGroups[f].Name, fresh.ThreadGroups[f].Treatment)})
			}
		}
	}
	for i, g := range inForce.ThreadGroups {
		if catchAll(g) {
			continue
		}
		l := groups[i]
		if l.threads == 0 {
			out = append(out, Finding{Kind: MatchesNone, Group: g.Name, Text: fmt.Sprintf("group %q (%s) matches none of the workload's threads now", g.Name, matchString(g.Match))})
			continue
		}
		if g.Evidence == nil || g.Evidence.Class == "" {
			continue
		}
		top, share, total := "", 0.0, 0.0
		for _, c := range sortedKeys(l.byClass) {
			total += l.byClass[c]
			if l.byClass[c] > share {
				top, share = c, l.byClass[c]
			}
		}
		if top != "" && top != g.Evidence.Class && share > 0 {
			out = append(out, Finding{Kind: ClassChanged, Group: g.Name, Text: fmt.Sprintf("group %q was synthesized for %s threads; now %.0f%% of its CPU (%d threads) is %s",
				g.Name, g.Evidence.Class, 100*share/total, l.threads, top)})
		}
	}
	return out, nil
}

// catchAll reports whether g is a remainder group: everything, or
// everything but some prefixes.
func catchAll(g profiles.ThreadGroup) bool {
	m := g.Match
	if m.All {
		return true
	}
	return len(m.ExcludePrefix) > 0 && len(m.CommPrefix) == 0 && m.CommRegex == "" && len(m.PcommPrefix) == 0 &&
		len(m.CmdlinePrefix) == 0 && m.GroupLeader == nil && m.CgroupPrefix == ""
}

func matchString(m profiles.Match) string {
	var parts []string
	if len(m.CommPrefix) > 0 {
		parts = append(parts, "comm_prefix "+strings.Join(m.CommPrefix, ","))
	}
	if m.CommRegex != "" {
		parts = append(parts, "comm_regex "+m.CommRegex)
	}
	if len(m.PcommPrefix) > 0 {
		parts = append(parts, "pcomm_prefix "+strings.Join(m.PcommPrefix, ","))
	}
	if len(m.CmdlinePrefix) > 0 {
		parts = append(parts, "cmdline_prefix "+strings.Join(m.CmdlinePrefix, ","))
	}
	if m.CgroupPrefix != "" {
		parts = append(parts, "cgroup_prefix "+m.CgroupPrefix)
	}
	if len(parts) == 0 {
		return strings.Join(m.Kinds(), ",")
	}
	return strings.Join(parts, "; ")
}

func sortedKeys(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
