package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"temper.codes/temper-train/profiles"
)

// profilesRepo lays the synthesize goldens out as a profiles repository:
// four ids with one shape, and workload with three.
func profilesRepo(t *testing.T) (dir string, files map[string]string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "profiles")
	files = map[string]string{}
	srcs, err := filepath.Glob("../../synthesize/testdata/*.toml")
	if err != nil || len(srcs) != 7 {
		t.Fatalf("synthesize goldens: %v, %d files", err, len(srcs))
	}
	for _, src := range srcs {
		p, err := profiles.Load(src)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, p.ID, p.MachineShape.Key()+".toml")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		key := p.ID + ".toml"
		if p.ID == "workload" {
			key = p.ID + "_" + p.MachineShape.Key() + ".toml"
		}
		files[key] = path
	}
	return dir, files
}

// TestProfilesExportHelm exports a whole repository: every profile under
// its key, byte for byte; a single-shape id's entry is exactly what
// synthesize --export helm writes for it (its golden); the printed helm
// commands name every file and delete the single-shape key of the id with
// several shapes.
func TestProfilesExportHelm(t *testing.T) {
	repo, files := profilesRepo(t)
	out := filepath.Join(t.TempDir(), "helm")
	code, stdout, stderr := runCLI("profiles", "export", "--helm", out, repo)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	t.Logf("stdout:\n%s", stdout)
	values, err := os.ReadFile(filepath.Join(out, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Agent struct {
			Profiles map[string]string `yaml:"profiles"`
		} `yaml:"agent"`
	}
	if err := yaml.Unmarshal(values, &v); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	if len(v.Agent.Profiles) != len(files) {
		t.Errorf("%d profiles in values.yaml, want %d", len(v.Agent.Profiles), len(files))
	}
	for key, path := range files {
		want, _ := os.ReadFile(path)
		if v.Agent.Profiles[key] != string(want) {
			t.Errorf("agent.profiles[%q] is not %s byte for byte", key, path)
		}
		flag := "--set-file 'agent.profiles." + strings.ReplaceAll(key, ".", `\.`) + "'=" + path
		if !strings.Contains(stdout, flag) {
			t.Errorf("stdout lacks %s", flag)
		}
	}
	if !strings.Contains(stdout, `--set 'agent.profiles.workload\.toml'=null`) {
		t.Error("the single-shape key of workload is not deleted")
	}
	if !strings.Contains(stdout, "helm upgrade temper deploy/helm/temper --reuse-values -f "+filepath.Join(out, "values.yaml")) {
		t.Error("stdout lacks the values-file command")
	}
	// One rule: the repository export of redis is synthesize's export.
	golden, err := os.ReadFile("../../synthesize/testdata/redis-snapshot.values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, entry, _ := strings.Cut(string(golden), "  profiles:\n")
	if !strings.Contains(string(values), entry) {
		t.Errorf("the redis entry differs from synthesize --export helm's:\n%s", entry)
	}
}

func TestProfilesExportErrors(t *testing.T) {
	repo, _ := profilesRepo(t)
	if err := os.WriteFile(filepath.Join(repo, "stray.toml"), []byte("id = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no --helm", []string{"profiles", "export", repo}, exitUsage, "export needs --helm DIR"},
		{"not a directory", []string{"profiles", "export", "--helm", t.TempDir(), filepath.Join(repo, "nope")}, exitFailure, "not a directory"},
		{"stray file", []string{"profiles", "export", "--helm", t.TempDir(), repo}, exitFailure, "stray.toml: profiles live at <id>/<shape-key>.toml"},
		{"empty", []string{"profiles", "export", "--helm", t.TempDir(), empty}, exitFailure, "holds no profiles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(tc.args...)
			first, _, _ := strings.Cut(stderr, "\n")
			if code != tc.code || !strings.Contains(first, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}
