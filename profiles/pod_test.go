package profiles

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadPod(t *testing.T) {
	cases := []struct {
		name   string
		json   string
		want   PodInfo
		errHas string // "" for none
	}{
		{name: "kubectl output",
			json: `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db", "annotations": {"temper.codes/workload-profile": "mysql-innodb"}},
  "spec": {"containers": [{"name": "db", "image": "mysql:8"}, {"name": "side", "image": "envoy:1"}]}, "status": {"phase": "Running"}}`,
			want: PodInfo{Annotations: map[string]string{AnnotationProfile: "mysql-innodb"}, Images: []string{"mysql:8", "envoy:1"}}},
		{name: "no kind, no annotations", json: `{"spec": {"containers": [{"image": "redis:7"}]}}`, want: PodInfo{Images: []string{"redis:7"}}},
		{name: "syntax error names the line", json: "{\"kind\": \"Pod\",\n \"metadata\": }", errHas: "not a pod as kubectl get pod -o json prints it: line 2: invalid character"},
		{name: "type error names the field", json: "{\"kind\": \"Pod\",\n \"metadata\": 3}", errHas: "line 2: metadata: JSON number where an object is expected"},
		{name: "nested field", json: `{"spec": {"containers": [{"image": 7}]}}`, errHas: "spec.containers.image: JSON number where a string is expected"},
		{name: "not an object", json: `[1]`, errHas: "the document: JSON array where an object is expected"},
		{name: "another kind", json: `{"kind": "Deployment"}`, errHas: `kind is "Deployment", want Pod`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pod.json")
			if err := os.WriteFile(path, []byte(c.json), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadPod(path)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) || !strings.HasPrefix(err.Error(), path+": ") {
					t.Fatalf("err %v, want %s: …%s…", err, path, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Images, c.want.Images) || len(got.Annotations) != len(c.want.Annotations) ||
				got.Annotations[AnnotationProfile] != c.want.Annotations[AnnotationProfile] {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
	if _, err := ReadPod(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCandidates(t *testing.T) {
	builtins := len(BuiltinCandidates())
	if cs, err := Candidates(""); err != nil || len(cs) != builtins {
		t.Fatalf("Candidates(\"\") = %d, %v; want the %d builtins", len(cs), err, builtins)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "redis"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "redis", "any.toml"), []byte("schema_version = 1\nid = \"redis\"\n[[thread_groups]]\nname = \"all\"\nmatch = { all = true }\ntreatment = \"latency\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, err := Candidates(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != builtins+1 || cs[builtins].Builtin || cs[builtins].Profile.ID != "redis" {
		t.Errorf("got %d candidates, last %+v; want the builtins then redis from %s", len(cs), cs[len(cs)-1], dir)
	}
	if _, err := Candidates(filepath.Join(dir, "nope")); err == nil {
		t.Error("a missing directory is not an error")
	}
}

func TestParseMillicores(t *testing.T) {
	cases := []struct {
		in     string
		want   int
		errHas string
	}{
		{"2250m", 2250, ""},
		{"2.25", 2250, ""},
		{"3", 3000, ""},
		{"lots", 0, "is not a CPU quantity"},
		{"0", 0, "want a positive CPU quantity"},
		{"-1", 0, "want a positive CPU quantity"},
		{"3000000", 0, "want a positive CPU quantity"},
	}
	for _, c := range cases {
		got, err := ParseMillicores(c.in)
		switch {
		case c.errHas == "" && (err != nil || got != c.want):
			t.Errorf("%q: %d, %v; want %d", c.in, got, err, c.want)
		case c.errHas != "" && (err == nil || !strings.Contains(err.Error(), c.errHas)):
			t.Errorf("%q: %v; want an error with %q", c.in, err, c.errHas)
		}
	}
}
