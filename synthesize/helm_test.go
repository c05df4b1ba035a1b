package synthesize

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// helmProfile parses a values file back with a YAML parser and returns
// agent.profiles[<id>.toml].
func helmProfile(t testing.TB, id string, values []byte) string {
	t.Helper()
	var v struct {
		Agent struct {
			Profiles map[string]string `yaml:"profiles"`
		} `yaml:"agent"`
	}
	if err := yaml.Unmarshal(values, &v); err != nil {
		t.Fatalf("values do not parse as YAML: %v\n%s", err, values)
	}
	s, ok := v.Agent.Profiles[HelmKey(id, "")]
	if !ok {
		t.Fatalf("no agent.profiles[%q] in\n%s", HelmKey(id, ""), values)
	}
	return s
}

func TestHelmValues(t *testing.T) {
	cases := []struct {
		name, toml string
		block      bool
	}{
		{"profile", "# generated\nschema_version = 1\nid = \"wl\"\n\n[traits]\nthreads = 13\n", true},
		{"no final newline", "# x\nid = \"wl\"", true},
		{"two final newlines", "# x\nid = \"wl\"\n\n", true},
		{"indented and tabbed lines", "# x\n  indented = 1\n\ttab = 2\n   \n", true},
		{"unicode", "# x\ndescription = \"数据库 — ok\"\n", true},
		{"line separator", "# x\ndescription = \"a\u2028b\"\n", false},
		{"carriage return", "# x\r\nid = \"wl\"\r\n", false},
		{"control character", "# x\nd = \"\x01\"\n", false},
		{"starts with a space", " id = \"wl\"\n", false},
		{"quotes and backslashes", "# \"q\" \\ \nid = 'x'\n", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			values, err := HelmValues("wl", []byte(c.toml))
			if err != nil {
				t.Fatal(err)
			}
			if got := helmProfile(t, "wl", values); got != c.toml {
				t.Errorf("round trip:\n got %q\nwant %q\n%s", got, c.toml, values)
			}
			if block := strings.Contains(string(values), `"wl.toml": |`); block != c.block {
				t.Errorf("block scalar %v, want %v:\n%s", block, c.block, values)
			}
		})
	}
	if _, err := HelmValues("Bad_ID", []byte("x")); err == nil {
		t.Error("a bad id is accepted")
	}
	if _, err := HelmValues("wl", []byte("\xff")); err == nil {
		t.Error("invalid UTF-8 is accepted")
	}
}

func TestHelmCommand(t *testing.T) {
	cases := map[string]string{
		"profiles/wl/8cpu-4c-smt2.toml": `helm upgrade temper deploy/helm/temper --reuse-values --set-file 'agent.profiles.wl\.toml'=profiles/wl/8cpu-4c-smt2.toml`,
		"my dir/it's.toml":              `helm upgrade temper deploy/helm/temper --reuse-values --set-file 'agent.profiles.wl\.toml'='my dir/it'\''s.toml'`,
	}
	for path, want := range cases {
		if got := HelmCommand("wl", path); got != want {
			t.Errorf("HelmCommand(%q):\n got %s\nwant %s", path, got, want)
		}
	}
}
