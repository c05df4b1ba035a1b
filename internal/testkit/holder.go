package testkit

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"testing"
)

// Holder is a second process of the test binary that holds something (a
// lock, a lease) until Release closes its stdin or the test kills Cmd.
type Holder struct {
	Cmd   *exec.Cmd
	stdin io.Closer
}

// Release closes the holder's stdin: a holder reading it then lets go.
func (h Holder) Release() error { return h.stdin.Close() }

// Hold re-runs the test binary with env=value in its environment (no test
// runs: the package's TestMain sees env and holds) and waits for it to print
// "holding" on a line of its own. The process is killed and reaped when the
// test ends.
func Hold(t testing.TB, env, value string) Holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+value)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "holding\n" {
		t.Fatalf("holder: %q", line)
	}
	return Holder{Cmd: cmd, stdin: stdin}
}
