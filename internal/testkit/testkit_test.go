package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "testdata", "workload", "workload.c")); err != nil {
		t.Errorf("RepoRoot %s holds no testdata/workload: %v", root, err)
	}
}

func TestWriteTree(t *testing.T) {
	root := t.TempDir()
	WriteTree(t, root, map[string]string{"a/b/c": "x", "d": "y"})
	for p, want := range map[string]string{"a/b/c": "x", "d": "y"} {
		got, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", p, got, err, want)
		}
	}
}

func TestFirstDiff(t *testing.T) {
	cases := []struct{ got, want, diff string }{
		{"a\nb\n", "a\nc\n", "line 2:\ngot:  \"b\"\nwant: \"c\""},
		{"a\n", "a\nb\n", "line 2:\ngot:  \"\"\nwant: \"b\""},
		{"a\nb", "a", "line 2:\ngot:  \"b\"\nwant: \"\""},
	}
	for _, c := range cases {
		if d := firstDiff(c.got, c.want); d != c.diff {
			t.Errorf("firstDiff(%q, %q) = %q, want %q", c.got, c.want, d, c.diff)
		}
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 || ports[0] == ports[1] || ports[1] == ports[2] || ports[0] == ports[2] {
		t.Errorf("FreePorts(3) = %v, want 3 distinct ports", ports)
	}
}
