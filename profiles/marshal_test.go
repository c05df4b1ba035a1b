package profiles

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/testkit"
)

// TestMarshalRoundTrip: Parse(Marshal(p)) == p for every builtin, and
// marshalling again gives the same bytes.
func TestMarshalRoundTrip(t *testing.T) {
	for _, p := range Builtins() {
		out, err := Marshal(p)
		if err != nil {
			t.Fatalf("%s: %v", p.ID, err)
		}
		q, err := Parse(p.ID+".toml", out)
		if err != nil {
			t.Fatalf("%s: re-parse: %v\n%s", p.ID, err, out)
		}
		if !reflect.DeepEqual(p, q) {
			t.Errorf("%s: round trip differs:\n%+v\n%+v", p.ID, p, q)
		}
		again, _ := Marshal(q)
		if !bytes.Equal(out, again) {
			t.Errorf("%s: Marshal is not stable", p.ID)
		}
	}
}

// TestMarshalGolden pins the layout synthesize's output will have: field
// order, inline match, [thread_groups.evidence], float spelling.
func TestMarshalGolden(t *testing.T) {
	yes := true
	p := &Profile{
		SchemaVersion: 1,
		ID:            "llama-cpp",
		Description:   "llama.cpp \"server\"\tinference",
		Fingerprint:   Fingerprint{Images: []string{"*/llama.cpp:*"}, Annotation: "llama-cpp"},
		MachineShape:  Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2},
		Traits:        Traits{CPURequestMillicores: 2250, HotThreads: 2, ObservedCPUsUsed: 1.23, ThrottledFraction: 1e-9},
		ThreadGroups: []ThreadGroup{
			{
				Name: "inference", Match: Match{CommPrefix: []string{"llama"}, GroupLeader: &yes},
				Treatment: Exclusive, CPUFraction: 0.85, ExclusiveCores: 2, Preempt: true,
				Evidence: &Evidence{Class: "sync_compute", Confidence: 0.9, Threads: 2, HotThreads: 2, CPUs: 2,
					RuntimeP99Us: 1.5e22, Families: []string{"llama"},
					Arithmetic: "ceil(0.85 × 2250m) = ceil(1.9125) = 2 cores ≤ 2 hot threads"},
			},
			{Name: "rest", Match: Match{}, Treatment: Yield},
		},
	}
	out, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "testdata/golden/marshal.toml", out)
	q, err := Parse("marshal.toml", out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Errorf("round trip differs:\n%+v\n%+v", p, q)
	}
}

func TestMarshalRejects(t *testing.T) {
	cases := []struct {
		name string
		p    *Profile
		want string
	}{
		{"nil", nil, "nil profile"},
		{"NaN", &Profile{ID: "x", Traits: Traits{ObservedCPUsUsed: math.NaN()}}, "traits.observed_cpus_used: NaN is not a finite number"},
		{"Inf in evidence", &Profile{ID: "x", ThreadGroups: []ThreadGroup{{Name: "a", Evidence: &Evidence{CPUs: math.Inf(1)}}}}, "thread_groups[0].evidence.cpus: +Inf"},
		{"invalid UTF-8", &Profile{ID: "x", ThreadGroups: []ThreadGroup{{Name: "a", Match: Match{CommPrefix: []string{"\xff"}}}}}, "thread_groups[0].match.comm_prefix[0]: \"\\xff\" is not valid UTF-8"},
	}
	for _, c := range cases {
		_, err := Marshal(c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestMarshalStrings: every character a comm or description may hold
// survives the trip.
func TestMarshalStrings(t *testing.T) {
	for _, s := range []string{"", `"`, `\`, "a\x00b", "\x7f", "tab\there", "new\nline", "é ü 漢", "GC Thread#0", `'single'`, `"""`} {
		p := &Profile{SchemaVersion: 1, ID: "x", Description: s, ThreadGroups: []ThreadGroup{{Name: s, Treatment: Normal, Match: Match{CommRegex: s}}}}
		out, err := Marshal(p)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		q, err := Parse("s.toml", out)
		if err != nil {
			t.Fatalf("%q: %v\n%s", s, err, out)
		}
		if q.Description != s || q.ThreadGroups[0].Name != s || q.ThreadGroups[0].Match.CommRegex != s {
			t.Errorf("%q came back as %q", s, q.Description)
		}
	}
}

func TestMarshalFloats(t *testing.T) {
	for _, f := range []float64{0.85, 0.9, 1, 2, 1e-9, 1e21, 123456789.125, 0.1 + 0.2, math.MaxFloat64, math.SmallestNonzeroFloat64, -0.5} {
		p := &Profile{SchemaVersion: 1, ID: "x", Traits: Traits{ObservedCPUsUsed: f}}
		out, err := Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse("f.toml", out)
		if err != nil {
			t.Fatalf("%v: %v\n%s", f, err, out)
		}
		if q.Traits.ObservedCPUsUsed != f {
			t.Errorf("%v came back as %v", f, q.Traits.ObservedCPUsUsed)
		}
	}
}
