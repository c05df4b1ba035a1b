package cfs_test

import (
	"strings"
	"testing"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/cfs"
)

// twoCores is the 2-core machine (no SMT) the test profiles were
// synthesized for.
func twoCores() *machine.Topology {
	return &machine.Topology{OnlineList: "0-1", Online: []int{0, 1},
		CPUs:  []machine.CPU{{ID: 0, Siblings: []int{0}, Core: 0}, {ID: 1, Siblings: []int{1}, Core: 1}},
		Cores: []machine.Core{{CPUs: []int{0}}, {CPUs: []int{1}, CoreID: 1}}}
}

func load(t *testing.T, path string) *profiles.Profile {
	t.Helper()
	p, err := profiles.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func realise(t *testing.T, p *profiles.Profile, slice bool) scheduler.Realised {
	t.Helper()
	r, err := cfs.RealiseOn(p, twoCores(), slice)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// neighbours are refine's one-step candidates of p, by step.
func neighbours(t *testing.T, p *profiles.Profile) map[string]*profiles.Profile {
	t.Helper()
	ok, rejected, err := refine.Candidates(p, func(q *profiles.Profile) []profiles.Finding {
		return profiles.Lint(q, profiles.LintOptions{Backend: profiles.BackendCFS})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rejected) > 0 {
		t.Errorf("lint rejected %d neighbours: %+v", len(rejected), rejected)
	}
	out := map[string]*profiles.Profile{}
	for _, a := range ok {
		out[a.Step.String()] = a.Profile
	}
	return out
}

// TestRealiseNeighbours lists, for a synthesized Redis profile and the
// demo workload's, each one-step neighbour refine generates and whether it
// leaves the kernel as the incumbent does on CFS — with a kernel that takes
// a fair thread's slice (6.12+) and without. Under the mapping before
// slices were applied, 9 of Redis's 13 neighbours changed nothing.
func TestRealiseNeighbours(t *testing.T) {
	type row struct {
		step            string
		equal, equalOld bool // equal realisation on a 6.12+ kernel; on an older one
	}
	cases := []struct {
		file string
		rows []row
	}{
		{"testdata/redis.toml", []row{
			{`group "latency-critical": treatment exclusive → normal`, false, false},
			{`group "latency-critical": treatment exclusive → latency`, false, false},
			{`group "rest": treatment yield → normal`, false, false},
			{`group "rest": treatment yield → batch`, false, false},
			{`group "latency-critical": preempt false → true`, true, true},
			{`group "latency-critical": weight 100 → 50`, true, true}, // weight on an exclusive group
			{`group "latency-critical": weight 100 → 200`, true, true},
			{`group "rest": weight 10 → 5`, true, true}, // weight on a yield group
			{`group "rest": weight 10 → 20`, true, true},
			{`group "latency-critical": slice_us 250 → 125`, false, true},
			{`group "latency-critical": slice_us 250 → 500`, false, true},
			{`group "rest": slice_us 800 → 400`, true, true}, // SCHED_IDLE takes no slice
			{`group "rest": slice_us 800 → 1600`, true, true},
		}},
		{"testdata/demo.toml", []row{
			{`group "compute": treatment latency → normal`, false, false},
			{`group "compute": treatment latency → exclusive`, false, false},
			{`group "latency-critical": treatment latency → normal`, false, false},
			{`group "latency-critical": treatment latency → exclusive`, false, false},
			{`group "io-chain": treatment latency → normal`, false, false},
			{`group "io-chain": treatment latency → exclusive`, false, false},
			{`group "rest": treatment yield → normal`, false, false},
			{`group "rest": treatment yield → batch`, false, false},
			{`group "compute": preempt true → false`, true, true},
			{`group "latency-critical": preempt true → false`, true, true},
			{`group "io-chain": preempt true → false`, true, true},
			{`group "compute": weight 200 → 100`, false, false},
			{`group "compute": weight 200 → 400`, false, false},
			{`group "latency-critical": weight 200 → 100`, false, false},
			{`group "latency-critical": weight 200 → 400`, false, false},
			{`group "io-chain": weight 200 → 100`, false, false},
			{`group "io-chain": weight 200 → 400`, false, false},
			{`group "rest": weight 10 → 5`, true, true},
			{`group "rest": weight 10 → 20`, true, true},
			{`group "compute": slice_us 1800 → 900`, false, true},
			{`group "compute": slice_us 1800 → 3600`, false, true},
			{`group "latency-critical": slice_us 250 → 125`, false, true},
			{`group "latency-critical": slice_us 250 → 500`, false, true},
			{`group "io-chain": slice_us 250 → 125`, false, true},
			{`group "io-chain": slice_us 250 → 500`, false, true},
			{`group "rest": slice_us 250 → 125`, true, true},
			{`group "rest": slice_us 250 → 500`, true, true},
			{`group "latency-critical": family wl-acceptor moved out`, false, false},
			{`group "latency-critical": family wl-worker moved out`, false, false},
			{`group "io-chain": family wl-logger moved out`, false, false},
			{`group "io-chain": family wl-syncer moved out`, false, false},
		}},
	}
	for _, c := range cases {
		p := load(t, c.file)
		got := neighbours(t, p)
		if len(got) != len(c.rows) {
			t.Errorf("%s: %d neighbours, the table lists %d", c.file, len(got), len(c.rows))
		}
		counts := [2]int{}
		for _, r := range c.rows {
			q, ok := got[r.step]
			if !ok {
				t.Errorf("%s: refine generates no neighbour %s", c.file, r.step)
				continue
			}
			for i, slice := range []bool{true, false} {
				want := []bool{r.equal, r.equalOld}[i]
				inc, cand := realise(t, p, slice), realise(t, q, slice)
				if eq := inc.Key() == cand.Key(); eq != want {
					t.Errorf("%s: %s (kernel takes slices: %t): equal realisation %t, want %t\nincumbent:\n%s\ncandidate:\n%s", c.file, r.step, slice, eq, want, inc.Key(), cand.Key())
				}
				if want {
					counts[i]++
				}
			}
		}
		t.Logf("%s: %d neighbours; %d realise as the incumbent on a 6.12+ kernel, %d on an older one", c.file, len(c.rows), counts[0], counts[1])
	}
}

// TestRealiseEquivalences: states the kernel cannot tell apart have one
// key; states it can, or different groupings, have different keys.
func TestRealiseEquivalences(t *testing.T) {
	redis := load(t, "testdata/redis.toml")
	edit := func(f func(p *profiles.Profile)) *profiles.Profile {
		q := load(t, "testdata/redis.toml")
		f(q)
		return q
	}
	toLatency := edit(func(p *profiles.Profile) { p.ThreadGroups[0].Treatment = profiles.Latency }) // weight 100: nice 0
	toNormal := edit(func(p *profiles.Profile) { p.ThreadGroups[0].Treatment = profiles.Normal })
	renamed := edit(func(p *profiles.Profile) { p.ThreadGroups[0].Name = "server" })
	regrouped := edit(func(p *profiles.Profile) { p.ThreadGroups[0].Match.CommPrefix = []string{"redis-serv"} })
	reordered := edit(func(p *profiles.Profile) {
		p.ThreadGroups[1].Match = profiles.Match{CommPrefix: []string{"bio_"}}
		p.ThreadGroups[0], p.ThreadGroups[1] = p.ThreadGroups[1], p.ThreadGroups[0]
	})
	reorderedBack := edit(func(p *profiles.Profile) { p.ThreadGroups[1].Match = profiles.Match{CommPrefix: []string{"bio_"}} })
	cases := []struct {
		name  string
		a, b  *profiles.Profile
		equal bool
	}{
		{"exclusive → latency at weight 100 is exclusive → normal", toLatency, toNormal, true},
		{"a group's name changes nothing", redis, renamed, true},
		{"another matcher is another grouping", redis, regrouped, false},
		{"group order decides which group takes a thread", reordered, reorderedBack, false},
	}
	for _, c := range cases {
		a, b := realise(t, c.a, true), realise(t, c.b, true)
		if eq := a.Key() == b.Key(); eq != c.equal {
			t.Errorf("%s: equal keys %t, want %t\n%s\n%s", c.name, eq, c.equal, a.Key(), b.Key())
		}
	}
}

// TestRealiseRedis spells out what the Redis profile does on CFS.
func TestRealiseRedis(t *testing.T) {
	cases := []struct {
		slice bool
		want  []string // group: settings | notes
	}{
		{true, []string{
			"latency-critical: slice=250µs cpus=1 | weight 100 not applied: the CFS backend maps weight to nice for latency groups only; exclusivity partial: only the workload's other threads are kept off CPUs 1; other processes and pods, and their use of the SMT siblings, are not",
			"rest: policy=SCHED_IDLE | weight 10 not applied: the CFS backend maps weight to nice for latency groups only; slice_us 800 not applied: SCHED_IDLE threads keep the kernel's slice",
		}},
		{false, []string{
			"latency-critical: cpus=1 | weight 100 not applied: the CFS backend maps weight to nice for latency groups only; slice_us 250 not applied: the test's kernel takes no slice; exclusivity partial: only the workload's other threads are kept off CPUs 1; other processes and pods, and their use of the SMT siblings, are not",
			"rest: policy=SCHED_IDLE | weight 10 not applied: the CFS backend maps weight to nice for latency groups only; slice_us 800 not applied: SCHED_IDLE threads keep the kernel's slice",
		}},
	}
	for _, c := range cases {
		r := realise(t, load(t, "testdata/redis.toml"), c.slice)
		var got []string
		for _, g := range r.Groups {
			got = append(got, g.Name+": "+g.Summary()+" | "+strings.Join(g.Notes, "; "))
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("slice %t:\n%s\nwant\n%s", c.slice, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}
