package scheduler

import (
	"testing"

	"temper.codes/temper-train/profiles"
)

func TestRealisedKey(t *testing.T) {
	yes := true
	r := func(name string, m profiles.Match, s ...Setting) Realised {
		return Realised{Backend: "cfs", Groups: []RealisedGroup{{Name: name, Match: m, Settings: s, Notes: []string{"note of " + name}}}}
	}
	nice := Setting{Name: "nice", Value: "-3"}
	cases := []struct {
		name  string
		a, b  Realised
		equal bool
	}{
		{"names and notes do not count", r("a", profiles.Match{All: true}, nice), r("b", profiles.Match{All: true}, nice), true},
		{"prefix order does not count", r("a", profiles.Match{CommPrefix: []string{"x", "y"}}), r("a", profiles.Match{CommPrefix: []string{"y", "x"}}), true},
		{"an empty list is no list", r("a", profiles.Match{CommPrefix: []string{}, All: true}), r("a", profiles.Match{All: true}), true},
		{"settings count", r("a", profiles.Match{All: true}, nice), r("a", profiles.Match{All: true}), false},
		{"matchers count", r("a", profiles.Match{CommPrefix: []string{"x"}}, nice), r("a", profiles.Match{CommPrefix: []string{"x"}, GroupLeader: &yes}, nice), false},
		{"backend counts", r("a", profiles.Match{All: true}, nice), Realised{Backend: "sched_ext", Groups: r("a", profiles.Match{All: true}, nice).Groups}, false},
		{"nothing set is one state, whatever the matchers", r("a", profiles.Match{CommPrefix: []string{"x"}}), r("b", profiles.Match{All: true}), true},
		{"nothing set on another backend too", r("a", profiles.Match{All: true}), Realised{Backend: "sched_ext"}, true},
	}
	if k := r("a", profiles.Match{All: true}).Key(); k != UnchangedKey {
		t.Errorf("a realisation that sets nothing: key %q, want UnchangedKey", k)
	}
	for _, c := range cases {
		if eq := c.a.Key() == c.b.Key(); eq != c.equal {
			t.Errorf("%s: equal keys %t, want %t:\n%s\n%s", c.name, eq, c.equal, c.a.Key(), c.b.Key())
		}
	}
}
