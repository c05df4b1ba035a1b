// Package need states what a test needs from the machine it runs on: root,
// a program, CPUs, a cgroup hierarchy. Where a need is unmet the test does
// not pass quietly:
//
//   - on a developer machine it is skipped, loudly;
//   - under CI (the environment variable CI is non-empty; .ci/run sets it)
//     it fails, because `make test` installs and builds everything the tests
//     need (scripts/setup.sh, scripts/kube-bins.sh, scripts/vm-kernel.sh),
//     so a test that skips there would pass by skipping.
//
// Either way the test reports the same one line:
//
//	TestName needs WHAT: FIX
//
// where FIX says what to install or how to run.
package need

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"

	"temper.codes/temper-train/internal/mountinfo"
)

// TB is the part of testing.TB this package uses.
type TB interface {
	Helper()
	Name() string
	Skip(args ...any)
	Fatal(args ...any)
}

// inCI reports whether the tests run under CI, where every need must be met.
func inCI() bool { return os.Getenv("CI") != "" }

// Unmet ends the test because it needs what and does not have it: a skip on
// a developer machine, a failure under CI. fix says what to do about it.
// Every other function of this package ends in Unmet, so the rule and the
// message live here only.
func Unmet(t TB, what, fix string) {
	t.Helper()
	msg := fmt.Sprintf("%s needs %s: %s", t.Name(), what, fix)
	if inCI() {
		t.Fatal(msg)
	} else {
		t.Skip(msg)
	}
}

// Root needs the test to run as root; why says what for ("to load BPF").
func Root(t TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unmet(t, "root "+why, "run the tests as root (sudo make test)")
	}
}

// Tool needs the program name on PATH, from the Debian package pkg (which
// scripts/setup.sh installs), and returns its path.
func Tool(t TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unmet(t, name, fmt.Sprintf("apt-get install %s (scripts/setup.sh installs it)", pkg))
	}
	return p
}

// CPUs needs n CPUs this process may run on.
func CPUs(t TB, n int) {
	t.Helper()
	if have := runtime.NumCPU(); have < n {
		Unmet(t, fmt.Sprintf("%d CPUs", n), fmt.Sprintf("this machine gives the tests %d; run them on a larger one", have))
	}
}

// Cores needs n physical cores where the machine has have (the caller
// counts them with the topology reader it tests against).
func Cores(t TB, n, have int) {
	t.Helper()
	if have < n {
		Unmet(t, fmt.Sprintf("%d physical cores", n), fmt.Sprintf("this machine has %d; run the tests on a larger one", have))
	}
}

// CgroupV1 needs a cgroup v1 hierarchy with the cpu controller.
func CgroupV1(t TB) {
	t.Helper()
	if !hasCgroup(t, func(m mountinfo.Mount) bool {
		return m.FSType == "cgroup" && slices.Contains(m.SuperOptions, "cpu")
	}) {
		Unmet(t, "a cgroup v1 hierarchy with the cpu controller", "run the tests on a host that mounts one (cgroup v1 or hybrid)")
	}
}

// CgroupV2 needs a cgroup2 mount.
func CgroupV2(t TB) {
	t.Helper()
	if !hasCgroup(t, func(m mountinfo.Mount) bool { return m.FSType == "cgroup2" }) {
		Unmet(t, "a cgroup2 mount", "run the tests on a host that mounts one (cgroup v2 or hybrid)")
	}
}

func hasCgroup(t TB, match func(mountinfo.Mount) bool) bool {
	t.Helper()
	all, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(all, match)
}

// File needs the file at path, which fix says how to make.
func File(t TB, what, path, fix string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Unmet(t, fmt.Sprintf("%s (%s)", what, path), fix)
	}
}
