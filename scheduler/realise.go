package scheduler

import (
	"encoding/json"
	"slices"
	"strings"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
)

// Realiser is a backend that can say, without applying anything, what a
// profile does to each thread group on a machine. Refine skips a candidate
// whose realisation equals its incumbent's (the kernel would see no
// difference), lint and apply's output report what is and is not applied.
// Both shipped backends implement it; it is apart from Backend so that
// test fakes need not.
type Realiser interface {
	// Realise returns what p does to the kernel on topology t through this
	// backend. It errors where Apply would refuse the plan for the profile's
	// own sake (exclusive cores that do not fit, an RT priority the kernel
	// would run unbounded); it does not look at any thread.
	Realise(p *profiles.Profile, t *machine.Topology) (Realised, error)
}

// Setting is one thing a backend sets: a knob as the backend names it
// ("policy", "nice", "slice", "cpus", or a sched_ext layer's field) and its
// value in a canonical spelling.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func (s Setting) String() string { return s.Name + "=" + s.Value }

// RealisedGroup is what one thread group's threads get.
type RealisedGroup struct {
	Name  string
	Match profiles.Match
	// Settings are what the backend sets on the group's threads, in the
	// backend's order; a knob not listed is left as each thread has it.
	// None at all: the group's threads are left alone (the group still
	// claims its threads ahead of later groups).
	Settings []Setting
	// Notes say, one line each, what the profile asks of the group that
	// the backend does not do, or does otherwise than asked.
	Notes []string
}

// Realised is what a profile does to the kernel on one backend and machine:
// every thread group's settings in profile order (first match wins, so
// order matters) and the settings that hold for the whole plan.
type Realised struct {
	Backend string
	// Settings hold for the whole plan (sched_ext: the order in which
	// shared CPUs serve the layers, the default layer; CFS: where other
	// cgroups lose exclusive CPUs).
	Settings []Setting
	Groups   []RealisedGroup
}

// Key is the realisation's identity: two profiles whose realisations have
// equal keys put the kernel in the same state for the same threads. It
// holds the backend, the plan's settings and each group's matchers and
// settings in order; group names and notes are left out (they change
// nothing in the kernel). A realisation that sets nothing is UnchangedKey.
func (r Realised) Key() string {
	if !r.Changes() {
		return UnchangedKey
	}
	var b strings.Builder
	b.WriteString("backend=" + r.Backend + "\n")
	writeSettings(&b, "plan", r.Settings)
	for _, g := range r.Groups {
		writeSettings(&b, "group "+matchKey(g.Match), g.Settings)
	}
	return b.String()
}

// UnchangedKey is the key of every realisation that sets nothing (Changes
// is false): whatever its groups' matchers, the kernel is left as it was,
// so all such profiles, and no profile at all, are one state.
const UnchangedKey = "unchanged: nothing set"

// Changes says whether the realisation sets anything: a plan setting or a
// group's.
func (r Realised) Changes() bool {
	if len(r.Settings) > 0 {
		return true
	}
	for _, g := range r.Groups {
		if len(g.Settings) > 0 {
			return true
		}
	}
	return false
}

// matchKey spells a group's matchers canonically: the kinds it uses in
// schema order, each list sorted (its entries are alternatives).
func matchKey(m profiles.Match) string {
	var parts []string
	add := func(kind string, v any) {
		b, _ := json.Marshal(v) // strings, bools and string slices: cannot fail
		parts = append(parts, kind+"="+string(b))
	}
	list := func(kind string, l []string) {
		if len(l) > 0 {
			add(kind, slices.Sorted(slices.Values(l)))
		}
	}
	list(profiles.KindCommPrefix, m.CommPrefix)
	if m.CommRegex != "" {
		add(profiles.KindCommRegex, m.CommRegex)
	}
	list(profiles.KindExcludePrefix, m.ExcludePrefix)
	list(profiles.KindPcommPrefix, m.PcommPrefix)
	list(profiles.KindCmdlinePrefix, m.CmdlinePrefix)
	if m.GroupLeader != nil {
		add(profiles.KindGroupLeader, *m.GroupLeader)
	}
	if m.CgroupPrefix != "" {
		add(profiles.KindCgroupPrefix, m.CgroupPrefix)
	}
	if m.All {
		add(profiles.KindAll, true)
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func writeSettings(b *strings.Builder, head string, s []Setting) {
	b.WriteString(head + ":")
	for _, x := range s {
		b.WriteString(" " + x.String())
	}
	b.WriteString("\n")
}

// Group returns the realisation of the group named name, and whether there
// is one.
func (r Realised) Group(name string) (RealisedGroup, bool) {
	for _, g := range r.Groups {
		if g.Name == name {
			return g, true
		}
	}
	return RealisedGroup{}, false
}

// Summary says in one line what the group's threads get, e.g.
// "policy=SCHED_BATCH slice=100µs", or "nothing (left as they are)".
func (g RealisedGroup) Summary() string {
	if len(g.Settings) == 0 {
		return "nothing (left as they are)"
	}
	parts := make([]string, len(g.Settings))
	for i, s := range g.Settings {
		parts[i] = s.String()
	}
	return strings.Join(parts, " ")
}
