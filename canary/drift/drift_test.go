package drift

import (
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/profiles"
)

func thread(tid int32, comm string, class analyze.Class, cpu float64) analyze.Thread {
	return analyze.Thread{Tid: tid, Tgid: 100, Comm: comm, Process: "svc", Family: strings.TrimRight(comm, "0123456789-"), Class: class,
		Features: analyze.Features{CPUShare: cpu}}
}

func group(name string, class analyze.Class, t profiles.Treatment, prefixes ...string) profiles.ThreadGroup {
	g := profiles.ThreadGroup{Name: name, Treatment: t, Match: profiles.Match{CommPrefix: prefixes}}
	if class != "" {
		g.Evidence = &profiles.Evidence{Class: string(class)}
	}
	return g
}

func rest() profiles.ThreadGroup {
	return profiles.ThreadGroup{Name: "rest", Treatment: profiles.Yield, Match: profiles.Match{All: true}}
}

func profile(gs ...profiles.ThreadGroup) *profiles.Profile {
	return &profiles.Profile{SchemaVersion: 1, ID: "svc", ThreadGroups: gs}
}

func TestFind(t *testing.T) {
	base := []analyze.Thread{
		thread(101, "worker-1", analyze.ClassLatencyCritical, 0.1),
		thread(102, "worker-2", analyze.ClassLatencyCritical, 0.1),
		thread(103, "logger", analyze.ClassSporadic, 0.01),
	}
	inForce := profile(group("workers", analyze.ClassLatencyCritical, profiles.Latency, "worker"), rest())
	for _, tc := range []struct {
		name    string
		threads []analyze.Thread
		inForce *profiles.Profile
		fresh   *profiles.Profile
		want    []string // kinds, in order
		text    string
	}{
		{"no drift", base, inForce, inForce, nil, ""},
		{"stock: nothing to drift from", base, nil, inForce, nil, ""},
		{"class changed", []analyze.Thread{
			thread(101, "worker-1", analyze.ClassSyncCompute, 0.9),
			thread(102, "worker-2", analyze.ClassLatencyCritical, 0.1),
		}, inForce, inForce, []string{ClassChanged}, `group "workers" was synthesized for latency_critical threads; now 90% of its CPU (2 threads) is sync_compute`},
		{"matcher matches nothing", base, profile(group("workers", analyze.ClassLatencyCritical, profiles.Latency, "worker"),
			group("gc", "", profiles.Batch, "gc-"), rest()), inForce, []string{MatchesNone}, `group "gc" (comm_prefix gc-) matches none`},
		{"new hot family", append(base[:2:2], thread(104, "encoder-1", analyze.ClassSyncCompute, 0.8)), inForce,
			profile(group("workers", analyze.ClassLatencyCritical, profiles.Latency, "worker"), group("encoders", analyze.ClassSyncCompute, profiles.Exclusive, "encoder"), rest()),
			[]string{NewHot}, `thread 104 "encoder-1" (family encoder, sync_compute, cpu_share 0.80) lands in the catch-all "rest"; the fresh profile gives it group "encoders" (exclusive)`},
		{"a hot thread the fresh profile also leaves in the catch-all", append(base[:2:2], thread(104, "encoder-1", analyze.ClassSporadic, 0.8)), inForce, inForce, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := Find(&analyze.Analysis{Threads: tc.threads}, tc.inForce, tc.fresh)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, f := range fs {
				kinds = append(kinds, f.Kind)
			}
			if strings.Join(kinds, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("findings %v, want kinds %v", fs, tc.want)
			}
			if tc.text != "" && !strings.Contains(fs[0].Text, tc.text) {
				t.Errorf("finding %q, want %q", fs[0].Text, tc.text)
			}
		})
	}
}
