package testkit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestStartServer: a server that exits is seen to exit before it is ready,
// and one that runs is stopped (its process group) when the test ends.
func TestStartServer(t *testing.T) {
	var pid int
	t.Run("runs", func(t *testing.T) {
		s := StartServer(t, "sh", "-c", "echo started; exec sleep 60")
		s.WaitReady(t, 10*time.Second, func() bool { return strings.Contains(s.output(), "started") })
		pid = s.Cmd.Process.Pid
	})
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server %d still there after its test: %v", pid, err)
	}
	t.Run("exits", func(t *testing.T) {
		s := StartServer(t, "sh", "-c", "exit 3")
		if err := waitReady(10*time.Second, s.Exited, func() bool { return false }); err == nil || !strings.Contains(err.Error(), "exited") {
			t.Errorf("waitReady = %v, want an error saying the server exited", err)
		}
	})
}
