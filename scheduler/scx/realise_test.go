package scx

import (
	"testing"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
)

// TestRealise: on sched_ext every field of a group is in the layer
// configuration the scheduler is loaded with, so every change of one
// realises differently — weight outside latency, preempt and slice_us
// included — while a group's name changes nothing.
func TestRealise(t *testing.T) {
	topo := &machine.Topology{OnlineList: "0-1", Online: []int{0, 1},
		CPUs:  []machine.CPU{{ID: 0, Siblings: []int{0}, Core: 0}, {ID: 1, Siblings: []int{1}, Core: 1}},
		Cores: []machine.Core{{CPUs: []int{0}}, {CPUs: []int{1}, CoreID: 1}}}
	base := func() *profiles.Profile {
		return &profiles.Profile{SchemaVersion: 1, ID: "r", ThreadGroups: []profiles.ThreadGroup{
			{Name: "server", Match: profiles.Match{CommPrefix: []string{"redis-server"}}, Treatment: profiles.Exclusive, ExclusiveCores: 1, SliceUs: 250, Weight: 100},
			{Name: "rest", Match: profiles.Match{All: true}, Treatment: profiles.Yield, SliceUs: 800, Weight: 10},
		}}
	}
	b := New()
	realise := func(p *profiles.Profile) string {
		r, err := b.Realise(p, topo)
		if err != nil {
			t.Fatal(err)
		}
		return r.Key()
	}
	inc := realise(base())
	cases := []struct {
		name  string
		edit  func(p *profiles.Profile)
		equal bool
	}{
		{"name", func(p *profiles.Profile) { p.ThreadGroups[0].Name = "main" }, true},
		{"weight on a yield group", func(p *profiles.Profile) { p.ThreadGroups[1].Weight = 20 }, false},
		{"slice on a yield group", func(p *profiles.Profile) { p.ThreadGroups[1].SliceUs = 400 }, false},
		{"preempt", func(p *profiles.Profile) { p.ThreadGroups[0].Preempt = true }, false},
		{"treatment", func(p *profiles.Profile) { p.ThreadGroups[1].Treatment = profiles.Normal }, false},
		{"weight 0 is the default 100", func(p *profiles.Profile) { p.ThreadGroups[0].Weight = 0 }, true},
	}
	for _, c := range cases {
		p := base()
		c.edit(p)
		if eq := realise(p) == inc; eq != c.equal {
			t.Errorf("%s: equal realisation %t, want %t", c.name, eq, c.equal)
		}
	}
	r, err := b.Realise(base(), topo)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Groups[0].Summary(), "treatment=exclusive weight=100 slice=250µs preempt=false cpus=1"; got != want {
		t.Errorf("server: %s, want %s", got, want)
	}
	t.Logf("key:\n%s", inc)
}
