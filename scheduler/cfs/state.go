package cfs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/internal/bounded"
	"temper.codes/temper-train/internal/mountinfo"
	"temper.codes/temper-train/internal/procfs"
)

// StateVersion is the state file format this package writes and reads.
const StateVersion = 1

// State is the content of a state file: which threads an apply changed
// and how to put each back. It is rewritten (atomically) before every
// change, so after a crash it lists at least everything that was changed.
type State struct {
	Version int    `json:"version"`
	Backend string `json:"backend"` // "cfs"
	Profile string `json:"profile"` // the profile's id
	// Pid and PidStart identify the apply process (start time as in
	// /proc/PID/stat field 22), so a revert can tell whether it still runs.
	Pid      int      `json:"pid"`
	PidStart uint64   `json:"pid_start_ticks"`
	Threads  []Record `json:"threads"` // threads with something changed, by tid
	// Cpusets are the cgroups whose cpusets lost the exclusive CPUs, in
	// the order narrowed (restored in reverse).
	Cpusets []Cpuset `json:"cpusets,omitempty"`
}

// Record is one changed thread.
type Record struct {
	Tid  int `json:"tid"`
	Tgid int `json:"tgid"`
	// Start is the thread's start time (/proc/TID/stat field 22, clock ticks
	// after boot): a tid whose start time differs is another thread now and
	// is never touched.
	Start    uint64   `json:"start_ticks"`
	Comm     string   `json:"comm"`
	Group    string   `json:"group"` // "" when no group matched
	Original Settings `json:"original"`
	Changed  Fields   `json:"changed"`
}

// owner is the process that applied.
type owner struct {
	Pid   int
	Start uint64
}

// writeState rewrites the state file from the tracked threads (and those
// whose revert failed).
func (a *applied) writeState() error {
	st := State{Version: StateVersion, Backend: Name, Profile: a.plan.Profile.ID,
		Pid: a.owner.Pid, PidStart: a.owner.Start, Threads: []Record{}}
	src := a.threads
	if a.reverted {
		src = a.failed
	}
	for _, th := range src {
		if th.Changed.any() {
			st.Threads = append(st.Threads, th.Record)
		}
	}
	slices.SortFunc(st.Threads, func(x, y Record) int { return x.Tid - y.Tid })
	st.Cpusets = a.narrowed
	return writeStateFile(a.statePath, &st)
}

func writeStateFile(path string, st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	b = append(b, '\n')
	err = atomicfile.Write(path, 0o600, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}

// maxStateBytes caps a state file: one record per changed thread is well
// under a KiB.
const maxStateBytes = 64 << 20

// ReadState reads and checks a state file.
func ReadState(path string) (*State, error) {
	b, err := bounded.ReadFile(path, maxStateBytes)
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	var st State
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("state file %s: not a temper-train apply state file: %w", path, err)
	}
	switch {
	case st.Version != StateVersion:
		return nil, fmt.Errorf("state file %s: version %d, this temper-train reads version %d", path, st.Version, StateVersion)
	case st.Backend != Name:
		return nil, fmt.Errorf("state file %s: written by backend %q, not %q", path, st.Backend, Name)
	}
	for _, r := range st.Threads {
		if r.Tid <= 0 || r.Start == 0 || len(r.Original.CPUs) == 0 && r.Changed.Affinity {
			return nil, fmt.Errorf("state file %s: thread record %+v is incomplete", path, r)
		}
	}
	return &st, nil
}

// Errors of Apply about its state file, for the caller to say how to choose
// another (apply names its --state flag). Test with errors.Is.
var (
	// ErrStateDir: the state file's directory cannot be created.
	ErrStateDir = errors.New("cannot create the state directory")
	// ErrStateExists: the state file is already there; revert it with
	// RevertFile or choose another path.
	ErrStateExists = errors.New("already exists, left by an apply that did not finish: revert it first")
)

// ErrOwnerRunning is returned by RevertFile when the apply that wrote the
// state file still runs: it reverts by itself when stopped, and two
// reverts racing would be worse than one.
var ErrOwnerRunning = errors.New("the apply that wrote it is still running")

// RevertFile restores every thread and cgroup cpuset a state file
// records, as Revert would have: threads that exited are skipped and tids reused by other threads
// are not touched (each reported through note), failures are joined and do
// not stop the others. The file is removed when everything is back, and
// rewritten with the threads that failed otherwise. A state file whose
// apply process still runs is refused with ErrOwnerRunning, and one naming a
// cgroup outside every cpuset hierarchy with ErrNotCpusetPath, in both cases
// before anything is written.
func RevertFile(path string, note func(string)) error {
	if note == nil {
		note = func(string) {}
	}
	st, err := ReadState(path)
	if err != nil {
		return err
	}
	if running(st.Pid, st.PidStart) {
		return fmt.Errorf("state file %s: %w (pid %d): stop it with Ctrl-C or kill -TERM %d and it reverts by itself", path, ErrOwnerRunning, st.Pid, st.Pid)
	}
	if len(st.Cpusets) > 0 {
		mounts, err := mountinfo.Read()
		if err != nil {
			return fmt.Errorf("state file %s: %w", path, err)
		}
		if err := checkCpusetPaths(st.Cpusets, mounts); err != nil {
			return fmt.Errorf("state file %s: %w; nothing was reverted", path, err)
		}
	}
	var errs []error
	var left []Record
	gone := map[string]int{}
	for _, r := range st.Threads {
		exited, err := revertRecord(r, note)
		if exited {
			gone[r.Comm]++
		}
		if err != nil {
			errs = append(errs, err)
			left = append(left, r)
		}
	}
	if len(gone) > 0 {
		note(exitedNote(gone))
	}
	leftSets, err := restoreCpusets(st.Cpusets, note)
	if err != nil {
		errs = append(errs, err)
	}
	if len(left) == 0 && len(leftSets) == 0 {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("remove state file: %w", err))
		}
	} else {
		st.Threads, st.Cpusets = left, leftSets
		if err := writeStateFile(path, st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ErrNoState is returned by RevertStale when the directory holds no state
// file.
var ErrNoState = errors.New("no state files")

// RevertStale reverts, with RevertFile, every state file in dir (what
// StatePath names there) whose apply no longer runs: one whose apply still
// runs is left to it, noted. It returns the files it reverted, in name
// order; failures are joined and do not stop the others. A dir without
// state files is ErrNoState.
func RevertStale(dir string, note func(string)) ([]string, error) {
	if note == nil {
		note = func(string) {}
	}
	files, err := filepath.Glob(filepath.Join(dir, "apply-*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoState, dir)
	}
	var done []string
	var errs []error
	for _, path := range files {
		err := RevertFile(path, note)
		switch {
		case err == nil:
			done = append(done, path)
		case errors.Is(err, ErrOwnerRunning):
			note(err.Error())
		default:
			errs = append(errs, err)
		}
	}
	return done, errors.Join(errs...)
}

// running reports whether process pid, started at start, is alive (a
// zombie that was killed and not yet reaped is not).
func running(pid int, start uint64) bool {
	st, err := procfs.FS{}.Stat(pid)
	return err == nil && st.StartTime == start && !st.Exited()
}
