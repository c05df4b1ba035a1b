package profiles

import (
	"fmt"
	"regexp"
	"strings"
)

// Thread is what matchers look at: one thread as the scheduler backends (and
// synthesize's self-check) see it.
type Thread struct {
	Tid     int
	Tgid    int
	Comm    string // the thread's comm, ≤ 15 bytes
	Pcomm   string // the comm of its thread-group leader
	Cmdline string // the process's cmdline with NUL bytes as spaces, trimmed
	Cgroup  string // cgroup path relative to its hierarchy's root
}

// Leader reports whether t is its process's main thread.
func (t Thread) Leader() bool { return t.Tid == t.Tgid }

// Classifier assigns threads to a profile's thread groups, first match wins.
// Build one with Compile; it is safe for concurrent use.
type Classifier struct {
	groups []compiled
}

type compiled struct {
	m  Match
	re *regexp.Regexp
}

// Compile prepares p's matchers. It fails on a group whose comm_regex RE2
// rejects, naming the group.
func Compile(p *Profile) (*Classifier, error) {
	c := &Classifier{groups: make([]compiled, len(p.ThreadGroups))}
	for i, g := range p.ThreadGroups {
		c.groups[i].m = g.Match
		if g.Match.CommRegex != "" {
			re, err := regexp.Compile(g.Match.CommRegex)
			if err != nil {
				return nil, fmt.Errorf("thread_groups[%d] %q: match.comm_regex: %w", i, g.Name, err)
			}
			c.groups[i].re = re
		}
	}
	return c, nil
}

// Group returns the index of the first group matching t, or -1.
func (c *Classifier) Group(t Thread) int {
	for i := range c.groups {
		if c.groups[i].matches(t) {
			return i
		}
	}
	return -1
}

func (g *compiled) matches(t Thread) bool {
	m := &g.m
	if len(m.Kinds()) == 0 {
		return false
	}
	if len(m.CommPrefix) > 0 && !hasAnyPrefix(t.Comm, m.CommPrefix) {
		return false
	}
	if g.re != nil && !g.re.MatchString(t.Comm) {
		return false
	}
	if len(m.ExcludePrefix) > 0 && hasAnyPrefix(t.Comm, m.ExcludePrefix) {
		return false
	}
	if len(m.PcommPrefix) > 0 && !hasAnyPrefix(t.Pcomm, m.PcommPrefix) {
		return false
	}
	if len(m.CmdlinePrefix) > 0 && !hasAnyPrefix(t.Cmdline, m.CmdlinePrefix) {
		return false
	}
	if m.GroupLeader != nil && *m.GroupLeader != t.Leader() {
		return false
	}
	if m.CgroupPrefix != "" && !strings.HasPrefix(t.Cgroup, m.CgroupPrefix) {
		return false
	}
	return true
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
