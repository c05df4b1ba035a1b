package profiles

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
)

// maxComm is the longest comm the kernel keeps (TASK_COMM_LEN 16 with the
// terminating NUL): a longer prefix can never match.
const maxComm = 15

// maxLayers is scx_layered's layer limit; a profile exported there needs one
// layer per group plus one for the remainder when it has no catch-all.
const maxLayers = 16

// match checks one group's matchers on their own.
func (l *linter) match(i int) {
	m := &l.p.ThreadGroups[i].Match
	kinds := m.Kinds()
	if len(kinds) == 0 {
		l.errorf(i, "match", "empty: a match with no matcher selects no thread; use all = true for a catch-all")
		return
	}
	for _, b := range l.backends {
		have, _ := MatcherKinds(b)
		for _, k := range kinds {
			if !slices.Contains(have, k) {
				f := Finding{Severity: Error, Group: i, GroupName: l.p.ThreadGroups[i].Name, Field: "match." + k, Backend: b,
					Message: fmt.Sprintf("the %s backend has no %s matcher (it has: %s)%s", b, k, strings.Join(have, ", "), kindAdvice(k))}
				l.fs = append(l.fs, f)
			}
		}
	}
	if m.CommRegex != "" {
		l.regex(i, m.CommRegex)
	}
	l.prefixes(i, "match.comm_prefix", m.CommPrefix, true)
	l.prefixes(i, "match.exclude_prefix", m.ExcludePrefix, true)
	l.prefixes(i, "match.pcomm_prefix", m.PcommPrefix, true)
	l.prefixes(i, "match.cmdline_prefix", m.CmdlinePrefix, false)
	for _, e := range m.ExcludePrefix {
		if e == "" {
			l.errorf(i, "match.exclude_prefix", `"" excludes every thread: the group matches nothing`)
		}
	}
	if m.All && len(kinds) > 1 {
		l.warnf(i, "match.all", "all = true next to other matchers adds nothing: matchers are ANDed, so the group takes only what %s select", strings.Join(kinds[:len(kinds)-1], ", "))
	}
	if len(m.CommPrefix) > 0 && len(m.ExcludePrefix) > 0 {
		dead := 0
		for _, p := range m.CommPrefix {
			if hasAnyPrefix(p, m.ExcludePrefix) {
				dead++
				l.warnf(i, "match.comm_prefix", "%q is excluded by the group's own exclude_prefix", p)
			}
		}
		if dead == len(m.CommPrefix) {
			l.errorf(i, "match", "matches nothing: every comm_prefix is excluded by exclude_prefix")
		}
	}
}

func kindAdvice(kind string) string {
	switch kind {
	case KindCommRegex:
		return "; express the group with comm_prefix and exclude_prefix"
	case KindCmdlinePrefix:
		return "; apply this profile with the sched_ext or cfs backend"
	}
	return ""
}

// regex checks that a comm_regex compiles under RE2 (Go's regexp, which the
// Classifier uses), calling out look-around, which RE2 does not have.
func (l *linter) regex(i int, expr string) {
	_, err := regexp.Compile(expr)
	if err == nil {
		return
	}
	for _, la := range []string{"(?=", "(?!", "(?<=", "(?<!"} {
		if strings.Contains(expr, la) {
			l.errorf(i, "match.comm_regex", "%q uses look-around %s; RE2 has no look-around (lookahead or lookbehind): express exclusions with exclude_prefix", expr, la)
			return
		}
	}
	var se *syntax.Error
	msg := err.Error()
	if e, ok := err.(*syntax.Error); ok {
		se = e
		msg = fmt.Sprintf("%s: `%s`", se.Code, se.Expr)
	}
	l.errorf(i, "match.comm_regex", "%q does not compile under RE2: %s", expr, msg)
}

// prefixes checks a prefix list; comm-like lists are bounded by the 15-byte
// comm.
func (l *linter) prefixes(i int, field string, list []string, comm bool) {
	for j, p := range list {
		switch {
		case p == "" && field != "match.exclude_prefix":
			l.warnf(i, field, `"" is a prefix of everything: the matcher selects every thread`)
		case comm && len(p) > maxComm:
			l.errorf(i, field, "%q is %d bytes; the kernel keeps at most %d bytes of a comm, so it can never match (use %q)", p, len(p), maxComm, p[:maxComm])
		}
		if slices.Contains(list[:j], p) {
			l.warnf(i, field, "%q is listed twice", p)
		}
	}
}

// reachability reports groups that first-match-wins makes dead: a group all
// of whose threads an earlier group already takes. It only reports what is
// provable from the matchers (see covers); a group that might still match
// something is left alone.
func (l *linter) reachability() {
	gs := l.p.ThreadGroups
	for j := range gs {
		if len(gs[j].Match.Kinds()) == 0 {
			continue
		}
		for i := range j {
			if len(gs[i].Match.Kinds()) == 0 || !covers(gs[i].Match, gs[j].Match) {
				continue
			}
			l.errorf(j, "match", "unreachable: every thread it matches is taken first by group %q (thread_groups[%d])%s", gs[i].Name, i, catchAllHint(gs[i].Match))
			break
		}
	}
	last := len(gs) - 1
	for i := range gs {
		if i != last && isCatchAll(gs[i].Match) {
			l.warnf(i, "match", "a catch-all that is not the last group: groups after it get nothing it matches; move it last")
		}
	}
}

func catchAllHint(m Match) string {
	if isCatchAll(m) {
		return "; a catch-all belongs last"
	}
	return ""
}

// isCatchAll reports a match meant as a remainder: all, or exclude_prefix
// with nothing else.
func isCatchAll(m Match) bool {
	k := m.Kinds()
	return len(k) == 1 && (m.All || len(m.ExcludePrefix) > 0)
}

// covers reports whether every thread b matches is provably matched by a:
// each of a's conditions is implied by b's. It is sound, not complete: when
// it cannot prove implication (regexes other than an identical one, say) it
// answers false.
func covers(a, b Match) bool {
	// Each matcher of a is a condition b must imply; all adds none.
	if len(a.CommPrefix) > 0 && !prefixesImply(b.CommPrefix, a.CommPrefix) {
		return false
	}
	if a.CommRegex != "" && a.CommRegex != b.CommRegex {
		return false
	}
	for _, e := range a.ExcludePrefix {
		if !excludes(b, e) {
			return false
		}
	}
	if len(a.PcommPrefix) > 0 && !prefixesImply(b.PcommPrefix, a.PcommPrefix) {
		return false
	}
	if len(a.CmdlinePrefix) > 0 && !prefixesImply(b.CmdlinePrefix, a.CmdlinePrefix) {
		return false
	}
	if a.GroupLeader != nil && (b.GroupLeader == nil || *b.GroupLeader != *a.GroupLeader) {
		return false
	}
	if a.CgroupPrefix != "" && !(b.CgroupPrefix != "" && strings.HasPrefix(b.CgroupPrefix, a.CgroupPrefix)) {
		return false
	}
	return true
}

// prefixesImply: a string starting with one of have starts with one of want.
func prefixesImply(have, want []string) bool {
	if len(have) == 0 {
		return false
	}
	for _, h := range have {
		if !hasAnyPrefix(h, want) {
			return false
		}
	}
	return true
}

// excludes reports whether no comm b matches starts with e: b excludes a
// prefix of e, or every comm prefix b requires is incompatible with e
// (neither is a prefix of the other).
func excludes(b Match, e string) bool {
	for _, x := range b.ExcludePrefix {
		if strings.HasPrefix(e, x) {
			return true
		}
	}
	if len(b.CommPrefix) == 0 {
		return false
	}
	for _, p := range b.CommPrefix {
		if strings.HasPrefix(p, e) || strings.HasPrefix(e, p) {
			return false
		}
	}
	return true
}

// layered checks scx_layered's own limits when exporting there.
func (l *linter) layered() {
	if l.opt.Backend != BackendSCXLayered {
		return
	}
	gs := l.p.ThreadGroups
	n := len(gs)
	if n == 0 || !isCatchAll(gs[n-1].Match) {
		n++ // the exporter adds a remainder layer
	}
	if n > maxLayers {
		l.errorf(-1, "thread_groups", "%d layers (groups plus the remainder) but scx_layered allows at most %d", n, maxLayers)
	}
}
