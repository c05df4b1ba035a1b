package profiles

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// base is a lint-clean profile the cases change: llama.cpp's sizing on a
// 4-core SMT2 machine.
func base() *Profile {
	return &Profile{
		SchemaVersion: 1,
		ID:            "svc",
		MachineShape:  Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2},
		Traits:        Traits{CPURequestMillicores: 2250, HotThreads: 2},
		ThreadGroups: []ThreadGroup{
			{Name: "hot", Match: Match{CommPrefix: []string{"llama"}}, Treatment: Exclusive, CPUFraction: 0.85, ExclusiveCores: 2},
			{Name: "io", Match: Match{CommPrefix: []string{"io_"}}, Treatment: Latency},
			{Name: "rest", Match: Match{ExcludePrefix: []string{"llama", "io_"}}, Treatment: Yield},
		},
	}
}

func group(name string, m Match, t Treatment) ThreadGroup {
	return ThreadGroup{Name: name, Match: m, Treatment: t}
}

func TestLintBaseIsClean(t *testing.T) {
	for _, b := range Backends() {
		if fs := Lint(base(), LintOptions{Backend: b}); len(fs) > 0 {
			t.Errorf("%s: %v", b, fs)
		}
	}
}

// want describes a finding: its severity, group index (-1 profile), field,
// and a piece of its message.
type want struct {
	sev   Severity
	group int
	field string
	msg   string
}

func (w want) String() string {
	return fmt.Sprintf("%v group %d %s: %q", w.sev, w.group, w.field, w.msg)
}

func TestLintRules(t *testing.T) {
	cases := []struct {
		name   string
		change func(p *Profile)
		opt    LintOptions
		want   []want // each must be found
		none   bool   // no finding at all besides want
	}{
		{name: "0.9 × 2250m is 3 cores, not 2",
			change: func(p *Profile) { p.ThreadGroups[0].CPUFraction = 0.9 },
			want:   []want{{Error, 0, "exclusive_cores", "2, but ceil(0.9 × 2250m) = ceil(2.025) = 3"}}, none: true},
		{name: "0.9 with 3 cores: more cores than hot threads",
			change: func(p *Profile) { p.ThreadGroups[0].CPUFraction = 0.9; p.ThreadGroups[0].ExclusiveCores = 3 },
			want:   []want{{Error, -1, "traits.hot_threads", "own 3 cores in total but the workload has 2 hot threads"}}},
		{name: "evidence hot threads bound the cores",
			change: func(p *Profile) {
				p.Traits.HotThreads = 0
				p.ThreadGroups[0].CPUFraction, p.ThreadGroups[0].ExclusiveCores = 0.9, 3
				p.ThreadGroups[0].Evidence = &Evidence{Threads: 4, HotThreads: 2}
			},
			want: []want{{Error, 0, "exclusive_cores", "3 cores for 2 hot threads"}}, none: true},
		{name: "2 exclusive cores under a 1.5-CPU limit",
			change: func(p *Profile) { p.Traits.CPULimitMillicores = 2250 },
			opt:    LintOptions{LimitMillicores: 1500},
			want:   []want{{Warning, -1, "traits.cpu_limit_millicores", "own 2 cores (2 CPUs of running) but the pod is limited to 1.5 CPUs (1500m)"}}, none: true},
		{name: "2 exclusive cores under the profile's own 1.5-CPU limit",
			change: func(p *Profile) {
				p.Traits.CPURequestMillicores, p.Traits.CPULimitMillicores = 1500, 1500
				p.ThreadGroups[0].CPUFraction = 1
			},
			want: []want{{Warning, -1, "traits.cpu_limit_millicores", "limited to 1.5 CPUs (1500m): the limit"}}, none: true},
		{name: "2 exclusive cores within a 2-CPU limit",
			change: func(p *Profile) { p.Traits.CPULimitMillicores = 2250 },
			opt:    LintOptions{LimitMillicores: 2000},
			none:   true},
		{name: "0.8 × 2500m is exactly 2 cores despite float64",
			change: func(p *Profile) { p.Traits.CPURequestMillicores = 2500; p.ThreadGroups[0].CPUFraction = 0.8 },
			none:   true},
		{name: "--request overrides the traits",
			change: func(p *Profile) {},
			opt:    LintOptions{RequestMillicores: 3000},
			want:   []want{{Error, 0, "exclusive_cores", "ceil(0.85 × 3000m) = ceil(2.55) = 3"}}},
		{name: "no request: sizing unchecked, said so",
			change: func(p *Profile) { p.Traits.CPURequestMillicores = 0 },
			want:   []want{{Warning, 0, "exclusive_cores", "no CPU request"}}, none: true},
		{name: "exclusive without cores",
			change: func(p *Profile) { p.ThreadGroups[0].ExclusiveCores = 0 },
			want:   []want{{Error, 0, "exclusive_cores", "needs exclusive_cores > 0"}}},
		{name: "needs more cores than a 2-core machine has",
			change: func(p *Profile) {},
			opt:    LintOptions{Shape: &Shape{LogicalCPUs: 4, Cores: 2, ThreadsPerCore: 2}},
			want:   []want{{Error, 0, "exclusive_cores", "needs 2 whole cores but a 2-core machine can give at most 1"}, {Warning, -1, "machine_shape", "keyed to 8cpu-4c-smt2"}}},
		{name: "demoted instead",
			change: func(p *Profile) {},
			opt:    LintOptions{Shape: &Shape{Cores: 2, ThreadsPerCore: 2}, Demote: true},
			want:   []want{{Warning, 0, "exclusive_cores", "it will be demoted to latency treatment"}}},
		{name: "two groups together do not fit",
			change: func(p *Profile) {
				p.Traits.HotThreads = 0
				p.ThreadGroups[1] = ThreadGroup{Name: "io", Match: Match{CommPrefix: []string{"io_"}}, Treatment: Exclusive, CPUFraction: 0.5, ExclusiveCores: 2}
			},
			want: []want{{Error, 1, "exclusive_cores", "the exclusive groups before it take 2 of the machine's 4 cores"}}},
		{name: "cores unknown: said so",
			change: func(p *Profile) { p.MachineShape = Shape{LogicalCPUs: 8} },
			want:   []want{{Warning, 0, "exclusive_cores", "core count is unknown"}}},
		{name: "cores derived from CPUs and SMT",
			change: func(p *Profile) { p.MachineShape = Shape{LogicalCPUs: 4, ThreadsPerCore: 2} },
			want:   []want{{Error, 0, "exclusive_cores", "a 2-core machine"}}},
		{name: "impossible shape",
			change: func(p *Profile) { p.MachineShape.LogicalCPUs = 6 },
			want:   []want{{Error, -1, "machine_shape", "logical_cpus = 6 but cores × threads_per_core = 4 × 2 = 8"}}},
		{name: "SMT stacking in the last (remainder) group",
			change: func(p *Profile) {
				p.Traits.HotThreads = 0
				p.ThreadGroups[2].Evidence = &Evidence{Threads: 5, HotThreads: 3}
			},
			want: []want{{Warning, 2, "evidence.hot_threads", "3 hot threads share the 2 cores left after exclusive groups: with SMT2"}}, none: true},
		{name: "SMT stacking of unprofiled hot threads",
			change: func(p *Profile) { p.Traits.HotThreads = 5 },
			want:   []want{{Warning, -1, "traits.hot_threads", "non-exclusive 3 hot threads share the 2 cores"}}, none: true},
		{name: "hot threads stacking inside an exclusive group",
			change: func(p *Profile) { p.ThreadGroups[0].Evidence = &Evidence{Threads: 3, HotThreads: 3} },
			want:   []want{{Warning, 0, "exclusive_cores", "3 hot threads on 2 exclusive cores: 1 will run on the cores' SMT siblings"}}},
		{name: "oversubscribed shared cores",
			change: func(p *Profile) { p.ThreadGroups[1].Evidence = &Evidence{Threads: 9, HotThreads: 5} },
			want:   []want{{Warning, 1, "evidence.hot_threads", "outnumber the 4 CPUs of the 2 cores left shared"}}},
		{name: "comm_regex on scx-layered",
			change: func(p *Profile) { p.ThreadGroups[1].Match = Match{CommRegex: "^io_"} },
			opt:    LintOptions{Backend: BackendSCXLayered},
			want:   []want{{Error, 1, "match.comm_regex", "the scx-layered backend has no comm_regex matcher"}}},
		{name: "comm_regex is fine on the shipped backends",
			change: func(p *Profile) { p.ThreadGroups[1].Match = Match{CommRegex: "^io_"} },
			none:   true},
		{name: "look-around",
			change: func(p *Profile) { p.ThreadGroups[1].Match = Match{CommRegex: "^(?!ib_).*"} },
			want:   []want{{Error, 1, "match.comm_regex", "RE2 has no look-around"}}},
		{name: "bad regex",
			change: func(p *Profile) { p.ThreadGroups[1].Match = Match{CommRegex: "io_("} },
			want:   []want{{Error, 1, "match.comm_regex", "does not compile under RE2: missing closing )"}}},
		{name: "16-byte comm prefix",
			change: func(p *Profile) { p.ThreadGroups[1].Match.CommPrefix = []string{"ib_pg_flush_coord"} },
			want:   []want{{Error, 1, "match.comm_prefix", "is 17 bytes; the kernel keeps at most 15"}}},
		{name: "16-byte exclude prefix",
			change: func(p *Profile) { p.ThreadGroups[2].Match.ExcludePrefix = []string{"llama", "io_", "Native-Transport"} },
			want:   []want{{Error, 2, "match.exclude_prefix", "is 16 bytes"}}},
		{name: "empty match",
			change: func(p *Profile) { p.ThreadGroups[1].Match = Match{} },
			want:   []want{{Error, 1, "match", "a match with no matcher selects no thread"}}},
		{name: "match excluded by itself",
			change: func(p *Profile) { p.ThreadGroups[1].Match.ExcludePrefix = []string{"io"} },
			want:   []want{{Error, 1, "match", "matches nothing"}}},
		{name: "catch-all first makes the rest unreachable",
			change: func(p *Profile) {
				p.ThreadGroups = append([]ThreadGroup{group("all", Match{All: true}, Normal)}, p.ThreadGroups...)
			},
			want: []want{
				{Warning, 0, "match", "a catch-all that is not the last group"},
				{Error, 1, "match", "unreachable: every thread it matches is taken first by group \"all\""},
				{Error, 2, "match", "unreachable"},
				{Error, 3, "match", "unreachable"},
			}},
		{name: "longer prefix after shorter",
			change: func(p *Profile) {
				p.ThreadGroups = []ThreadGroup{group("ib", Match{CommPrefix: []string{"ib_"}}, Latency), group("io", Match{CommPrefix: []string{"ib_io"}}, Latency)}
			},
			want: []want{{Error, 1, "match", "taken first by group \"ib\" (thread_groups[0])"}}},
		{name: "shorter prefix after longer is reachable",
			change: func(p *Profile) {
				p.ThreadGroups = []ThreadGroup{group("io", Match{CommPrefix: []string{"ib_io"}}, Latency), group("ib", Match{CommPrefix: []string{"ib_"}}, Latency)}
			},
			none: true},
		{name: "an extra constraint on the earlier group keeps the later reachable",
			change: func(p *Profile) {
				yes := true
				p.ThreadGroups = []ThreadGroup{group("main", Match{CommPrefix: []string{"ib_"}, GroupLeader: &yes}, Latency), group("ib", Match{CommPrefix: []string{"ib_io"}}, Latency)}
			},
			none: true},
		{name: "a prefix the exclude-only remainder lets through",
			change: func(p *Profile) {
				p.ThreadGroups = []ThreadGroup{group("rest", Match{ExcludePrefix: []string{"conn"}}, Yield), group("conn", Match{CommPrefix: []string{"connection"}}, Latency), group("w", Match{CommPrefix: []string{"worker"}}, Latency)}
			},
			want: []want{{Warning, 0, "match", "catch-all that is not the last"}, {Error, 2, "match", "unreachable: every thread it matches is taken first by group \"rest\""}}},
		{name: "group after an identical regex",
			change: func(p *Profile) {
				p.ThreadGroups = []ThreadGroup{group("a", Match{CommRegex: "^w"}, Latency), group("b", Match{CommRegex: "^w", CgroupPrefix: "/pod"}, Latency)}
			},
			want: []want{{Error, 1, "match", "unreachable"}}},
		{name: "weight, slice, rt_priority bounds",
			change: func(p *Profile) {
				g := &p.ThreadGroups[1]
				g.Weight, g.SliceUs, g.RTPriority = 20000, 10, 120
			},
			want: []want{{Error, 1, "weight", "outside 1..10000"}, {Error, 1, "slice_us", "10 µs is outside 50..100000"}, {Error, 1, "rt_priority", "120 is outside 0..99"}}},
		{name: "rt_priority only on latency groups",
			change: func(p *Profile) { p.ThreadGroups[2].RTPriority = 10 },
			want:   []want{{Error, 2, "rt_priority", "only latency groups may run as SCHED_RR"}}},
		{name: "rt_priority where the cgroup has no RT runtime",
			change: func(p *Profile) { p.ThreadGroups[1].RTPriority = 10 },
			opt:    LintOptions{RTRuntime: RTRuntime{Checked: true, Why: "cgroup /pod has cpu.rt_runtime_us 0"}},
			want:   []want{{Error, 1, "rt_priority", "cannot run SCHED_RR: cgroup /pod has cpu.rt_runtime_us 0"}}},
		{name: "rt_priority where the cgroup has RT runtime",
			change: func(p *Profile) { p.ThreadGroups[1].RTPriority = 10 },
			opt:    LintOptions{RTRuntime: RTRuntime{Checked: true, Available: true}},
			none:   true},
		{name: "rt_priority without RT runtime on sched_ext, which does not apply it",
			change: func(p *Profile) { p.ThreadGroups[1].RTPriority = 10 },
			opt:    LintOptions{Backend: BackendSchedExt, RTRuntime: RTRuntime{Checked: true, Why: "no runtime"}},
			none:   true},
		{name: "fields of the wrong treatment",
			change: func(p *Profile) {
				p.ThreadGroups[2].CPUFraction, p.ThreadGroups[2].ExclusiveCores, p.ThreadGroups[2].Preempt = 0.5, 1, true
			},
			want: []want{{Warning, 2, "cpu_fraction", "ignored"}, {Warning, 2, "exclusive_cores", "ignored"}, {Warning, 2, "preempt", "ignored"}}},
		{name: "cpu_fraction NaN from Go",
			change: func(p *Profile) { p.ThreadGroups[0].CPUFraction = math.NaN() },
			want:   []want{{Error, 0, "cpu_fraction", "outside (0, 1]"}}},
		{name: "cpu_fraction out of range",
			change: func(p *Profile) { p.ThreadGroups[0].CPUFraction = 1.5 },
			want:   []want{{Error, 0, "cpu_fraction", "outside (0, 1]"}}},
		{name: "duplicate and empty names",
			change: func(p *Profile) { p.ThreadGroups[1].Name = "hot"; p.ThreadGroups[2].Name = "" },
			want:   []want{{Error, 1, "name", "duplicate of thread_groups[0]"}, {Error, 2, "name", "empty"}}},
		{name: "unknown treatment from Go",
			change: func(p *Profile) { p.ThreadGroups[1].Treatment = "fast" },
			want:   []want{{Error, 1, "treatment", "unknown treatment \"fast\""}}},
		{name: "image glob",
			change: func(p *Profile) { p.Fingerprint.Images = []string{"mysql:*", "bad[", ""} },
			want:   []want{{Error, -1, "fingerprint.images[1]", "not a valid glob"}, {Error, -1, "fingerprint.images[2]", "empty image pattern"}}},
		{name: "header",
			change: func(p *Profile) { p.SchemaVersion = 2; p.ID = "Bad ID" },
			want:   []want{{Error, -1, "schema_version", "2 is not supported"}, {Error, -1, "id", "not a valid id"}}},
		{name: "no groups",
			change: func(p *Profile) { p.ThreadGroups = nil },
			want:   []want{{Error, -1, "thread_groups", "no thread groups"}}},
		{name: "scx_layered's 16 layers",
			change: func(p *Profile) {
				p.ThreadGroups = p.ThreadGroups[:2]
				for i := range 15 {
					p.ThreadGroups = append(p.ThreadGroups, group(fmt.Sprintf("g%d", i), Match{CommPrefix: []string{fmt.Sprintf("g%d-", i)}}, Normal))
				}
			},
			opt:  LintOptions{Backend: BackendSCXLayered},
			want: []want{{Error, -1, "thread_groups", "18 layers (groups plus the remainder) but scx_layered allows at most 16"}}},
		{name: "strict promotes warnings",
			change: func(p *Profile) { p.ThreadGroups[2].Preempt = true },
			opt:    LintOptions{Strict: true},
			want:   []want{{Error, 2, "preempt", "ignored"}}, none: true},
		{name: "unknown backend",
			change: func(p *Profile) {},
			opt:    LintOptions{Backend: "bpf"},
			want:   []want{{Error, -1, "", "unknown backend \"bpf\""}}, none: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := base()
			c.change(p)
			fs := Lint(p, c.opt)
			for _, w := range c.want {
				if !hasFinding(fs, w) {
					t.Errorf("missing %v\nin:\n%s", w, dump(fs))
				}
			}
			if c.none && len(fs) != len(c.want) {
				t.Errorf("want only %v, got:\n%s", c.want, dump(fs))
			}
		})
	}
}

func hasFinding(fs []Finding, w want) bool {
	for _, f := range fs {
		if f.Severity == w.sev && f.Group == w.group && f.Field == w.field && strings.Contains(f.Message, w.msg) {
			return true
		}
	}
	return false
}

func dump(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  [%d] %s\n", f.Group, f)
	}
	return b.String()
}

// TestLintVisitsEveryGroup moves one bad group through every position of a
// profile: whatever its place, the last (remainder) included, it is found.
func TestLintVisitsEveryGroup(t *testing.T) {
	bad := ThreadGroup{Name: "bad", Match: Match{CommPrefix: []string{"x"}}, Treatment: Normal, Weight: -1,
		Evidence: &Evidence{Threads: 4, HotThreads: 4}}
	for pos := 0; pos <= 3; pos++ {
		p := base()
		p.Traits.HotThreads = 0
		p.ThreadGroups[2].Match.ExcludePrefix = append(p.ThreadGroups[2].Match.ExcludePrefix, "x")
		p.ThreadGroups = append(p.ThreadGroups[:pos], append([]ThreadGroup{bad}, p.ThreadGroups[pos:]...)...)
		fs := Lint(p, LintOptions{})
		for _, w := range []want{{Error, pos, "weight", "outside 1..10000"}, {Warning, pos, "evidence.hot_threads", "4 hot threads"}} {
			if !hasFinding(fs, w) {
				t.Errorf("position %d: missing %v in\n%s", pos, w, dump(fs))
			}
		}
	}
}

func TestExclusiveCoresFor(t *testing.T) {
	cases := []struct {
		f    float64
		req  int
		want int
	}{
		{0.85, 2250, 2}, {0.9, 2250, 3}, {0.8, 2500, 2}, {1, 3000, 3}, {0.1, 1000, 1},
		{0.3, 1000, 1}, {0.7, 3000, 3}, {0.35, 2000, 1}, {0.0001, 1, 1}, {0, 2000, 0}, {0.5, 0, 0},
	}
	for _, c := range cases {
		if got := ExclusiveCoresFor(c.f, c.req); got != c.want {
			t.Errorf("ExclusiveCoresFor(%v, %d) = %d, want %d", c.f, c.req, got, c.want)
		}
	}
	// Exact multiples of a core stay exact for every fraction with two
	// decimals and every request in 10m steps up to 16 cores.
	for hundredths := 1; hundredths <= 100; hundredths++ {
		f := float64(hundredths) / 100
		for req := 10; req <= 16000; req += 10 {
			exact := hundredths * req // in 1/100 millicores
			want := (exact + 100_000 - 1) / 100_000
			if got := ExclusiveCoresFor(f, req); got != want {
				t.Fatalf("ExclusiveCoresFor(%v, %d) = %d, want %d", f, req, got, want)
			}
		}
	}
}

func TestDemote(t *testing.T) {
	p := base()
	p.ThreadGroups = append(p.ThreadGroups[:2], ThreadGroup{Name: "small", Match: Match{CommPrefix: []string{"s"}}, Treatment: Exclusive, ExclusiveCores: 1}, p.ThreadGroups[2])
	q, notes := Demote(p, Shape{Cores: 2, ThreadsPerCore: 2})
	if q.ThreadGroups[0].Treatment != Latency || q.ThreadGroups[0].ExclusiveCores != 0 {
		t.Errorf("hot not demoted: %+v", q.ThreadGroups[0])
	}
	if q.ThreadGroups[2].Treatment != Exclusive {
		t.Errorf("small (1 core of 2, one shared) should still fit: %+v", q.ThreadGroups[2])
	}
	if len(notes) != 1 || !strings.Contains(notes[0], `group "hot": 2 exclusive cores do not fit a 2-core machine`) {
		t.Errorf("notes: %q", notes)
	}
	if p.ThreadGroups[0].Treatment != Exclusive {
		t.Error("Demote changed its argument")
	}
	if fs := Lint(q, LintOptions{Shape: &Shape{Cores: 2, ThreadsPerCore: 2}}); HasErrors(fs) {
		t.Errorf("demoted profile still has errors:\n%s", dump(fs))
	}
}

func TestFindingString(t *testing.T) {
	f := Finding{Severity: Error, Group: 1, GroupName: "io", Field: "match.comm_regex", Backend: "scx-layered", Message: "no"}
	if got, want := f.String(), `error: group "io": match.comm_regex: [scx-layered] no`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	f = Finding{Severity: Warning, Group: -1, Field: "machine_shape", Message: "m"}
	if got, want := f.String(), "warning: machine_shape: m"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestFindingOption: the findings an option resolves say which, in the
// library's words by default and in a command's words through Format.
func TestFindingOption(t *testing.T) {
	flag := func(o Option) string {
		return map[Option]string{OptionRequest: "--request", OptionShape: "--shape", OptionDemote: "apply --demote"}[o]
	}
	noRequest := func(p *Profile) { p.Traits.CPURequestMillicores = 0 }
	noCores := func(p *Profile) { p.MachineShape = Shape{LogicalCPUs: 8} }
	small := &Shape{LogicalCPUs: 4, Cores: 2, ThreadsPerCore: 2}
	cases := []struct {
		name   string
		change func(*Profile)
		opt    LintOptions
		option Option
		lib    string // the end of String()
		cmd    string // the end of Format(flag)
	}{
		{"no request", noRequest, LintOptions{}, OptionRequest,
			"no CPU request (set traits.cpu_request_millicores or LintOptions.RequestMillicores)",
			"no CPU request (set traits.cpu_request_millicores or --request)"},
		{"no cores", noCores, LintOptions{}, OptionShape,
			"core count is unknown (set machine_shape.cores, or lint with LintOptions.Shape)",
			"core count is unknown (set machine_shape.cores, or lint with --shape)"},
		{"too big", func(*Profile) {}, LintOptions{Shape: small}, OptionDemote,
			"apply refuses it (LintOptions.Demote gives the group latency treatment instead)",
			"apply refuses it (apply --demote gives the group latency treatment instead)"},
		{"demoted", func(*Profile) {}, LintOptions{Shape: small, Demote: true}, OptionDemote,
			"it will be demoted to latency treatment (LintOptions.Demote)",
			"it will be demoted to latency treatment (apply --demote)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := base()
			c.change(p)
			var found bool
			for _, f := range Lint(p, c.opt) {
				if f.Option != c.option {
					continue
				}
				found = true
				if !strings.HasSuffix(f.String(), c.lib) {
					t.Errorf("String() = %q, want it to end %q", f.String(), c.lib)
				}
				if got := f.Format(flag); !strings.HasSuffix(got, c.cmd) {
					t.Errorf("Format = %q, want it to end %q", got, c.cmd)
				}
			}
			if !found {
				t.Errorf("no finding with option %v", c.option)
			}
		})
	}
}

// TestCoreBudget: whole cores in group order, one core kept shared, a
// group that does not fit takes nothing and a later smaller one may fit.
func TestCoreBudget(t *testing.T) {
	cases := []struct {
		cores int
		want  []int // cores asked for, in order
		fits  []bool
		left  []int
	}{
		{4, []int{1, 2}, []bool{true, true}, []int{3, 2}},
		{4, []int{3, 1}, []bool{true, false}, []int{3, 0}},
		{4, []int{4, 2, 1}, []bool{false, true, true}, []int{3, 3, 1}},
		{2, []int{1, 1}, []bool{true, false}, []int{1, 0}},
		{1, []int{1}, []bool{false}, []int{0}},
		{0, []int{1}, []bool{false}, []int{0}},
		{8, []int{0}, []bool{false}, []int{7}},
	}
	for _, c := range cases {
		p := &Profile{}
		for _, n := range c.want {
			p.ThreadGroups = append(p.ThreadGroups, ThreadGroup{Name: "g", Treatment: Exclusive, ExclusiveCores: n})
		}
		p.ThreadGroups = append(p.ThreadGroups, ThreadGroup{Name: "rest", Treatment: Normal, ExclusiveCores: 1})
		fits, left := ExclusiveFits(p, c.cores)
		if !slices.Equal(fits[:len(c.want)], c.fits) || !slices.Equal(left[:len(c.want)], c.left) || fits[len(c.want)] {
			t.Errorf("%d cores, groups %v: fits %v left %v, want %v %v (and the normal group false)", c.cores, c.want, fits, left, c.fits, c.left)
		}
	}
}
