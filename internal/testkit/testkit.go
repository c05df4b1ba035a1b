// Package testkit holds what the repository's tests share: golden files and
// the one -update flag that rewrites them, the repository root, the
// testdata/workload binary, free ports, servers started for a test, file
// trees and cgroup trees. Only tests import it.
//
// What a test needs from the machine (root, a program, a cgroup hierarchy)
// is internal/need's: a skip on a developer machine, a failure under CI.
package testkit

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/need"
)

// update is the -update flag of every test binary that compares with golden
// files: `go test ./PKG -run TEST -update` rewrites them.
var update = flag.Bool("update", false, "rewrite the golden files instead of comparing with them")

// Update reports whether the test binary runs with -update, for tests that
// write their golden files in a way Golden does not.
func Update() bool { return *update }

// Golden compares got with the golden file at path, or, under -update,
// writes got there (creating its directory).
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run '%s' -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (if the change is meant, go test -run '%s' -update rewrites it; review the diff):\n%s",
			path, t.Name(), firstDiff(string(got), string(want)))
	}
}

// firstDiff shows the first line where got and want differ, with its
// number, or the whole of got when it is short.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("line %d:\ngot:  %q\nwant: %q", i+1, gl, wl)
		}
	}
	return "(the same lines; the files differ in bytes Split does not show)"
}

// RepoRoot returns the repository's root, the directory holding go.mod,
// found upwards from the working directory (a test's is its package's).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run the tests inside the repository")
		}
		dir = parent
	}
}

// RepoFile returns the path of rel, a path relative to the repository's
// root.
func RepoFile(t testing.TB, rel string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, rel)
}

// BuildC compiles the C program src with gcc into the test's temporary
// directory and returns the binary. Warnings fail the test: the programs
// are the tests' fixtures, and a warning is a bug in one.
func BuildC(t testing.TB, src string) string {
	t.Helper()
	gcc := need.Tool(t, "gcc", "gcc")
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	out, err := exec.Command(gcc, "-O2", "-Wall", "-Wextra", "-pthread", "-o", bin, src).CombinedOutput()
	if err != nil {
		t.Fatalf("gcc %s: %v\n%s", src, err, out)
	}
	if len(out) > 0 {
		t.Errorf("%s must build without warnings:\n%s", src, out)
	}
	return bin
}

// Workload returns the testdata/workload binary (13 named threads; its
// README says what each does): $TEMPER_WORKLOAD where set (the VM image
// has it prebuilt and no gcc), else built from the repository's source.
func Workload(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TEMPER_WORKLOAD"); p != "" {
		return p
	}
	return BuildC(t, RepoFile(t, "testdata/workload/workload.c"))
}

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago (held open together, so they differ).
func FreePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}

// Server is a server process a test started (StartServer); it is stopped
// when the test ends.
type Server struct {
	Cmd *exec.Cmd
	// Exited is closed when the process has exited.
	Exited <-chan struct{}
	log    string // its stdout and stderr
}

// StartServer starts argv in its own process group, its output to a file,
// and stops the group when the test ends: SIGTERM, then SIGKILL after 10 s.
// The process is killed too if the test binary dies.
func StartServer(t testing.TB, argv ...string) *Server {
	t.Helper()
	s := &Server{log: filepath.Join(t.TempDir(), "server.log")}
	log, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	s.Cmd = exec.Command(argv[0], argv[1:]...)
	s.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	s.Cmd.Stdout, s.Cmd.Stderr = log, log
	if err := s.Cmd.Start(); err != nil {
		log.Close()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	s.Exited = exited
	go func() { s.Cmd.Wait(); log.Close(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-s.Cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-s.Cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	return s
}

// WaitReady waits up to timeout until ready holds, and fails the test with
// the server's output if the server exits first or the time runs out.
func (s *Server) WaitReady(t testing.TB, timeout time.Duration, ready func() bool) {
	t.Helper()
	if err := waitReady(timeout, s.Exited, ready); err != nil {
		t.Fatalf("%s %v:\n%s", s.Cmd.Path, err, s.output())
	}
}

// WaitPort waits up to timeout until something accepts connections on
// 127.0.0.1:port, and fails the test if the time runs out or exited (nil:
// not watched) is closed first: the server exited.
func WaitPort(t testing.TB, port int, timeout time.Duration, exited <-chan struct{}) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitReady(timeout, exited, func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}); err != nil {
		t.Fatalf("the server for %s %v", addr, err)
	}
}

// waitReady polls ready until it holds, exited is closed or timeout passes.
func waitReady(timeout time.Duration, exited <-chan struct{}, ready func() bool) error {
	for deadline := time.Now().Add(timeout); !ready(); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			return errors.New("exited before it was ready")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v", timeout)
		}
	}
	return nil
}

// output is what the server has written so far.
func (s *Server) output() string {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// Must fails the test on a non-nil err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// WriteTree creates files (path relative to root → content) under root,
// with their directories.
func WriteTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// RemoveCgroupTree removes the cgroup root and every cgroup below it,
// deepest first. A cgroup whose last process has just been reaped can stay
// busy for a moment, so each removal is retried for a few seconds; one that
// still fails is a test error naming the processes left in it.
func RemoveCgroupTree(t testing.TB, root string) {
	t.Helper()
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if time.Now().After(deadline) {
				procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
				t.Errorf("remove test cgroup %s: %v (cgroup.procs: %q)", d, err, procs)
				break
			}
		}
	}
}
