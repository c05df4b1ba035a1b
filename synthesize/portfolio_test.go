package synthesize

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/profiles"
)

func TestPortfolio(t *testing.T) {
	eight := &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}
	cases := []struct {
		name string
		a    *analyze.Analysis
		opt  Options
		want []string // risk: groups, "*" marking the main profile
	}{
		{
			name: "exclusive where allowed: three risks",
			a:    inference(),
			opt:  Options{Shape: eight, RequestMillicores: 2250, NodeBusyCPUs: 2.5},
			want: []string{
				"conservative: compute latency comm=llama-infer | rest normal all",
				"moderate: compute normal comm=llama-infer | rest normal all",
				"aggressive*: compute exclusive cores=2 fraction=0.85 comm=llama-infer | rest normal all",
			},
		},
		{
			name: "no exclusive group: moderate is the profile",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassLatencyCritical, 2: analyze.ClassSporadic},
				th{tid: 1, tgid: 1, comm: "srv", cluster: 1, share: 0.2},
				th{tid: 2, tgid: 1, comm: "bio", cluster: 2}),
			opt: Options{Shape: eight},
			want: []string{
				"conservative: latency-critical latency comm=srv | rest normal all",
				"moderate*: latency-critical latency comm=srv | rest yield all",
			},
		},
		{
			name: "a load generator: conservative favours nothing",
			a: mkAnalysis(map[int]analyze.Class{1: analyze.ClassLatencyCritical, 2: analyze.ClassSporadic},
				th{tid: 1, tgid: 1, comm: "redis-server", cluster: 1, share: 0.43, wakeups: 30000, clients: map[string]int64{"redis-benchmark": 30000}},
				th{tid: 2, tgid: 1, comm: "bio", cluster: 2}),
			opt: Options{Shape: eight},
			want: []string{
				"conservative: latency-critical normal comm=redis-server | rest normal all",
				"moderate*: latency-critical normal comm=redis-server | rest yield all",
			},
		},
		{
			name: "nothing stands out: one profile",
			a:    mkAnalysis(map[int]analyze.Class{1: analyze.ClassSporadic}, th{tid: 1, tgid: 1, comm: "idle", cluster: 1}),
			opt:  Options{Shape: eight},
			want: []string{"conservative*: rest normal all"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opt.ID = "x"
			r, err := Profile(c.a, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			mains := 0
			for _, alt := range r.Portfolio {
				mark := ""
				if alt.Main {
					mark = "*"
					mains++
					if alt.Result != r {
						t.Errorf("%s: Main but not the synthesized result", alt.Risk)
					}
				}
				got = append(got, string(alt.Risk)+mark+": "+strings.Join(summary(alt.Result.Profile), " | "))
				checkProfile(t, c.a, alt.Result)
				for _, g := range alt.Result.Profile.ThreadGroups {
					if g.Treatment == profiles.Latency && g.Weight != 0 {
						t.Errorf("%s: latency group %s has weight %d", alt.Risk, g.Name, g.Weight)
					}
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("portfolio:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
			if mains != 1 {
				t.Errorf("%d alternatives are the main profile, want 1", mains)
			}
		})
	}
}

// TestWritePortfolio: the alternatives go where profiles.LoadDir does not
// look, and each loads and lints on its own.
func TestWritePortfolio(t *testing.T) {
	r, err := Profile(inference(), Options{ID: "llama", Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 2250, NodeBusyCPUs: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := r.WriteFile(dir); err != nil {
		t.Fatal(err)
	}
	paths, err := r.WritePortfolio(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(dir, "llama", ".portfolio", "8cpu-4c-smt2.conservative.toml"),
		filepath.Join(dir, "llama", ".portfolio", "8cpu-4c-smt2.moderate.toml"),
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths %q, want %q", paths, want)
	}
	cs, err := profiles.LoadDir(dir)
	if err != nil || len(cs) != 1 {
		t.Fatalf("LoadDir: %d profiles, %v; want the main one only", len(cs), err)
	}
	for _, p := range paths {
		prof, err := profiles.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if fd, bad := profiles.FirstError(profiles.Lint(prof, profiles.LintOptions{})); bad {
			t.Errorf("%s: %s", p, fd)
		}
		if !strings.Contains(prof.Description, "alternative") {
			t.Errorf("%s: the description does not say it is an alternative", p)
		}
	}
}
