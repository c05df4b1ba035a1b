package synthesize

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/observe/snapshot"
	"temper.codes/temper-train/profiles"
)

// Options say what to synthesize and from which side information.
type Options struct {
	// ID is the profile id: [a-z0-9-]+, a directory name and the value of
	// the temper.codes/workload-profile annotation.
	ID string
	// Source names the analysis in the header and description, as the user
	// gave it (a path).
	Source string
	// Snapshot is observe's snapshot.json, when there is one: the machine's
	// topology, the pod's requests and limits, the cgroup's quota.
	Snapshot *snapshot.Snapshot
	// SnapshotPath names the snapshot in messages and the header.
	SnapshotPath string
	// Shape is --shape; nil when not given. The snapshot's topology, when
	// there is a snapshot, takes precedence and must agree with it.
	Shape *profiles.Shape
	// RequestMillicores is --request; 0 to take it from the snapshot or the
	// observed use.
	RequestMillicores int
	// NodeBusyCPUs is the node-wide CPU use while the trace was taken, in
	// CPUs, when the caller measured it; 0 to take it from the snapshot's
	// node_cpu. Without either no group gets exclusive cores.
	NodeBusyCPUs float64
}

func (o Options) snapshotName() string {
	if o.SnapshotPath != "" {
		return o.SnapshotPath
	}
	return "snapshot"
}

// Result is a synthesized profile with what a reader of the file and the
// person running the command need to know about it.
type Result struct {
	Profile *profiles.Profile
	// Header is the file's opening comment, one line per entry: that it was
	// generated, from what, with which options, and the warnings.
	Header []string
	// Warnings are demotions, merged families and threads no matcher can
	// name; they are in the header and the description too.
	Warnings []string
	// Lint are the warnings profiles.Lint reported (it reported no errors,
	// or Profile would have failed).
	Lint []profiles.Finding
	// Portfolio is this profile and its alternatives, least risky first
	// (Conservative, Moderate, Aggressive), without duplicates: the
	// candidates a caller races. The one equal to this profile is Main and
	// its Result is this one. Nil in the alternatives themselves.
	Portfolio []Alternative
}

// idPattern is the profile id rule (profiles checks it too, in Lint).
var idPattern = regexp.MustCompile(`^[a-z0-9-]+$`)

// The options Profile's errors point at, so that a caller can say which of
// its own inputs to fix: the command names its flags, the library does not.
// Test with errors.Is.
var (
	// ErrID: Options.ID is missing or not lowercase letters, digits and '-'.
	ErrID = errors.New("profile id")
	// ErrShape: Options.Shape is unusable or contradicts the snapshot.
	ErrShape = errors.New("machine shape")
	// ErrNoShape: no shape at all: no snapshot, no Options.Shape, and no CPU
	// count in the trace.
	ErrNoShape = errors.New("no machine shape")
	// ErrRequest: the CPU request (Options.RequestMillicores, or the pod's)
	// is negative or above the CPU limit.
	ErrRequest = errors.New("CPU request")
)

// taggedError is err tagged with one of the package's sentinels: its
// message is err's alone, and errors.Is finds both the tag and what err
// wraps.
type taggedError struct {
	tag error // ErrID, ErrShape, ErrNoShape, ErrRequest or ErrNotAnalysis
	err error
}

func (e *taggedError) Error() string   { return e.err.Error() }
func (e *taggedError) Unwrap() []error { return []error{e.tag, e.err} }

// tagged formats an error (%w wraps as in fmt.Errorf) tagged with tag.
func tagged(tag error, format string, a ...any) error {
	return &taggedError{tag: tag, err: fmt.Errorf(format, a...)}
}

// Profile builds the workload profile for an analysis. It fails, with one
// line naming the problem, on an analysis it cannot build a profile from, a
// shape the trace contradicts or none at all, and — as a guard on itself —
// on a profile in which an analysed thread would not land in the group
// synthesized for it or that profiles.Lint rejects.
func Profile(a *analyze.Analysis, opt Options) (*Result, error) {
	if opt.ID == "" {
		return nil, tagged(ErrID, "no profile id: give one of lowercase letters, digits and '-' (e.g. my-service)")
	}
	if !idPattern.MatchString(opt.ID) {
		return nil, tagged(ErrID, "profile id %q: use lowercase letters, digits and '-' (e.g. my-service)", opt.ID)
	}
	clusters, err := checkAnalysis(a)
	if err != nil {
		return nil, err
	}
	shape, err := chooseShape(a, opt)
	if err != nil {
		return nil, err
	}
	p := newPlan(a, clusters)
	observed := 0.0
	for i := range p.members {
		observed += p.members[i].th.Features.CPUShare
	}
	req, err := chooseRequest(a, opt, observed)
	if err != nil {
		return nil, err
	}

	drafts, err := p.resolve()
	if err != nil {
		return nil, err
	}
	groups := p.groups(drafts)
	node := chooseNodeDemand(opt, shape)
	s := &sizer{shape: shape, request: req.milli, real: !req.inferred, cores: profiles.NewCoreBudget(shape.shape.CoreCount()), leftBP: 10_000,
		node: node, clients: loadGenerators(groups, p.members)}
	var warnings []string
	for _, c := range s.clients {
		warnings = append(warnings, c.String())
	}
	// Groups that may give way are decided last: whether they may depends
	// on which groups are favoured.
	for _, last := range []bool{false, true} {
		for _, g := range groups {
			if givesWay(g, p.members) != last {
				continue
			}
			s.treat(g, p.members, len(groups) == 1, groups, a)
			if g.warning != "" {
				warnings = append(warnings, g.warning)
			}
		}
	}
	warnings = append(warnings, p.notes(groups)...)
	// Matchers are disjoint on the analysed threads, so ordering by
	// treatment does not move any of them: exclusive groups first (in the
	// order their cores were handed out), then latency, normal, batch, and
	// the catch-all last.
	slices.SortStableFunc(groups[:len(groups)-1], func(x, y *group) int {
		return cmp.Compare(rank(x.treatment), rank(y.treatment))
	})

	prof := &profiles.Profile{
		SchemaVersion: profiles.SchemaVersion,
		ID:            opt.ID,
		Fingerprint:   fingerprintOf(opt.ID, p.members, opt.Snapshot),
		MachineShape:  shape.shape,
		Traits:        traitsOf(a, p.members, req),
	}
	for _, g := range groups {
		tg := profiles.ThreadGroup{
			Name: g.name, Match: g.match, Treatment: g.treatment,
			ExclusiveCores: g.cores, SliceUs: g.sliceUs, Weight: g.weight, Preempt: g.preempt,
			Evidence: evidenceOf(g, p.members, a.Trace.Path),
		}
		if g.fractionBP > 0 {
			tg.CPUFraction = float64(g.fractionBP) / 10000
		}
		prof.ThreadGroups = append(prof.ThreadGroups, tg)
	}
	prof.Description = description(a, opt, shape, groups, warnings)

	if err := selfCheck(prof, groups, p.members); err != nil {
		return nil, err
	}
	r := &Result{Profile: prof, Warnings: warnings}
	errs, advice := profiles.Split(profiles.Lint(prof, profiles.LintOptions{}))
	if len(errs) > 0 {
		return nil, fmt.Errorf("internal error: the synthesized profile fails lint: %s", errs[0])
	}
	r.Lint = advice
	r.Header = header(a, opt, shape, req, node, warnings)
	if r.Portfolio, err = portfolio(r, len(s.clients) > 0); err != nil {
		return nil, err
	}
	return r, nil
}

// rank orders treatments in a profile: most favoured first.
func rank(t profiles.Treatment) int {
	return slices.Index(profiles.Treatments(), t)
}

// groups turns the settled drafts into thread groups, with the catch-all
// last: `all = true`, which under first-match-wins is exactly "every thread
// no earlier group took" — the threads of the sporadic clusters, threads no
// matcher could name, and threads the trace never saw.
func (p *plan) groups(drafts []*draft) []*group {
	var out []*group
	for _, d := range drafts {
		out = append(out, &group{slot: d.slot, name: slotNames[d.slot], members: d.members, match: d.matcher()})
	}
	rest := &group{slot: slotRest, name: slotNames[slotRest], match: profiles.Match{All: true}}
	for i := range p.members {
		if p.slot(i) == slotRest {
			rest.members = append(rest.members, i)
		}
	}
	return append(out, rest)
}

// notes explains where threads are not in the group their class asked for:
// families merged because no matcher tells them apart, and threads whose
// comm gives no prefix to match.
func (p *plan) notes(groups []*group) []string {
	where := make([]string, len(p.members))
	for _, g := range groups {
		for _, i := range g.members {
			where[i] = g.name
		}
	}
	var out []string
	for r := range p.units {
		if p.find(r) != r || !p.merged[r] {
			continue
		}
		var names, wanted []string
		moved, noCmdline := false, false
		for u := range p.units {
			if p.find(u) != r {
				continue
			}
			for _, i := range p.units[u].members {
				noCmdline = noCmdline || p.members[i].seen.Cmdline == ""
			}
			if n := display(p.families[p.units[u].family].name); !slices.Contains(names, n) {
				names = append(names, n)
			}
			for _, i := range p.units[u].members {
				m := &p.members[i]
				if m.prefix == "" {
					continue
				}
				wanted = append(wanted, slotNames[m.desired])
				if slotNames[m.desired] != where[i] {
					moved = true
				}
			}
		}
		if !moved {
			continue
		}
		slices.Sort(wanted)
		slices.Sort(names)
		why := "comm prefix, leadership, process comm or command line"
		if noCmdline {
			why = "comm prefix, leadership or process comm (the analysis has no command lines for them: analyze with observe's snapshot)"
		}
		out = append(out, fmt.Sprintf("famil%s %s: threads that wanted groups %s cannot be told apart by %s: all are in group %s",
			map[bool]string{true: "ies", false: "y"}[len(names) > 1], strings.Join(names, ", "), strings.Join(slices.Compact(wanted), ", "), why, slotNames[p.target[r]]))
	}
	for i := range p.members {
		m := &p.members[i]
		if m.prefix == "" && m.desired != slotRest {
			out = append(out, fmt.Sprintf("thread %d (comm %s) wanted group %s but has no printable comm prefix a matcher could use: it is in rest",
				m.th.Tid, quote(m.th.Comm), slotNames[m.desired]))
		}
	}
	return out
}

// description says in a sentence or three what the profile is and where it
// came from, including what could not be done as the classes asked.
func description(a *analyze.Analysis, opt Options, shape shapeChoice, groups []*group, warnings []string) string {
	var parts []string
	for _, g := range groups {
		s := fmt.Sprintf("%s %s", g.name, g.treatment)
		if g.cores > 0 {
			s += fmt.Sprintf(" (%d core%s)", g.cores, plural(g.cores))
		}
		parts = append(parts, s)
	}
	src := opt.Source
	if src == "" {
		src = "an analysis"
	}
	d := fmt.Sprintf("Synthesized by temper-train from %s (trace %s; %d threads in %d clusters): %s.",
		display(src), display(a.Trace.Path), len(a.Threads), len(a.Clusters), strings.Join(parts, ", "))
	if shape.logicalOnly {
		d += fmt.Sprintf(" Machine shape from %s: logical CPUs only, cores and SMT unknown, so no group has exclusive cores.", shape.source)
	}
	for _, w := range warnings {
		d += " " + upperFirst(w) + "."
	}
	return d
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// header is the generated file's opening comment.
func header(a *analyze.Analysis, opt Options, shape shapeChoice, req requestChoice, node nodeDemand, warnings []string) []string {
	src := opt.Source
	if src == "" {
		src = "(an analysis in memory)"
	}
	flags := []string{"--id " + opt.ID}
	if opt.Snapshot != nil {
		flags = append(flags, "--snapshot "+display(opt.snapshotName()))
	}
	if opt.Shape != nil {
		flags = append(flags, "--shape "+opt.Shape.Key())
	}
	if opt.RequestMillicores > 0 {
		flags = append(flags, fmt.Sprintf("--request %dm", opt.RequestMillicores))
	}
	t := a.Trace
	h := []string{
		"Generated by temper-train synthesize; edit freely: regenerating overwrites this file and git shows the diff.",
		fmt.Sprintf("analysis: %s (schema %s)", display(src), analyze.Schema),
		fmt.Sprintf("trace: %s (%s, window %s s, %d events, %d lost)", display(t.Path), display(t.Format), trimFloat(float64(t.WindowNs)/1e9, 3), t.Events, t.LostEvents),
		"options: " + strings.Join(flags, " "),
		fmt.Sprintf("shape: %s from %s", shape.shape.Key(), shape.source),
		fmt.Sprintf("request: %dm from %s", req.milli, req.source),
	}
	if req.limit > 0 {
		h = append(h, fmt.Sprintf("limit: %dm from %s", req.limit, req.limitSource))
	}
	if node.known {
		h = append(h, fmt.Sprintf("node CPU use: %s CPUs, %s", trimFloat(node.busy, 3), node.source))
	} else {
		h = append(h, "node CPU use: "+node.source+"; so no group has exclusive cores")
	}
	if shape.logicalOnly {
		h = append(h, "shape has logical CPUs only: cores and SMT are unknown, so no group has exclusive cores")
	}
	for _, w := range warnings {
		h = append(h, "warning: "+w)
	}
	return h
}
