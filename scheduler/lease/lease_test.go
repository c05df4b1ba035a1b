package lease

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/internal/testkit"
)

// holdEnv names the state directory in which a re-executed test binary takes
// the lease, holding it until its standard input closes (TestMain).
const holdEnv = "LEASE_TEST_HOLD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		l, err := Acquire(context.Background(), dir, Options{Command: "holder", StateFile: "/run/x/apply-1.json"})
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("holding")
		bufio.NewReader(os.Stdin).ReadString('\n')
		if err := l.Release(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hold starts a second process that takes the lease in dir.
func hold(t *testing.T, dir string) testkit.Holder { return testkit.Hold(t, holdEnv, dir) }

func startOf(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := procfs.FS{}.Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.StartTime
}

func TestAcquireRelease(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state") // created by Acquire
	l, err := Acquire(context.Background(), dir, Options{Command: "refine p.toml"})
	if err != nil {
		t.Fatal(err)
	}
	o := l.Owner()
	if o.Pid != os.Getpid() || o.Start != startOf(t, os.Getpid()) || o.Command != "refine p.toml" || o.Since.IsZero() {
		t.Errorf("owner %+v", o)
	}
	var onDisk Owner
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	if err := json.Unmarshal(b, &onDisk); err != nil || onDisk != o {
		t.Errorf("record on disk %s (%v), want %+v", b, err, o)
	}
	if _, err := Acquire(context.Background(), dir, Options{Wait: time.Second}); err == nil || !strings.Contains(err.Error(), "holds it already") {
		t.Errorf("second Acquire by the holder: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FileName)); len(b) != 0 {
		t.Errorf("released lease still holds %q", b)
	}
	l, err = Acquire(context.Background(), dir, Options{OnStale: func(Owner) error { t.Error("a released lease is not stale"); return nil }})
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l.Release()
}

// TestHeldByAnotherProcess: a live owner's lease is refused at once, or after
// the wait, naming the owner; a waiter gets it when the owner releases it.
func TestHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	h := hold(t, dir)
	pid := h.Cmd.Process.Pid
	for _, wait := range []time.Duration{0, 300 * time.Millisecond} {
		begin := time.Now()
		_, err := Acquire(context.Background(), dir, Options{Wait: wait, OnStale: func(Owner) error { t.Error("OnStale for a live owner"); return nil }})
		var he *HeldError
		if !errors.As(err, &he) || !errors.Is(err, ErrHeld) || he.Owner.Pid != pid || he.Owner.Command != "holder" || he.Owner.Start != startOf(t, pid) {
			t.Fatalf("wait %v: %v; want a *HeldError naming pid %d", wait, err, pid)
		}
		if took := time.Since(begin); took < wait || took > wait+time.Second {
			t.Errorf("wait %v took %v", wait, took)
		}
		msg := err.Error()
		if !strings.Contains(msg, fmt.Sprintf("pid %d (holder) since ", pid)) || !strings.Contains(msg, filepath.Join(dir, FileName)) || strings.Contains(msg, "\n") {
			t.Errorf("message %q", msg)
		}
		t.Logf("wait %v: %v", wait, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := Acquire(ctx, dir, Options{Wait: time.Minute}); !errors.Is(err, ErrHeld) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}

	time.AfterFunc(300*time.Millisecond, func() { h.Release() })
	begin := time.Now()
	l, err := Acquire(context.Background(), dir, Options{Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("waiting for the owner to release: %v", err)
	}
	t.Logf("got the lease after %v", time.Since(begin))
	l.Release()
}

// TestStaleTakeover: a SIGKILLed owner's lease is taken over only after
// OnStale, given the dead owner's record, succeeds.
func TestStaleTakeover(t *testing.T) {
	dir := t.TempDir()
	h := hold(t, dir)
	pid, start := h.Cmd.Process.Pid, startOf(t, h.Cmd.Process.Pid)
	h.Cmd.Process.Kill()
	h.Cmd.Wait()

	if _, err := Acquire(context.Background(), dir, Options{}); !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d (holder)", pid)) {
		t.Fatalf("no OnStale: %v", err)
	}
	revertErr := errors.New("cpuset busy")
	if _, err := Acquire(context.Background(), dir, Options{OnStale: func(Owner) error { return revertErr }}); !errors.Is(err, ErrStale) || !errors.Is(err, revertErr) {
		t.Fatalf("failed OnStale: %v", err)
	}
	var got Owner
	l, err := Acquire(context.Background(), dir, Options{OnStale: func(o Owner) error { got = o; return nil }})
	if err != nil {
		t.Fatalf("stale takeover: %v", err)
	}
	defer l.Release()
	if got.Pid != pid || got.Start != start || got.Command != "holder" || got.StateFile != "/run/x/apply-1.json" {
		t.Errorf("OnStale got %+v, want pid %d start %d", got, pid, start)
	}
	if l.Owner().Pid != os.Getpid() {
		t.Errorf("owner after takeover: %+v", l.Owner())
	}
}

// TestRecordWithoutLock: a record nobody holds the lock for is stale when its
// pid is gone or was reused (another start time), and held when the process
// it names is alive.
func TestRecordWithoutLock(t *testing.T) {
	one := startOf(t, 1)
	for _, tc := range []struct {
		name  string
		owner Owner
		stale bool
	}{
		{"pid reused", Owner{Pid: 1, Start: one + 1, Command: "old"}, true},
		{"pid gone", Owner{Pid: 1 << 22, Start: 5, Command: "old"}, true}, // above pid_max's limit
		{"owner alive", Owner{Pid: 1, Start: one, Command: "init"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b, _ := json.Marshal(tc.owner)
			if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o644); err != nil {
				t.Fatal(err)
			}
			called := false
			l, err := Acquire(context.Background(), dir, Options{OnStale: func(o Owner) error { called = o == tc.owner; return nil }})
			if tc.stale {
				if err != nil || !called {
					t.Fatalf("got %v (OnStale called with the record: %v); want a takeover", err, called)
				}
				l.Release()
				return
			}
			if !errors.Is(err, ErrHeld) || called {
				t.Fatalf("got %v; want ErrHeld without OnStale", err)
			}
		})
	}
}

func TestCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, FileName), []byte("{not json"), 0o644)
	if _, err := Acquire(context.Background(), dir, Options{}); err == nil || !strings.Contains(err.Error(), "owner record") {
		t.Fatalf("corrupt record: %v", err)
	}
}
