package synthesize

import (
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/observe/snapshot"
	"temper.codes/temper-train/profiles"
)

// traceCase is a real trace under testdata/traces, how analyze is told
// which threads are the workload's, and the variants to synthesize.
type traceCase struct {
	name     string // golden file stem
	trace    string // relative to the repository root
	snapshot string // observe's snapshot.json next to it, if any
	pids     []int
	variants []variant
}

// variant is one way of synthesizing a trace's analysis: with the snapshot
// (its topology and the pod's request), or with --shape and --request.
type variant struct {
	label    string // golden file infix
	snapshot bool
	shape    string
	request  int
	nodeBusy float64 // Options.NodeBusyCPUs
	exports  bool    // also the scx_layered and Helm exports
}

// The machine the traces were recorded on (2 CPUs, no SMT), an SMT node
// with the seed's 2250m request and 1.5 CPUs of node-wide use (room for an
// exclusive core), and a shape known only by its logical CPU count.
var flagVariants = []variant{
	{label: "2cpu-2c-smt1", shape: "2cpu-2c-smt1"},
	{label: "8cpu-4c-smt2", shape: "8cpu-4c-smt2", request: 2250, nodeBusy: 1.5, exports: true},
	{label: "2cpu", shape: "2cpu"},
}

// traces are the real traces profiles are synthesized from in tests: the C
// test workload (testdata/workload; its pid is in the trace's .json), and
// real servers under their own load tools (testdata/traces/servers), whose
// snapshots give the shape the traces were recorded on.
var traces = []traceCase{
	{name: "workload", trace: "testdata/traces/workload-tracefs.txt.gz", pids: []int{19560}, variants: flagVariants},
	serverCase("mariadb"), serverCase("postgres"), serverCase("redis"), serverCase("memcached"),
}

func serverCase(name string) traceCase {
	dir := "testdata/traces/servers/" + name
	// Only the snapshot's machine: the traces record their CPU count, and
	// synthesize refuses a --shape the trace contradicts.
	return traceCase{name: name, trace: dir + "/trace.pftrace.gz", snapshot: dir + "/snapshot.json", variants: []variant{
		{label: "snapshot", snapshot: true, exports: true},
	}}
}

// TestGolden analyses each real trace and synthesizes each variant into
// testdata/<name>-<variant>.toml, exporting some to scx_layered and Helm.
func TestGolden(t *testing.T) {
	for _, tc := range traces {
		t.Run(tc.name, func(t *testing.T) {
			opts := analyze.Options{Path: tc.trace, Pids: tc.pids}
			if tc.snapshot != "" {
				snap, err := snapshot.Load(filepath.Join("..", tc.snapshot))
				if err != nil {
					t.Fatal(err)
				}
				opts.Snapshot = snap
			}
			a, err := analyze.File(filepath.Join("..", tc.trace), opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tc.variants {
				t.Run(v.label, func(t *testing.T) {
					opt := Options{ID: tc.name, Source: tc.name + "-analysis.json", RequestMillicores: v.request, NodeBusyCPUs: v.nodeBusy}
					if v.snapshot {
						opt.Snapshot, opt.SnapshotPath = opts.Snapshot, tc.snapshot
					} else {
						opt.Shape = shapeP(t, v.shape)
					}
					r, err := Profile(a, opt)
					if err != nil {
						t.Fatal(err)
					}
					checkProfile(t, a, r)
					data, err := r.TOML()
					if err != nil {
						t.Fatal(err)
					}
					stem := tc.name + "-" + v.label
					testkit.Golden(t, filepath.Join("testdata", stem+".toml"), data)
					if !v.exports {
						return
					}
					spec, err := LayeredSpec(r.Profile)
					switch {
					case usesCmdline(r.Profile):
						// Roles told apart by process title: scx_layered
						// has no such matcher, and the export says so.
						if err == nil || !strings.Contains(err.Error(), "scx_layered cannot match a command line") {
							t.Errorf("scx_layered export of a cmdline_prefix profile: err %v, want the cmdline refusal", err)
						}
					case err != nil:
						t.Fatal(err)
					default:
						checkLayeredEquivalent(t, a, r.Profile, spec)
						testkit.Golden(t, filepath.Join("testdata", stem+".layered.json"), spec)
					}
					values, err := HelmValues(tc.name, data)
					if err != nil {
						t.Fatal(err)
					}
					if got := helmProfile(t, tc.name, values); got != string(data) {
						t.Errorf("helm values do not carry the TOML byte for byte")
					}
					testkit.Golden(t, filepath.Join("testdata", stem+".values.yaml"), values)
				})
			}
		})
	}
}

// usesCmdline reports whether a group of p matches on command lines.
func usesCmdline(p *profiles.Profile) bool {
	for _, g := range p.ThreadGroups {
		if len(g.Match.CmdlinePrefix) > 0 {
			return true
		}
	}
	return false
}

// TestGoldenParses: every golden profile loads strictly and lints clean.
func TestGoldenParses(t *testing.T) {
	files, err := filepath.Glob("testdata/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.toml: the goldens this test checks are missing")
	}
	for _, f := range files {
		p, err := profiles.Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		for _, fd := range profiles.Lint(p, profiles.LintOptions{}) {
			if fd.Severity == profiles.Error {
				t.Errorf("%s: %s", f, fd)
			}
		}
	}
}
