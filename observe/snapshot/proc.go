package snapshot

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// ThreadState is what /proc said about one thread at one moment.
//
// Counters are cumulative since the thread started, so the interesting numbers
// are the differences between a thread's Begin and End (see Thread.Delta).
type ThreadState struct {
	Comm  string `json:"comm"`
	State string `json:"state"` // one letter: R, S, D, T, t, X, Z, P, I
	CPU   int    `json:"cpu"`   // CPU the thread last ran on (stat field 39)

	// CPUsAllowedList is Cpus_allowed_list from status as the kernel wrote it
	// ("0-3,8"); CPUsAllowed is the same set expanded.
	CPUsAllowedList string `json:"cpus_allowed_list"`
	CPUsAllowed     []int  `json:"cpus_allowed"`

	Policy     string `json:"policy"`     // SCHED_OTHER, SCHED_FIFO, ..., SCHED_EXT
	PolicyNum  int    `json:"policy_num"` // stat field 41 as the kernel numbers it
	Nice       int    `json:"nice"`       // stat field 19
	RTPriority int    `json:"rt_priority"`

	VoluntaryCtxtSwitches    int64 `json:"voluntary_ctxt_switches"`
	NonvoluntaryCtxtSwitches int64 `json:"nonvoluntary_ctxt_switches"`
	UtimeNs                  int64 `json:"utime_ns"` // user CPU time; clock-tick resolution
	StimeNs                  int64 `json:"stime_ns"` // system CPU time; clock-tick resolution

	Cgroup ThreadCgroup `json:"cgroup"`
}

// ThreadCgroup is a thread's place in the cgroup hierarchies, as
// /proc/<pid>/task/<tid>/cgroup reports it (paths relative to the hierarchy
// root, not to a mount point). An empty field means that hierarchy is not
// mounted or the thread's line for it was absent.
type ThreadCgroup struct {
	V2    string `json:"v2,omitempty"`     // the "0::" line
	V1CPU string `json:"v1_cpu,omitempty"` // the v1 hierarchy holding the cpu controller
}

// procStat is the part of a /proc/<pid>/stat line the snapshot keeps.
type procStat struct {
	PID        int
	Comm       string
	State      string
	Utime      int64 // clock ticks
	Stime      int64 // clock ticks
	Nice       int
	StartTicks int64 // clock ticks after boot
	CPU        int
	RTPriority int
	Policy     int
}

// parseStat parses one /proc/<pid>/stat line. The command name sits between
// the first '(' and the last ')': it may itself contain spaces, parentheses
// and digits, so the fields are counted from the last ')'.
func parseStat(line string) (procStat, error) {
	line = strings.TrimRight(line, "\n")
	open := strings.IndexByte(line, '(')
	closing := strings.LastIndexByte(line, ')')
	if open < 0 || closing < open {
		return procStat{}, errors.New("stat line has no (comm)")
	}
	var st procStat
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	if err != nil {
		return procStat{}, fmt.Errorf("stat pid: %w", err)
	}
	st.PID = pid
	st.Comm = line[open+1 : closing]
	// rest[0] is field 3 (state); field N is rest[N-3].
	rest := strings.Fields(line[closing+1:])
	const last = 41 // policy
	if len(rest) < last-2 {
		return procStat{}, fmt.Errorf("stat line has %d fields, want at least %d", len(rest)+2, last)
	}
	field := func(n int) string { return rest[n-3] }
	st.State = field(3)
	ints := []struct {
		n   int
		dst *int64
	}{{14, &st.Utime}, {15, &st.Stime}, {22, &st.StartTicks}}
	for _, f := range ints {
		v, err := strconv.ParseInt(field(f.n), 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("stat field %d: %w", f.n, err)
		}
		*f.dst = v
	}
	small := []struct {
		n   int
		dst *int
	}{{19, &st.Nice}, {39, &st.CPU}, {40, &st.RTPriority}, {41, &st.Policy}}
	for _, f := range small {
		v, err := strconv.Atoi(field(f.n))
		if err != nil {
			return procStat{}, fmt.Errorf("stat field %d: %w", f.n, err)
		}
		*f.dst = v
	}
	return st, nil
}

// procStatus is the part of /proc/<pid>/status the snapshot keeps.
type procStatus struct {
	Tgid            int
	CPUsAllowedList string
	Voluntary       int64
	Nonvoluntary    int64
}

// parseStatus parses /proc/<pid>/status ("Key:\tvalue" lines). Every field
// it keeps must be present: a kernel that lacks one is too old to trust the
// rest.
func parseStatus(data []byte) (procStatus, error) {
	var st procStatus
	seen := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		var err error
		switch key {
		case "Tgid":
			st.Tgid, err = strconv.Atoi(val)
		case "Cpus_allowed_list":
			st.CPUsAllowedList = val
		case "voluntary_ctxt_switches":
			st.Voluntary, err = strconv.ParseInt(val, 10, 64)
		case "nonvoluntary_ctxt_switches":
			st.Nonvoluntary, err = strconv.ParseInt(val, 10, 64)
		default:
			continue
		}
		if err != nil {
			return procStatus{}, fmt.Errorf("status %s: %w", key, err)
		}
		seen++
	}
	if seen < 4 {
		return procStatus{}, errors.New("status lacks one of Tgid, Cpus_allowed_list, voluntary_ctxt_switches, nonvoluntary_ctxt_switches")
	}
	return st, nil
}

// parseProcCgroup parses /proc/<pid>/cgroup into the v2 path and the path
// in the v1 hierarchy that holds the cpu controller.
func parseProcCgroup(data []byte) (ThreadCgroup, error) {
	v1, v2, err := processCgroupPaths(data)
	if err != nil {
		return ThreadCgroup{}, err
	}
	return ThreadCgroup{V2: v2, V1CPU: v1["cpu"]}, nil
}

// processCgroupPaths parses /proc/<pid>/cgroup, whose lines are
// "hierarchy-id:controllers:path": the v2 line is "0::/path", and each v1 line
// names the comma-separated controllers of its hierarchy. It returns the v1
// path keyed by controller name, and the v2 path.
func processCgroupPaths(data []byte) (v1 map[string]string, v2 string, err error) {
	v1 = map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		id, rest, ok := strings.Cut(line, ":")
		ctrls, path, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 {
			return nil, "", fmt.Errorf("cgroup line %q: want id:controllers:path", line)
		}
		if id == "0" && ctrls == "" {
			v2 = path
			continue
		}
		for c := range strings.SplitSeq(ctrls, ",") {
			v1[c] = path
		}
	}
	return v1, v2, nil
}

// policyNames are the kernel's scheduling policy numbers (uapi/linux/sched.h).
var policyNames = map[int]string{
	0: "SCHED_OTHER",
	1: "SCHED_FIFO",
	2: "SCHED_RR",
	3: "SCHED_BATCH",
	5: "SCHED_IDLE",
	6: "SCHED_DEADLINE",
	7: "SCHED_EXT",
}

// PolicyName names a scheduling policy number; an unknown one reads SCHED_<n>.
func PolicyName(policy int) string {
	if n, ok := policyNames[policy]; ok {
		return n
	}
	return "SCHED_" + strconv.Itoa(policy)
}

// procReader reads threads from a proc file system. ticks is the kernel's
// USER_HZ, the unit of utime, stime and starttime.
type procReader struct {
	proc  string // "/proc" on a live system
	ticks int64
}

// threadRecord is a thread as read once: its identity and its state.
type threadRecord struct {
	Tid, Tgid  int
	StartTicks int64
	State      ThreadState
}

// errGone marks a process or thread that exited while it was being read.
var errGone = errors.New("exited")

// readProcess reads every thread of process tgid. A thread that exits while
// the directory is walked is left out; a process that is gone yields errGone.
func (p procReader) readProcess(tgid int) ([]threadRecord, error) {
	dir := filepath.Join(p.proc, strconv.Itoa(tgid))
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		if isGone(err) {
			return nil, fmt.Errorf("process %d: %w", tgid, errGone)
		}
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, "status"), err)
	}
	st, err := parseStatus(status)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, "status"), err)
	}
	if st.Tgid != tgid {
		return nil, fmt.Errorf("%d is a thread of process %d, not a process", tgid, st.Tgid)
	}
	taskDir := filepath.Join(dir, "task")
	ents, err := os.ReadDir(taskDir)
	if err != nil {
		if isGone(err) {
			return nil, fmt.Errorf("process %d: %w", tgid, errGone)
		}
		return nil, fmt.Errorf("read %s: %w", taskDir, err)
	}
	var out []threadRecord
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		rec, err := p.readThread(filepath.Join(taskDir, e.Name()), tgid, tid)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("process %d: %w", tgid, errGone)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tid < out[j].Tid })
	return out, nil
}

// readThread reads one /proc/<tgid>/task/<tid> directory.
func (p procReader) readThread(dir string, tgid, tid int) (threadRecord, error) {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			if isGone(err) {
				return nil, errGone
			}
			return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, name), err)
		}
		return b, nil
	}
	statB, err := read("stat")
	if err != nil {
		return threadRecord{}, err
	}
	statusB, err := read("status")
	if err != nil {
		return threadRecord{}, err
	}
	cgB, err := read("cgroup")
	if err != nil {
		return threadRecord{}, err
	}
	if len(statB) == 0 || len(statusB) == 0 {
		// A task that is being reaped can return empty files.
		return threadRecord{}, errGone
	}
	stat, err := parseStat(string(statB))
	if err != nil {
		return threadRecord{}, fmt.Errorf("read %s: %w", filepath.Join(dir, "stat"), err)
	}
	status, err := parseStatus(statusB)
	if err != nil {
		return threadRecord{}, fmt.Errorf("read %s: %w", filepath.Join(dir, "status"), err)
	}
	cg, err := parseProcCgroup(cgB)
	if err != nil {
		return threadRecord{}, fmt.Errorf("read %s: %w", filepath.Join(dir, "cgroup"), err)
	}
	cpus, err := ParseCPUList(status.CPUsAllowedList)
	if err != nil {
		return threadRecord{}, fmt.Errorf("read %s: Cpus_allowed_list: %w", filepath.Join(dir, "status"), err)
	}
	return threadRecord{
		Tid:        tid,
		Tgid:       tgid,
		StartTicks: stat.StartTicks,
		State: ThreadState{
			Comm:                     stat.Comm,
			State:                    stat.State,
			CPU:                      stat.CPU,
			CPUsAllowedList:          status.CPUsAllowedList,
			CPUsAllowed:              cpus,
			Policy:                   PolicyName(stat.Policy),
			PolicyNum:                stat.Policy,
			Nice:                     stat.Nice,
			RTPriority:               stat.RTPriority,
			VoluntaryCtxtSwitches:    status.Voluntary,
			NonvoluntaryCtxtSwitches: status.Nonvoluntary,
			UtimeNs:                  ticksToNs(stat.Utime, p.ticks),
			StimeNs:                  ticksToNs(stat.Stime, p.ticks),
			Cgroup:                   cg,
		},
	}, nil
}

// isGone reports whether err is what reading a vanished /proc entry returns.
func isGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// ticksToNs converts clock ticks to nanoseconds without overflowing for any
// realistic tick count.
func ticksToNs(ticks, hz int64) int64 {
	if hz <= 0 {
		return 0
	}
	return ticks/hz*1e9 + ticks%hz*1e9/hz
}

// defaultClockTicks is USER_HZ on every Linux architecture in use.
const defaultClockTicks = 100

// atClkTck is the auxiliary vector entry holding the clock tick rate.
const atClkTck = 17

// clockTicks returns USER_HZ as the kernel handed it to this process in the
// auxiliary vector, the way sysconf(_SC_CLK_TCK) does, or 100 if it cannot
// be read. auxv is a sequence of (type, value) pairs of native words.
func clockTicks(auxv []byte) int64 {
	const word = strconv.IntSize / 8
	r := bytes.NewReader(auxv)
	for {
		var typ, val uint64
		if word == 8 {
			if binary.Read(r, binary.NativeEndian, &typ) != nil || binary.Read(r, binary.NativeEndian, &val) != nil {
				break
			}
		} else {
			var t, v uint32
			if binary.Read(r, binary.NativeEndian, &t) != nil || binary.Read(r, binary.NativeEndian, &v) != nil {
				break
			}
			typ, val = uint64(t), uint64(v)
		}
		if typ == 0 {
			break
		}
		if typ == atClkTck && val > 0 && val < 1e6 {
			return int64(val)
		}
	}
	return defaultClockTicks
}

// readFirstLine returns the first line of a small file, trimmed.
func readFirstLine(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if sc.Scan() {
		return strings.TrimSpace(sc.Text()), nil
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return "", nil
}
