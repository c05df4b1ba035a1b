package profiles

import (
	"errors"
	"strings"
	"testing"
)

func prof(id string, s Shape, images ...string) *Profile {
	return &Profile{SchemaVersion: 1, ID: id, MachineShape: s, Fingerprint: Fingerprint{Images: images},
		ThreadGroups: []ThreadGroup{{Name: "all", Match: Match{All: true}, Treatment: Normal}}}
}

var smt8 = Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}

func TestResolve(t *testing.T) {
	cands := []Candidate{
		{Profile: prof("mysql-innodb", smt8, "mysql:*", "mariadb:*"), Source: "builtin/mysql-innodb.toml", Builtin: true},
		{Profile: prof("mysql-innodb", smt8), Source: "profiles/mysql-innodb/8cpu-4c-smt2.toml"},
		{Profile: prof("mysql-innodb", Shape{Cores: 4}), Source: "profiles/mysql-innodb/4c.toml"},
		{Profile: prof("redis", Shape{}, "redis:*"), Source: "builtin/redis.toml", Builtin: true},
		{Profile: prof("redis", Shape{Cores: 2}), Source: "profiles/redis/2c.toml"},
		{Profile: prof("redis", Shape{ThreadsPerCore: 2}), Source: "profiles/redis/smt2.toml"},
		{Profile: prof("generic", Shape{}, "*/*:*"), Source: "builtin/generic.toml", Builtin: true},
		{Profile: prof("special", Shape{}, "acme/special:*"), Source: "builtin/special.toml", Builtin: true},
	}
	cases := []struct {
		name    string
		pod     PodInfo
		machine Shape
		source  string // "" = no profile
		explain []string
		err     error
	}{
		{name: "annotation beats image",
			pod:     PodInfo{Annotations: map[string]string{AnnotationProfile: "redis"}, Images: []string{"mysql:8"}},
			machine: Shape{LogicalCPUs: 4, Cores: 2, ThreadsPerCore: 2},
			source:  "profiles/redis/2c.toml",
			explain: []string{"annotation temper.codes/workload-profile=redis selects id redis", "tie with file profiles/redis/smt2.toml (1 shape fields each) broken in favour of file profiles/redis/2c.toml"}},
		{name: "legacy annotation",
			pod:    PodInfo{Annotations: map[string]string{LegacyAnnotationProfile: "redis"}},
			source: "profiles/redis/2c.toml", machine: Shape{Cores: 2, ThreadsPerCore: 2},
			explain: []string{"annotation infera.io/workload-profile=redis selects id redis"}},
		{name: "current annotation wins over legacy",
			pod:     PodInfo{Annotations: map[string]string{LegacyAnnotationProfile: "redis", AnnotationProfile: "mysql-innodb"}},
			machine: smt8, source: "profiles/mysql-innodb/8cpu-4c-smt2.toml",
			explain: []string{"disagree: the current key wins"}},
		{name: "unknown annotation is an error, not a fall-through",
			pod: PodInfo{Annotations: map[string]string{AnnotationProfile: "mysql"}, Images: []string{"mysql:8"}},
			err: ErrUnknownProfile},
		{name: "annotated profile without this shape is an error",
			pod:     PodInfo{Annotations: map[string]string{AnnotationProfile: "mysql-innodb"}},
			machine: Shape{LogicalCPUs: 4, Cores: 2, ThreadsPerCore: 2}, err: ErrUnknownProfile},
		{name: "file overrides builtin with the same shape; most specific wins",
			pod:     PodInfo{Images: []string{"mariadb:11.4"}},
			machine: smt8, source: "profiles/mysql-innodb/8cpu-4c-smt2.toml",
			explain: []string{"image mariadb:11.4 matches \"mariadb:*\": selects id mysql-innodb",
				"file profiles/mysql-innodb/8cpu-4c-smt2.toml overrides builtin mysql-innodb",
				"file profiles/mysql-innodb/4c.toml is less specific (1 shape fields against 3)"}},
		{name: "less specific file when the specific one does not fit",
			pod:     PodInfo{Images: []string{"mysql:8"}},
			machine: Shape{LogicalCPUs: 4, Cores: 4, ThreadsPerCore: 1}, source: "profiles/mysql-innodb/4c.toml"},
		{name: "docker.io/library/ spelling",
			pod:    PodInfo{Images: []string{"docker.io/library/redis:7"}},
			source: "profiles/redis/2c.toml", machine: Shape{Cores: 2},
			explain: []string{"image docker.io/library/redis:7 (as redis:7) matches \"redis:*\""}},
		{name: "untagged image is :latest",
			pod:     PodInfo{Images: []string{"redis"}},
			machine: Shape{Cores: 8, ThreadsPerCore: 1}, source: "builtin/redis.toml"},
		{name: "longest glob wins among images",
			pod: PodInfo{Images: []string{"acme/special:1"}}, source: "builtin/special.toml",
			explain: []string{"also matched: generic"}},
		{name: "nothing matches",
			pod:     PodInfo{Images: []string{"nginx:1"}},
			explain: []string{"no profile applies"}},
		{name: "image-selected profile without this shape: none, not an error",
			pod:     PodInfo{Images: []string{"mysql:8"}},
			machine: Shape{Cores: 2},
			explain: []string{"no profile mysql-innodb fits a 2c machine"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, err := Resolve(cands, c.pod, c.machine)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("got %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if ch.Profile != nil {
				got = ch.Source
			}
			if got != c.source {
				t.Errorf("chose %q, want %q\n%s", got, c.source, strings.Join(ch.Explanation, "\n"))
			}
			all := strings.Join(ch.Explanation, "\n")
			for _, e := range c.explain {
				if !strings.Contains(all, e) {
					t.Errorf("explanation lacks %q:\n%s", e, all)
				}
			}
		})
	}
}

// TestResolveDeterministic: the order candidates come in does not change the
// choice.
func TestResolveDeterministic(t *testing.T) {
	a := Candidate{Profile: prof("x", Shape{Cores: 4}, "x:*"), Source: "b/x/4c.toml"}
	b := Candidate{Profile: prof("x", Shape{ThreadsPerCore: 2}), Source: "a/x/smt2.toml"}
	m := Shape{Cores: 4, ThreadsPerCore: 2}
	c1, _ := Resolve([]Candidate{a, b}, PodInfo{Images: []string{"x:1"}}, m)
	c2, _ := Resolve([]Candidate{b, a}, PodInfo{Images: []string{"x:1"}}, m)
	if c1.Source != c2.Source || c1.Source != "b/x/4c.toml" {
		t.Errorf("order-dependent: %s vs %s", c1.Source, c2.Source)
	}
}

func TestResolveBuiltins(t *testing.T) {
	ch, err := Resolve(BuiltinCandidates(), PodInfo{Images: []string{"postgres:16"}}, smt8)
	if err != nil || ch.Profile == nil || ch.Profile.ID != "postgres" || !ch.Builtin {
		t.Fatalf("%+v %v", ch, err)
	}
	ch, err = Resolve(BuiltinCandidates(), PodInfo{ProcessNames: []string{"memcached"}}, smt8)
	if err != nil || ch.Profile == nil || ch.Profile.ID != "memcached" {
		t.Fatalf("%+v %v", ch, err)
	}
}
