package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/testkit"
)

// holdEnv names the ledger a re-executed test binary creates and holds until
// its standard input closes (TestMain).
const holdEnv = "LEDGER_TEST_HOLD"

func TestMain(m *testing.M) {
	if path := os.Getenv(holdEnv); path != "" {
		w, err := Create(path, header())
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("holding")
		bufio.NewReader(os.Stdin).ReadString('\n')
		w.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hold starts a second process writing a new ledger at path; it holds it
// until the returned process is killed or its stdin closed.
func hold(t *testing.T, path string) *exec.Cmd { return testkit.Hold(t, holdEnv, path).Cmd }

// TestLockTwoProcesses: while another process writes a ledger, Append and
// CheckUnlocked refuse it naming that process, and Append changes nothing
// (not even a torn last line); once the holder dies (SIGKILL), the ledger is
// free again.
func TestLockTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	holder := hold(t, path)
	// A torn line the holder would be in the middle of writing.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"type":"note","text":"TORN`)
	f.Close()
	before, _ := os.ReadFile(path)

	wantErr := func(what string, err error) {
		t.Helper()
		var le *LockError
		if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || le.Pid != holder.Process.Pid || le.Path != path {
			t.Fatalf("%s: got %v; want a *LockError for %s naming pid %d", what, err, path, holder.Process.Pid)
		}
		if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("pid %d (", holder.Process.Pid)) || strings.Contains(msg, "\n") {
			t.Fatalf("%s: message %q", what, msg)
		}
	}
	wantErr("CheckUnlocked", CheckUnlocked(path))
	w, err := Append(path)
	if err == nil {
		w.Close()
	}
	wantErr("Append", err)
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatalf("a refused Append changed the ledger:\n%q\n%q", before, after)
	}

	holder.Process.Kill()
	holder.Wait()
	if err := CheckUnlocked(path); err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	w, err = Append(path)
	if err != nil {
		t.Fatalf("Append after the holder died: %v", err)
	}
	defer w.Close()
	if after, _ := os.ReadFile(path); strings.Contains(string(after), "TORN") || !strings.HasSuffix(string(after), "\n") {
		t.Fatalf("torn line not cut: %q", after)
	}
}

// TestLockTwoWriters: in one process too, a second Writer (another open file)
// is refused while the first is open, and allowed once it is closed.
func TestLockTwoWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	if w2, err := Append(path); !errors.Is(err, ErrLocked) {
		if err == nil {
			w2.Close()
		}
		t.Fatalf("second writer: %v, want ErrLocked", err)
	}
	if err := CheckUnlocked(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("CheckUnlocked with a writer open: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2, err := Append(path)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	if err := w2.Append(Note{Text: "resumed"}); err != nil {
		t.Fatal(err)
	}
	w2.Close()
	if l, err := Read(path); err != nil || len(l.Notes) != 1 {
		t.Fatalf("read back: %+v, %v", l, err)
	}
}

// TestLongLine: a line longer than MaxLine is refused without reading on.
func TestLongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"type":"note","text":"` + strings.Repeat("x", MaxLine) + `"}` + "\n")
	f.Close()
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line 2: line longer than the %d-byte limit", MaxLine)) {
		t.Fatalf("Read: %v", err)
	}
}

func TestFlockHolder(t *testing.T) {
	locks := `1: POSIX  ADVISORY  WRITE 700 08:01:42 0 EOF
2: FLOCK  ADVISORY  READ 701 08:01:42 0 EOF
3: FLOCK  ADVISORY  WRITE 702 103:02:42 0 EOF
3: -> FLOCK  ADVISORY  WRITE 703 08:01:42 0 EOF
4: FLOCK  ADVISORY  WRITE 704 08:01:42 0 EOF
`
	sc := bufio.NewScanner(strings.NewReader(locks))
	if pid := flockHolder(sc, 8<<8|1, 42); pid != 704 {
		t.Fatalf("holder %d, want 704", pid)
	}
}
