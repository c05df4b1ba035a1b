package synthesize

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/profiles"
)

// th describes one thread of a hand-made analysis.
type th struct {
	tid, tgid int32
	comm      string
	process   string // "" → the leader's comm
	family    string // "" → analyze.Family(comm)
	cluster   int
	share     float64
	p90us     int64 // 0 → 100
	kernel    bool
	wake      float64 // wakeups per second; 0 → 10
	wakeups   int64   // wakeups in the window
	// clients are its wakeups by processes outside the target, by name.
	clients map[string]int64
}

// mkAnalysis builds an analysis with the given clusters (id → class) and
// threads, with plausible features.
func mkAnalysis(classes map[int]analyze.Class, threads ...th) *analyze.Analysis {
	a := &analyze.Analysis{Schema: analyze.Schema}
	for _, t := range threads {
		a.Graph.Nodes = append(a.Graph.Nodes, analyze.GraphNode{ID: fmt.Sprintf("%s/%d", t.comm, t.tid), Kind: analyze.NodeThread, Tid: t.tid})
	}
	a.Trace = analyze.TraceMeta{Path: "test.pftrace", Format: "perfetto", WindowNs: 1e9, CPUsSeen: 1}
	leader := map[int32]string{}
	for _, t := range threads {
		if t.tid == t.tgid {
			leader[t.tgid] = t.comm
		}
	}
	members := map[int][]int32{}
	for _, t := range threads {
		p90 := t.p90us
		if p90 == 0 {
			p90 = 100
		}
		fam := t.family
		if fam == "" {
			fam = analyze.Family(t.comm)
		}
		proc := t.process
		if proc == "" {
			proc = leader[t.tgid]
		}
		wake := t.wake
		if wake == 0 {
			wake = 10
		}
		var clients []analyze.Peer
		for _, name := range slices.Sorted(maps.Keys(t.clients)) {
			clients = append(clients, analyze.Peer{Node: "process " + name, Count: t.clients[name]})
		}
		a.Threads = append(a.Threads, analyze.Thread{
			Tid: t.tid, Tgid: t.tgid, Comm: t.comm, Process: proc, Family: fam, Cluster: t.cluster,
			Class: classes[t.cluster], Kernel: t.kernel, ProcessWakers: clients,
			Features: analyze.Features{
				CPUShare:    t.share,
				Run:         analyze.Dist{N: 100, P50: p90 * 500, P90: p90 * 1000, P99: p90 * 2000},
				WakeRate:    wake,
				Wakeups:     t.wakeups,
				WakeLatency: analyze.Dist{N: 50, P99: 40_000},
				CPUs:        []int{0},
			},
		})
		members[t.cluster] = append(members[t.cluster], t.tid)
	}
	for id := 1; id <= len(classes)+10; id++ {
		c, ok := classes[id]
		if !ok {
			continue
		}
		a.Clusters = append(a.Clusters, analyze.Cluster{ID: id, Class: c, Confidence: 0.8, Members: members[id]})
	}
	return a
}

// shapeP parses a shape key for a test.
func shapeP(t testing.TB, key string) *profiles.Shape {
	t.Helper()
	s, err := profiles.ParseShape(key)
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

// summary renders a profile's groups one per line, for comparing with
// what a test expects.
func summary(p *profiles.Profile) []string {
	var out []string
	for _, g := range p.ThreadGroups {
		s := fmt.Sprintf("%s %s", g.Name, g.Treatment)
		if g.ExclusiveCores > 0 {
			s += fmt.Sprintf(" cores=%d fraction=%v", g.ExclusiveCores, g.CPUFraction)
		}
		s += " " + matchString(g.Match)
		out = append(out, s)
	}
	return out
}

func matchString(m profiles.Match) string {
	var parts []string
	add := func(k string, v []string) {
		if len(v) > 0 {
			parts = append(parts, k+"="+strings.Join(v, ","))
		}
	}
	add("comm", m.CommPrefix)
	add("exclude", m.ExcludePrefix)
	add("pcomm", m.PcommPrefix)
	if m.GroupLeader != nil {
		parts = append(parts, fmt.Sprintf("leader=%v", *m.GroupLeader))
	}
	if m.All {
		parts = append(parts, "all")
	}
	return strings.Join(parts, " ")
}

// landings runs the analysis' user threads through the profile the way the
// backends do and counts them per group, independently of Profile's own
// self-check.
func landings(t testing.TB, a *analyze.Analysis, p *profiles.Profile) []int {
	t.Helper()
	c, err := profiles.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	n := make([]int, len(p.ThreadGroups))
	for _, th := range a.Threads {
		if th.Kernel {
			continue
		}
		g := c.Group(profiles.Thread{Tid: int(th.Tid), Tgid: int(th.Tgid), Comm: kernelComm(th.Comm), Pcomm: kernelComm(th.Process), Cmdline: th.Cmdline})
		if g < 0 {
			t.Fatalf("thread %d %q lands in no group", th.Tid, th.Comm)
		}
		n[g]++
	}
	return n
}

// checkProfile checks what must hold for every synthesized profile: every
// user thread lands in a group and the groups' evidence counts exactly the
// threads that land there; lint reports no error for the shipped backends;
// the TOML is deterministic and parses back to the same profile.
func checkProfile(t testing.TB, a *analyze.Analysis, r *Result) {
	t.Helper()
	p := r.Profile
	n := landings(t, a, p)
	for i, g := range p.ThreadGroups {
		if g.Evidence == nil || g.Evidence.Threads != n[i] {
			t.Fatalf("group %q: evidence says %v threads, %d land there", g.Name, g.Evidence, n[i])
		}
	}
	if last := p.ThreadGroups[len(p.ThreadGroups)-1]; !last.Match.All {
		t.Fatalf("last group %q is not the catch-all", last.Name)
	}
	for _, f := range profiles.Lint(p, profiles.LintOptions{}) {
		if f.Severity == profiles.Error {
			t.Fatalf("lint: %s", f)
		}
	}
	data, err := r.TOML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := profiles.Parse("synthesized.toml", data)
	if err != nil {
		t.Fatalf("the TOML does not parse back: %v\n%s", err, data)
	}
	again, err := profiles.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := profiles.Marshal(p)
	if string(again) != string(body) {
		t.Fatalf("Parse(Marshal(p)) differs from p:\n%s\n---\n%s", body, again)
	}
}

// wakes adds a wake edge between two threads of a, by tid.
func wakes(a *analyze.Analysis, from, to int32, count int64) *analyze.Analysis {
	id := func(tid int32) string {
		for _, n := range a.Graph.Nodes {
			if n.Tid == tid {
				return n.ID
			}
		}
		panic(fmt.Sprintf("no thread %d", tid))
	}
	a.Graph.Edges = append(a.Graph.Edges, analyze.GraphEdge{From: id(from), To: id(to), Count: count})
	return a
}
