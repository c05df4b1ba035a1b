package pipeline

import (
	"context"
	"os"
	"testing"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/rig"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/target"
)

// tieredBackend is a sched_ext-like backend with a tier: it records what
// each Apply was given.
type tieredBackend struct {
	tier   string // the besteffort directory WithTier gave; "" none
	tiered bool
	log    *[]applyCall
}

type applyCall struct {
	tiered  bool
	profile string
	groups  int
}

func (b *tieredBackend) Name() string { return BackendSchedExt }
func (b *tieredBackend) Probe() error { return nil }
func (b *tieredBackend) Apply(_ context.Context, p scheduler.Plan) (scheduler.Applied, error) {
	*b.log = append(*b.log, applyCall{tiered: b.tiered, profile: p.Profile.ID, groups: len(p.Profile.ThreadGroups)})
	return nopApplied{}, nil
}
func (b *tieredBackend) WithTier(dir string) scheduler.Backend {
	return &tieredBackend{tier: dir, tiered: true, log: b.log}
}

type nopApplied struct{}

func (nopApplied) Refresh() error                         { return nil }
func (nopApplied) Stats() ([]scheduler.GroupStats, error) { return nil, nil }
func (nopApplied) Revert() error                          { return nil }

// TestTierUnderSchedExt: with a rig, a backend whose scheduler has the tier
// gets the tier arm; Env.Tier switches what each arm's Apply loads: stock
// detached, tier only the scheduler with no group and the tier, tier +
// profile both.
func TestTierUnderSchedExt(t *testing.T) {
	var log []applyCall
	topo := &machine.Topology{OnlineList: "0-1", Online: []int{0, 1},
		CPUs:  []machine.CPU{{ID: 0, Siblings: []int{0}, Core: 0}, {ID: 1, Siblings: []int{1}, Core: 1}},
		Cores: []machine.Core{{CPUs: []int{0}}, {CPUs: []int{1}, CoreID: 1}}}
	tgt, err := target.Resolve(context.Background(), target.Spec{Pid: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	l := &Live{Backend: &tieredBackend{log: &log}, Rig: &rig.Rig{}, Topology: topo, Target: tgt}
	var notes []string
	if !l.TierArm(false, func(s string) { notes = append(notes, s) }) {
		t.Fatalf("no tier arm under a tiered backend with a rig (notes %v)", notes)
	}
	if l.TierArm(true, func(string) {}) {
		t.Errorf("--no-tier: tier arm")
	}
	if (&Live{Backend: &tieredBackend{log: &log}}).TierArm(false, func(string) {}) {
		t.Errorf("tier arm without a rig")
	}
	if (&Live{Backend: struct{ scheduler.Backend }{&tieredBackend{log: &log}}, Rig: &rig.Rig{}}).TierArm(false, func(s string) { notes = append(notes, s) }) || len(notes) != 1 {
		t.Errorf("a backend without a tier: tier arm, or no note (notes %v)", notes)
	}

	env := l.Env(nil, t.TempDir())
	prof := &profiles.Profile{SchemaVersion: 1, ID: "p", ThreadGroups: []profiles.ThreadGroup{{Name: "all", Match: profiles.Match{All: true}, Treatment: profiles.Latency}}}
	for _, tt := range []struct {
		name    string
		tier    bool
		profile *profiles.Profile
		want    *applyCall // nil: nothing attached
	}{
		{"stock", false, nil, nil},
		{"tier only", true, nil, &applyCall{tiered: true, profile: "tier-only", groups: 0}},
		{"tier + profile", true, prof, &applyCall{tiered: true, profile: "p", groups: 1}},
		{"profile without the tier", false, prof, &applyCall{tiered: false, profile: "p", groups: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log = nil
			if err := env.Tier(tt.tier); err != nil {
				t.Fatal(err)
			}
			s, err := env.Scheduler.Apply(context.Background(), tt.profile)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == nil && (s != nil || len(log) != 0):
				t.Errorf("attached %v, want nothing", log)
			case tt.want != nil && (len(log) != 1 || log[0] != *tt.want):
				t.Errorf("applied %v, want %v", log, *tt.want)
			}
			if s != nil {
				if err := s.Stop(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
