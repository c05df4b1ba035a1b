// Package tracefs records kernel scheduling events through the kernel's tracefs
// interface into ftrace text, the format observe's text reader reads.
//
// Every recording uses a private tracefs instance
// (/sys/kernel/tracing/instances/temper-<pid>-<n>) with its own ring buffer,
// event switches and tracing_on, so a recording never reads, clears, resizes or
// disables the global buffer that other tools (perf, trace-cmd, Perfetto, a
// person at a shell) may be using, and two recordings can run side by side. The
// instance, and the memory of its buffer, is released when the session is
// closed or when Start fails half-way.
//
// Recording needs root: tracefs control files are root-only, and tracefs itself
// may have to be mounted (Start mounts it at /sys/kernel/tracing when no tracefs
// is mounted anywhere; it leaves it mounted afterwards, as a boot-time mount
// would be, since other processes may start using it).
//
// A Session is not safe for concurrent use.
package tracefs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"temper.codes/temper-train/internal/mountinfo"
)

// DefaultRoot is where tracefs is mounted on current systems and where Start
// mounts it when it is not mounted.
const DefaultRoot = "/sys/kernel/tracing"

// DefaultEvents are the events Start enables when Options.Events is empty:
// everything observe needs to rebuild thread states (switches and wakeups),
// thread identities (creation, renames) and thread lifetimes (exit, free).
var DefaultEvents = []string{
	"sched/sched_switch",
	"sched/sched_waking",
	"sched/sched_wakeup_new",
	"task/task_newtask",
	"task/task_rename",
	"sched/sched_process_exit",
	"sched/sched_process_free",
}

// DefaultBufferKB is the per-CPU ring buffer size Start asks for when
// Options.BufferKB is zero: 64 MiB per CPU holds several seconds of a busy
// machine's scheduler events, so short recordings do not overwrite themselves.
const DefaultBufferKB = 65536

// instancePrefix names the instances this package creates, so stale ones left
// by a killed process can be recognised and removed.
const instancePrefix = "temper-"

// Errors Start returns for an unusable environment, for errors.Is. Their
// messages are written to read well after "tracefs: ".
var (
	// ErrNotRoot: the process lacks the privileges tracefs requires.
	ErrNotRoot = errors.New("recording needs root")
	// ErrNoTracefs: the kernel has no usable tracefs (not built in, or the
	// mount point is missing, or it has no instances directory).
	ErrNoTracefs = errors.New("tracefs not available")
	// ErrEventMissing: an event in Options.Events does not exist in this kernel.
	ErrEventMissing = errors.New("not available in this kernel")
)

// Options says what to record. The zero value records DefaultEvents with
// DefaultBufferKB per CPU and the tgid column.
type Options struct {
	// Events are "system/event" names under tracefs's events/ directory;
	// empty means DefaultEvents.
	Events []string
	// BufferKB is the ring buffer size per CPU in KiB; 0 means DefaultBufferKB.
	BufferKB int
	// NoRecordTGID turns off options/record-tgid. By default it is on, so every
	// line carries the thread-group id "(tgid)" column and threads can be
	// attributed to processes. (The field is negative so that the zero Options
	// gives the useful default.)
	NoRecordTGID bool
	// Clock, when set, is written to the instance's trace_clock ("boot",
	// "mono", "global", ...); empty keeps the kernel's default ("local").
	Clock string
	// Root is the tracefs mount point. Empty means find the mounted tracefs,
	// mounting it at DefaultRoot if none is mounted, and requires euid 0. Tests
	// set it to a fake directory tree.
	Root string
}

// Session is one recording in a private tracefs instance.
type Session struct {
	root    string // tracefs mount point
	name    string // instance name
	dir     string // root/instances/name
	events  []string
	stopped bool
	closed  bool
}

var instanceSeq atomic.Int64

// Start creates a private instance, configures it from opts, and turns
// recording on. On any error the instance is removed again.
func Start(opts Options) (*Session, error) {
	events := opts.Events
	if len(events) == 0 {
		events = DefaultEvents
	}
	for _, ev := range events {
		if err := checkEventName(ev); err != nil {
			return nil, err
		}
	}
	bufKB := opts.BufferKB
	if bufKB == 0 {
		bufKB = DefaultBufferKB
	}
	if bufKB < 0 {
		return nil, fmt.Errorf("tracefs: BufferKB %d is negative", bufKB)
	}
	root := opts.Root
	if root == "" {
		if err := checkRoot(os.Geteuid()); err != nil {
			return nil, err
		}
		var err error
		if root, err = findOrMount(); err != nil {
			return nil, err
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "instances")); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("tracefs: %w: %s has no instances directory (kernel too old?)", ErrNoTracefs, root)
	}
	// Check the events before allocating a buffer, so a kernel without one of
	// them costs nothing.
	for _, ev := range events {
		if _, err := os.Stat(filepath.Join(root, "events", ev, "enable")); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("tracefs: event %s %w", ev, ErrEventMissing)
			}
			return nil, fmt.Errorf("tracefs: event %s: %w", ev, err)
		}
	}
	removeStale(root)

	s := &Session{root: root, events: events}
	for {
		s.name = fmt.Sprintf("%s%d-%d", instancePrefix, os.Getpid(), instanceSeq.Add(1))
		s.dir = filepath.Join(root, "instances", s.name)
		err := os.Mkdir(s.dir, 0o755)
		if err == nil {
			break
		}
		if errors.Is(err, fs.ErrExist) {
			continue // left over by an earlier process with our pid
		}
		return nil, fmt.Errorf("tracefs: create instance: %w", permErr(err))
	}
	if err := s.configure(opts, bufKB); err != nil {
		if rerr := s.remove(); rerr != nil {
			return nil, fmt.Errorf("%w (and removing the instance failed: %v)", err, rerr)
		}
		return nil, err
	}
	return s, nil
}

// configure sets the new instance up and turns it on. Recording is kept off
// until every event is enabled, so the trace does not begin with a partial
// event set.
func (s *Session) configure(opts Options, bufKB int) error {
	if err := s.write("tracing_on", "0"); err != nil {
		return err
	}
	if err := s.write("buffer_size_kb", strconv.Itoa(bufKB)); err != nil {
		return err
	}
	if opts.Clock != "" {
		if err := s.write("trace_clock", opts.Clock); err != nil {
			return err
		}
	}
	tgid := "1"
	if opts.NoRecordTGID {
		tgid = "0"
	}
	if err := s.write("options/record-tgid", tgid); err != nil {
		return err
	}
	for _, ev := range s.events {
		if err := s.write(filepath.Join("events", ev, "enable"), "1"); err != nil {
			return err
		}
	}
	if err := s.write("trace", ""); err != nil { // opening with O_TRUNC clears the buffer
		return err
	}
	return s.write("tracing_on", "1")
}

// Name returns the instance's name under instances/.
func (s *Session) Name() string { return s.name }

// Dir returns the instance's directory.
func (s *Session) Dir() string { return s.dir }

// Stop turns recording off (tracing_on=0). The buffer keeps what was recorded
// until Close. Stopping twice is harmless.
func (s *Session) Stop() error {
	if s.closed {
		return fmt.Errorf("tracefs: instance %s: Stop after Close", s.name)
	}
	if s.stopped {
		return nil
	}
	if err := s.write("tracing_on", "0"); err != nil {
		return err
	}
	s.stopped = true
	return nil
}

// WriteTrace copies the instance's trace file, ftrace's merged, time-ordered
// text rendering of every CPU's buffer, to w. Reading does not consume the
// buffer. Call it after Stop: while recording is on the kernel pauses the
// instance during the read (options/pause-on-trace) and events are lost.
func (s *Session) WriteTrace(w io.Writer) error {
	if s.closed {
		return fmt.Errorf("tracefs: instance %s: WriteTrace after Close", s.name)
	}
	f, err := os.Open(filepath.Join(s.dir, "trace"))
	if err != nil {
		return fmt.Errorf("tracefs: read trace: %w", permErr(err))
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("tracefs: copy trace of instance %s: %w", s.name, err)
	}
	return nil
}

// Overruns returns, for every CPU, how many events the instance's buffer lost:
// the sum of per_cpu/cpuN/stats "overrun" (old events overwritten when the
// buffer wrapped), "commit overrun" (events dropped by too deeply nested
// writers) and "dropped events" (new events refused when overwrite is off). A
// complete recording has zero everywhere.
func (s *Session) Overruns() (map[int]int64, error) {
	if s.closed {
		return nil, fmt.Errorf("tracefs: instance %s: Overruns after Close", s.name)
	}
	dir := filepath.Join(s.dir, "per_cpu")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tracefs: list per-CPU stats: %w", permErr(err))
	}
	out := map[int]int64{}
	for _, e := range ents {
		cpu, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "cpu"))
		if err != nil || !strings.HasPrefix(e.Name(), "cpu") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "stats"))
		if err != nil {
			return nil, fmt.Errorf("tracefs: read %s stats: %w", e.Name(), permErr(err))
		}
		n, err := parseLost(b)
		if err != nil {
			return nil, fmt.Errorf("tracefs: %s stats: %w", e.Name(), err)
		}
		out[cpu] = n
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("tracefs: instance %s has no per_cpu/cpuN/stats", s.name)
	}
	return out, nil
}

// Close stops recording and removes the instance, freeing its buffer. Closing
// twice is harmless.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	var stopErr error
	if !s.stopped {
		stopErr = s.Stop()
	}
	if err := s.remove(); err != nil {
		return err
	}
	s.closed = true
	return stopErr
}

// remove deletes the instance directory. The kernel refuses (EBUSY) while a
// file of the instance is open; this package closes every file it opens, so
// that means another process has one open.
func (s *Session) remove() error {
	if err := syscall.Rmdir(s.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("tracefs: remove instance %s: %w", s.dir, err)
	}
	return nil
}

// write sets one control file of the instance.
func (s *Session) write(rel, val string) error {
	p := filepath.Join(s.dir, rel)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("tracefs: set %s: %w", rel, permErr(err))
	}
	if val != "" {
		_, err = f.Write([]byte(val + "\n"))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("tracefs: set %s to %q: %w", rel, val, err)
	}
	return nil
}

// checkRoot refuses to go on without root, before any file is touched, so the
// error says what is wrong instead of "permission denied" on some file.
func checkRoot(euid int) error {
	if euid != 0 {
		return fmt.Errorf("tracefs: %w (running as euid %d)", ErrNotRoot, euid)
	}
	return nil
}

// permErr marks permission failures with ErrNotRoot.
func permErr(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w: %w", ErrNotRoot, err)
	}
	return err
}

// checkEventName accepts "system/event" with two plain path elements.
func checkEventName(ev string) error {
	sys, name, ok := strings.Cut(ev, "/")
	bad := func(s string) bool { return s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\ \t\n") }
	if !ok || bad(sys) || bad(name) {
		return fmt.Errorf("tracefs: event %q is not of the form system/event (e.g. sched/sched_switch)", ev)
	}
	return nil
}

// parseLost sums the loss counters of a per_cpu/cpuN/stats file.
func parseLost(b []byte) (int64, error) {
	var total int64
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "overrun", "commit overrun", "dropped events":
			n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", strings.TrimSpace(key), err)
			}
			total += n
			found = true
		}
	}
	if !found {
		return 0, errors.New(`no "overrun:" line`)
	}
	return total, sc.Err()
}

// findOrMount returns the mount point of tracefs, mounting it at DefaultRoot
// when it is not mounted anywhere.
func findOrMount() (string, error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return "", fmt.Errorf("tracefs: find mount: %w", err)
	}
	points := tracefsMounts(mounts)
	for _, p := range points {
		if p == DefaultRoot {
			return p, nil
		}
	}
	if len(points) > 0 {
		return points[0], nil // e.g. only /sys/kernel/debug/tracing
	}
	if err := syscall.Mount("nodev", DefaultRoot, "tracefs", 0, ""); err != nil {
		switch {
		case errors.Is(err, syscall.ENODEV):
			return "", fmt.Errorf("tracefs: %w: the kernel has no tracefs (CONFIG_TRACING off?)", ErrNoTracefs)
		case errors.Is(err, syscall.ENOENT):
			return "", fmt.Errorf("tracefs: %w: %s does not exist (sysfs not mounted, or kernel without tracefs)", ErrNoTracefs, DefaultRoot)
		case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
			return "", fmt.Errorf("tracefs: %w: mount tracefs at %s: %v", ErrNotRoot, DefaultRoot, err)
		}
		return "", fmt.Errorf("tracefs: mount tracefs at %s: %w", DefaultRoot, err)
	}
	return DefaultRoot, nil
}

// tracefsMounts lists the mount points of tracefs in a mount table.
func tracefsMounts(mounts []mountinfo.Mount) []string {
	var out []string
	for _, m := range mounts {
		if m.FSType == "tracefs" {
			out = append(out, m.MountPoint)
		}
	}
	return out
}

// removeStale removes instances this package created in processes that no
// longer exist (killed before Close, e.g. by a test timeout), whose buffers
// would otherwise pin memory until reboot. Best effort: errors are ignored.
func removeStale(root string) {
	dir := filepath.Join(root, "instances")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, ok := stalePID(e.Name())
		if !ok || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); errors.Is(err, fs.ErrNotExist) {
			_ = syscall.Rmdir(filepath.Join(dir, e.Name()))
		}
	}
}

// stalePID parses "temper-<pid>-<n>".
func stalePID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, instancePrefix)
	if !ok {
		return 0, false
	}
	p, n, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return 0, false
	}
	if _, err := strconv.Atoi(n); err != nil {
		return 0, false
	}
	return pid, true
}
