package profiles

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeProfile(t *testing.T, path string, p *Profile) {
	t.Helper()
	data, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	writeProfile(t, filepath.Join(dir, "svc", "8cpu-4c-smt2.toml"), prof("svc", smt8))
	writeProfile(t, filepath.Join(dir, "svc", "any.toml"), prof("svc", Shape{}))
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("profiles"), 0o644)
	os.WriteFile(filepath.Join(dir, "svc", ".any.toml.tmp-123"), []byte("partial"), 0o644)
	cs, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || !strings.HasSuffix(cs[0].Source, "svc/8cpu-4c-smt2.toml") || cs[0].Builtin {
		t.Errorf("%+v", cs)
	}

	cases := []struct {
		name, path string
		p          *Profile
		want       string
	}{
		{"id mismatch", "other/any.toml", prof("svc", Shape{}), `id "svc" does not match its directory "other"`},
		{"shape mismatch", "svc/4c.toml", prof("svc", smt8), "machine_shape is 8cpu-4c-smt2 but the file is named 4c.toml"},
		{"not in a directory", "svc.toml", prof("svc", Shape{}), "profiles live at <id>/<shape-key>.toml"},
	}
	for _, c := range cases {
		d := t.TempDir()
		writeProfile(t, filepath.Join(d, c.path), c.p)
		_, err := LoadDir(d)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: got %v, want %q naming %s", c.name, err, c.want, c.path)
		}
	}

	d := t.TempDir()
	os.MkdirAll(filepath.Join(d, "svc"), 0o755)
	os.WriteFile(filepath.Join(d, "svc", "any.toml"), []byte("schema_version = 1\nid = \"svc\"\nbogus = 1\n"), 0o644)
	if _, err := LoadDir(d); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "any.toml:3: bogus") {
		t.Errorf("got %v", err)
	}
	if _, err := LoadDir(filepath.Join(d, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v", err)
	}
}
