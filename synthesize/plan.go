package synthesize

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/profiles"
)

// Slots are the candidate thread groups, one per cluster class, in class
// order. A slot becomes a thread group when at least one thread ends up in
// it; the rest slot always does (it is the catch-all).
const (
	slotCompute = iota // sync_compute
	slotLatency        // latency_critical
	slotChain          // io_wake_chain
	slotRest           // sporadic, and every thread no other group can match
	nSlots
)

// slotNames are the thread group names. They name the class, not the
// threads, so that a group keeps its name when a workload's thread names
// change between versions (refine addresses groups by name).
var slotNames = [nSlots]string{"compute", "latency-critical", "io-chain", "rest"}

// slotClasses are the cluster classes each slot takes.
var slotClasses = [nSlots]analyze.Class{analyze.ClassSyncCompute, analyze.ClassLatencyCritical, analyze.ClassIOWakeChain, analyze.ClassSporadic}

func slotOf(class analyze.Class) int {
	for s, c := range slotClasses {
		if c == class {
			return s
		}
	}
	return slotRest
}

// maxComm is the longest comm the kernel keeps (TASK_COMM_LEN 16 with the
// terminating NUL): matchers see at most these bytes of a name.
const maxComm = 15

// member is one analysed user thread.
type member struct {
	th      *analyze.Thread
	cluster *analyze.Cluster
	// seen is the thread as a scheduler's matcher sees it: comm and the
	// process's comm cut to the kernel's 15 bytes.
	seen    profiles.Thread
	family  int  // index into plan.families
	unit    int  // index into plan.units
	desired int  // the slot of its cluster's class
	hot     bool // cpu_share ≥ HotShare
	// prefix is the comm prefix that names the thread in a matcher; "" when
	// its comm has no printable prefix (then it can only be in rest).
	prefix string
	// pcomm is the printable part of its process's comm; "" when none.
	pcomm string
}

// family is the threads of one thread family (analyze's normalised name).
type family struct {
	name    string
	members []int
}

// unit is the threads no matcher the analysis gives data for can tell
// apart: one family, all group leaders or none, one process comm, one
// command line.
type unit struct {
	family  int
	members []int
}

type unitKey struct {
	family  int
	leader  bool
	pcomm   string
	cmdline string
}

// plan is the assignment of threads to slots while matchers are worked out.
// Units that no matcher can tell apart are joined in a union-find; a merged
// set's threads all go to one slot, its target.
type plan struct {
	members  []member
	families []family
	units    []unit
	parent   []int  // union-find over units
	merged   []bool // by root
	target   []int  // by root: the slot of a merged set
}

// newPlan collects the analysed user threads (kernel threads cannot be in a
// pod) with the slot of their cluster's class, grouped by family.
func newPlan(a *analyze.Analysis, clusters map[int]*analyze.Cluster) *plan {
	p := &plan{}
	byName := map[string]int{}
	byUnit := map[unitKey]int{}
	for i := range a.Threads {
		t := &a.Threads[i]
		if t.Kernel {
			continue
		}
		name := t.Family
		if name == "" {
			name = analyze.Family(t.Comm)
		}
		f, ok := byName[name]
		if !ok {
			f = len(p.families)
			byName[name] = f
			p.families = append(p.families, family{name: name})
		}
		c := clusters[t.Cluster]
		m := member{
			th:      t,
			cluster: c,
			seen:    MatcherView(*t),
			family:  f,
			desired: slotOf(c.Class),
			hot:     t.Features.CPUShare >= HotShare,
		}
		m.pcomm = printablePrefix(m.seen.Pcomm, maxComm)
		k := unitKey{family: f, leader: m.seen.Leader(), pcomm: m.seen.Pcomm, cmdline: m.seen.Cmdline}
		u, ok := byUnit[k]
		if !ok {
			u = len(p.units)
			byUnit[k] = u
			p.units = append(p.units, unit{family: f})
		}
		m.unit = u
		p.families[f].members = append(p.families[f].members, len(p.members))
		p.units[u].members = append(p.units[u].members, len(p.members))
		p.members = append(p.members, m)
	}
	for f := range p.families {
		p.namePrefixes(f)
	}
	p.parent = make([]int, len(p.units))
	p.merged = make([]bool, len(p.units))
	p.target = make([]int, len(p.units))
	for u := range p.parent {
		p.parent[u] = u
	}
	return p
}

// namePrefixes gives a family's threads their comm prefix: the family name
// when it is a prefix of every thread's comm (cut to 15 bytes, at a
// character boundary: a family name longer than the kernel's comm is still
// a correct prefix of what the kernel keeps); else the threads' longest
// common prefix; else each thread's own comm. Threads whose comm has no
// printable prefix get none.
func (p *plan) namePrefixes(f int) {
	fam := &p.families[f]
	var comms []string
	for _, i := range fam.members {
		if printablePrefix(p.members[i].seen.Comm, maxComm) != "" {
			comms = append(comms, p.members[i].seen.Comm)
		}
	}
	shared := printablePrefix(fam.name, maxComm)
	for _, c := range comms {
		if !strings.HasPrefix(c, shared) {
			shared = ""
			break
		}
	}
	if shared == "" && len(comms) > 0 {
		shared = printablePrefix(commonPrefix(comms), maxComm)
	}
	for _, i := range fam.members {
		m := &p.members[i]
		switch {
		case printablePrefix(m.seen.Comm, maxComm) == "":
			m.prefix = ""
		case shared != "":
			m.prefix = shared
		default:
			m.prefix = printablePrefix(m.seen.Comm, maxComm)
		}
	}
}

func (p *plan) find(u int) int {
	for p.parent[u] != u {
		p.parent[u] = p.parent[p.parent[u]]
		u = p.parent[u]
	}
	return u
}

// slot is where member i is now.
func (p *plan) slot(i int) int {
	m := &p.members[i]
	if m.prefix == "" {
		return slotRest
	}
	if r := p.find(m.unit); p.merged[r] {
		return p.target[r]
	}
	return m.desired
}

// merge joins the sets of units a and b (the same set: merges it) and
// sends all their threads to the slot most of their CPU time wanted: the
// slot whose threads used the most CPU, then the one with the most threads,
// then the more favoured one.
func (p *plan) merge(a, b int) {
	ra, rb := p.find(a), p.find(b)
	if ra != rb {
		if rb < ra {
			ra, rb = rb, ra
		}
		p.parent[rb] = ra
	}
	var cpu [nSlots]float64
	var n [nSlots]int
	for u := range p.units {
		if p.find(u) != ra {
			continue
		}
		for _, i := range p.units[u].members {
			m := &p.members[i]
			if m.prefix == "" {
				continue
			}
			cpu[m.desired] += m.th.Features.CPUShare
			n[m.desired]++
		}
	}
	best := slotRest
	for s := range nSlots {
		if n[s] == 0 {
			continue
		}
		if n[best] == 0 || cpu[s] > cpu[best] || cpu[s] == cpu[best] && (n[s] > n[best] || n[s] == n[best] && s < best) {
			best = s
		}
	}
	p.merged[ra] = true
	p.target[ra] = best
}

// kernelComm is a name as the kernel keeps it: at most 15 bytes, cut
// without regard for characters, as the kernel cuts.
func kernelComm(s string) string {
	if len(s) > maxComm {
		return s[:maxComm]
	}
	return s
}

// printablePrefix is the longest prefix of s of at most limit bytes made of
// whole, printable UTF-8 characters. Matchers only use such prefixes: they
// are valid TOML and JSON strings and read the same in every editor.
func printablePrefix(s string, limit int) string {
	n := 0
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		if r == utf8.RuneError && size <= 1 || !unicode.IsPrint(r) || n+size > limit {
			break
		}
		n += size
	}
	return s[:n]
}

// commonPrefix is the longest common byte prefix of ss.
func commonPrefix(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	pre := ss[0]
	for _, s := range ss[1:] {
		n := 0
		for n < len(pre) && n < len(s) && pre[n] == s[n] {
			n++
		}
		pre = pre[:n]
	}
	return pre
}

// display renders a name from the trace for a profile's description and
// evidence: as it is when it is printable UTF-8, else Go-quoted with
// escapes, so that no control character or invalid byte reaches the file.
func display(s string) string {
	if s != "" && utf8.ValidString(s) && printablePrefix(s, len(s)) == s {
		return s
	}
	return strconv.Quote(s)
}
