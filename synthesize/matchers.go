package synthesize

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"temper.codes/temper-train/profiles"
)

// draft is a thread group's matcher while it is worked out: the comm
// prefixes of its threads' families, and the conditions added to keep it
// off other groups' threads.
type draft struct {
	slot     int
	members  []int // indexes into plan.members
	prefixes []string
	exclude  []string
	leader   *bool
	pcomm    []string
	cmdline  []string
	match    func(profiles.Thread) bool
}

// matcher is the draft as a profile match: comm_prefix AND NOT
// exclude_prefix AND group_leader AND pcomm_prefix, each set only when
// needed.
func (d *draft) matcher() profiles.Match {
	return profiles.Match{CommPrefix: d.prefixes, ExcludePrefix: d.exclude, PcommPrefix: d.pcomm, GroupLeader: d.leader,
		CmdlinePrefix: d.cmdline}
}

// compile builds the draft's matcher with profiles.Compile, so that what is
// checked here is exactly what the scheduler backends will evaluate.
func (d *draft) compile() error {
	c, err := profiles.Compile(&profiles.Profile{ThreadGroups: []profiles.ThreadGroup{{Name: slotNames[d.slot], Match: d.matcher()}}})
	if err != nil {
		return fmt.Errorf("group %s: %w", slotNames[d.slot], err)
	}
	d.match = func(t profiles.Thread) bool { return c.Group(t) == 0 }
	return nil
}

// resolve works out disjoint matchers: every analysed thread is matched by
// the group it is in and by no other group, so that group order does not
// change where any observed thread lands and the groups can be ordered by
// treatment. When a group's prefixes also catch another group's thread, in
// order of preference:
//
//  1. the group excludes that thread's prefix (exclude_prefix), when none of
//     its own threads starts with it ("wl" next to "wl-worker");
//  2. the group takes only group leaders or only other threads
//     (group_leader), when all its threads are one and the caught thread is
//     the other (a server whose main thread and workers share one name);
//  3. the group takes only its threads' processes (pcomm_prefix), when the
//     caught thread's process has another name;
//  4. the group takes only processes whose command line starts with the
//     shortest word-boundary prefix of its threads' common command line that
//     no other group's thread has (cmdline_prefix): the process titles that
//     tell PostgreSQL's backends ("postgres: app appdb ...") from its
//     walwriter and checkpointer. Only with command lines (observe's
//     snapshot); scx_layered cannot export it;
//  5. otherwise the two threads' units — threads of one family that are all
//     group leaders or all not, in processes of one comm and command line —
//     cannot be told apart by any matcher the analysis gives data for and
//     are merged into the group most of their CPU time wanted; the
//     description says so.
//
// Merging changes membership, so matchers are worked out again from the
// start; every merge joins two units or settles one, so this ends.
func (p *plan) resolve() ([]*draft, error) {
	for round := 0; round <= 2*len(p.units)+1; round++ {
		drafts := p.drafts()
		merged, err := p.separate(drafts)
		if err != nil {
			return nil, err
		}
		if !merged {
			return drafts, nil
		}
	}
	return nil, fmt.Errorf("internal error: thread groups did not settle after %d merges", 2*len(p.units)+1)
}

// drafts starts a draft for every explicit slot that has threads, with the
// prefixes of its threads.
func (p *plan) drafts() []*draft {
	var out []*draft
	for s := range slotRest {
		d := &draft{slot: s}
		for i := range p.members {
			if p.slot(i) == s {
				d.members = append(d.members, i)
				d.prefixes = append(d.prefixes, p.members[i].prefix)
			}
		}
		if len(d.members) > 0 {
			d.prefixes = minimalPrefixes(d.prefixes)
			out = append(out, d)
		}
	}
	return out
}

// separate adds conditions until no draft matches another group's thread.
// It reports true when it had to merge families instead (the drafts are
// then stale).
func (p *plan) separate(drafts []*draft) (bool, error) {
	for _, d := range drafts {
		for {
			if err := d.compile(); err != nil {
				return false, err
			}
			v := p.victim(d)
			if v < 0 {
				break
			}
			if p.excludeVictim(d, v) || p.splitByLeader(d, v) || p.splitByProcess(d, v) || p.splitByCmdline(d) {
				continue
			}
			return true, p.mergeVictim(d, v)
		}
	}
	return false, nil
}

// victim is the first thread d matches that is not d's, or -1.
func (p *plan) victim(d *draft) int {
	for i := range p.members {
		if p.slot(i) != d.slot && d.match(p.members[i].seen) {
			return i
		}
	}
	return -1
}

// excludeVictim adds the victim's prefix to d's exclude_prefix when none of
// d's own threads starts with it.
func (p *plan) excludeVictim(d *draft, v int) bool {
	e := p.members[v].prefix
	if e == "" || slices.Contains(d.exclude, e) {
		return false
	}
	for _, i := range d.members {
		if strings.HasPrefix(p.members[i].seen.Comm, e) {
			return false
		}
	}
	d.exclude = minimalPrefixes(append(d.exclude, e))
	return true
}

// splitByLeader restricts d to group leaders (or to non-leaders) when all
// of d's threads are that and the victim is not.
func (p *plan) splitByLeader(d *draft, v int) bool {
	if d.leader != nil {
		return false
	}
	lead := p.members[d.members[0]].seen.Leader()
	for _, i := range d.members {
		if p.members[i].seen.Leader() != lead {
			return false
		}
	}
	if p.members[v].seen.Leader() == lead {
		return false
	}
	d.leader = &lead
	return true
}

// splitByProcess restricts d to the process comms of its threads when the
// victim's process comm starts with none of them.
func (p *plan) splitByProcess(d *draft, v int) bool {
	if d.pcomm != nil {
		return false
	}
	var list []string
	for _, i := range d.members {
		pc := p.members[i].pcomm
		if pc == "" {
			return false
		}
		list = append(list, pc)
	}
	list = minimalPrefixes(list)
	for _, pc := range list {
		if strings.HasPrefix(p.members[v].seen.Pcomm, pc) {
			return false
		}
	}
	d.pcomm = list
	return true
}

// splitByCmdline restricts d to a command-line prefix its threads share and
// no other group's thread has: the shortest such prefix that ends at a word
// boundary of their common prefix, so that a title's changing tail (a
// backend's "idle" or "COMMIT") is left out. It needs every thread's command
// line.
func (p *plan) splitByCmdline(d *draft) bool {
	if d.cmdline != nil {
		return false
	}
	common := ""
	for n, i := range d.members {
		c := p.members[i].seen.Cmdline
		if c == "" {
			return false
		}
		if n == 0 {
			common = c
			continue
		}
		common = common[:commonPrefixLen(common, c)]
	}
	var cands []string
	for i := 1; i < len(common); i++ {
		if common[i] == ' ' && common[i-1] != ' ' {
			cands = append(cands, common[:i])
		}
	}
	cands = append(cands, strings.TrimRight(common, " "))
	for _, c := range cands {
		if c == "" || !utf8.ValidString(c) {
			continue
		}
		if !p.catchesOther(d, c) {
			d.cmdline = []string{c}
			return true
		}
	}
	return false
}

// catchesOther reports whether a thread of another group, one d's other
// conditions already let through, has a command line starting with prefix.
func (p *plan) catchesOther(d *draft, prefix string) bool {
	for i := range p.members {
		m := &p.members[i]
		if p.slot(i) != d.slot && d.match(m.seen) && strings.HasPrefix(m.seen.Cmdline, prefix) {
			return true
		}
	}
	return false
}

// commonPrefixLen is the length in bytes of a and b's common prefix, cut
// back to a UTF-8 character boundary.
func commonPrefixLen(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && n < len(a) && !utf8.RuneStart(a[n]) {
		n--
	}
	return n
}

// mergeVictim merges the victim's unit with the unit of d's thread whose
// prefix caught it.
func (p *plan) mergeVictim(d *draft, v int) error {
	vm := &p.members[v]
	for _, i := range d.members {
		c := &p.members[i]
		if !strings.HasPrefix(vm.seen.Comm, c.prefix) {
			continue
		}
		if r := p.find(c.unit); r == p.find(vm.unit) && p.merged[r] {
			break // merged already, yet split: cannot happen
		}
		p.merge(c.unit, vm.unit)
		return nil
	}
	return fmt.Errorf("internal error: group %s catches thread %d (%s) and no merge separates them", slotNames[d.slot], vm.th.Tid, quote(vm.th.Comm))
}

// minimalPrefixes sorts a prefix list and drops duplicates and entries that
// a shorter entry already covers ("wl" makes "wl-worker" redundant).
func minimalPrefixes(list []string) []string {
	list = slices.Clone(list)
	slices.Sort(list)
	list = slices.Compact(list)
	out := list[:0]
	for _, s := range list {
		covered := false
		for _, q := range out {
			if strings.HasPrefix(s, q) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, s)
		}
	}
	return out
}
