package pipeline

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/target"
)

// fakeBackend applies nothing and records the plans it was given.
type fakeBackend struct{ plans []scheduler.Plan }

func (b *fakeBackend) Name() string { return BackendCFS }
func (b *fakeBackend) Probe() error { return nil }
func (b *fakeBackend) Apply(_ context.Context, p scheduler.Plan) (scheduler.Applied, error) {
	b.plans = append(b.plans, p)
	return fakeApplied{}, nil
}

type fakeApplied struct{}

func (fakeApplied) Refresh() error                         { return nil }
func (fakeApplied) Stats() ([]scheduler.GroupStats, error) { return nil, nil }
func (fakeApplied) Revert() error                          { return nil }

// TestApply: a profile is linted for this machine before anything is
// applied; an exclusive group too big for it refuses the profile, or with
// Demote is demoted and the demoted profile applied.
func TestApply(t *testing.T) {
	_, shape, err := thisMachine()
	if err != nil {
		t.Skip(err)
	}
	tgt, err := target.Resolve(context.Background(), target.Spec{Pid: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	// One whole core more than the machine can give (one stays shared);
	// no cpu_fraction, which is a warning.
	big := &profiles.Profile{SchemaVersion: profiles.SchemaVersion, ID: "big", MachineShape: shape,
		ThreadGroups: []profiles.ThreadGroup{
			{Name: "hot", Match: profiles.Match{CommPrefix: []string{"no-such-thread"}}, Treatment: profiles.Exclusive, ExclusiveCores: shape.CoreCount()},
			{Name: "rest", Match: profiles.Match{All: true}, Treatment: profiles.Yield},
		}}
	cases := []struct {
		name    string
		demote  bool
		refused bool
	}{{"refused", false, true}, {"demoted", true, false}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &fakeBackend{}
			var warns []profiles.Finding
			var notes []string
			s, err := Apply(context.Background(), tgt, "big.toml", big, ApplyOptions{Backend: b, Demote: c.demote,
				Warn: func(f profiles.Finding) { warns = append(warns, f) }, Note: func(n string) { notes = append(notes, n) }})
			if c.refused {
				var re *RefusedError
				if !errors.As(err, &re) || len(re.Errors) != 1 || re.Errors[0].Option != profiles.OptionDemote {
					t.Fatalf("err %v, want a RefusedError for the too-big group", err)
				}
				if !strings.HasPrefix(err.Error(), "big.toml: error: group \"hot\": exclusive_cores: ") || !strings.HasSuffix(err.Error(), "; nothing was changed") {
					t.Errorf("message %q", err)
				}
				if len(b.plans) != 0 {
					t.Error("a refused profile was applied")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				defer s.Stop()
				if len(notes) != 1 || !strings.Contains(notes[0], "demoted to latency") {
					t.Errorf("notes %q, want the demotion", notes)
				}
				if len(b.plans) != 1 || b.plans[0].Profile.ThreadGroups[0].Treatment != profiles.Latency || s.Plan().Profile != b.plans[0].Profile {
					t.Errorf("applied %+v, want the demoted profile", b.plans)
				}
				if sum := s.Stop(); sum.Reason != scheduler.Stopped {
					t.Errorf("stopped: %v", sum.Reason)
				}
			}
			var fraction bool
			for _, w := range warns {
				fraction = fraction || w.Field == "cpu_fraction"
			}
			if !fraction {
				t.Errorf("warnings %v lack the unset cpu_fraction", warns)
			}
		})
	}
}

func TestRefusedErrorFormat(t *testing.T) {
	f := profiles.Finding{Severity: profiles.Error, Group: -1, Field: "id", Message: "bad"}
	one := &RefusedError{Path: "p.toml", Errors: []profiles.Finding{f}}
	if got, want := one.Error(), "p.toml: error: id: bad; nothing was changed"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	two := &RefusedError{Path: "p.toml", Errors: []profiles.Finding{f, f}}
	if got, want := two.Format(func(profiles.Finding) string { return "x" }), "p.toml: 2 lint errors; nothing was changed:\n  p.toml: x\n  p.toml: x"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
