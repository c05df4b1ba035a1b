// Command bench is the planted-effect benchmark (refine/planted): a jsonl
// benchmark whose latency depends on the scheduling state the backend
// actually put the target's threads in, read from /proc, and on nothing
// refine tells it.
//
//	bench -state DIR [-explain]
//
// DIR/config.json (written by the harness, one per refine run) says which
// process to read, which threads carry the planted parameter and what it
// is worth:
//
//	{"pid": 123, "seed": 7, "prefix": "lat-", "when": "slice_below_default",
//	 "effect": {"0": 0.3, "1": -0.1}, "cv": 0.1,
//	 "throughput_cost": 0, "throughput_cv": 0.05}
//
// Each trial prints three jsonl lines: p50_ms = 10 × (1 − effect[bg]) ×
// noise when every thread whose comm starts with prefix is in the planted
// state, else 10 × noise; throughput = 1000 × (1 − throughput_cost) × noise
// in the planted state, else 1000 × noise; errors = 0. bg is the number of
// refine's background spinners running beside the trial (processes named
// temper-bg-spinner whose parent is this benchmark's parent, the harness);
// a level missing from effect is worth 0. The noise is lognormal with
// median 1 and the coefficient of variation cv (throughput_cv), drawn from
// a generator seeded with (seed, the trial's number): DIR/counter counts
// the trials, so a run is reproducible given its seed and its order of
// trials.
//
// The planted states ("when"):
//
//	slice_below_default  se.slice (/proc/PID/task/TID/sched) below the
//	                     main thread's, which no group of the profile
//	                     touches and so has the kernel's default slice
//	nice_below_zero      nice (field 19 of /proc/PID/task/TID/stat) < 0
//
// -explain writes what it read of every thread to stderr: comm, policy
// (stat field 41), nice, se.slice, Cpus_allowed_list.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Config is DIR/config.json.
type Config struct {
	Pid            int                `json:"pid"`
	Seed           uint64             `json:"seed"`
	Prefix         string             `json:"prefix"`
	When           string             `json:"when"`
	Effect         map[string]float64 `json:"effect"`
	CV             float64            `json:"cv"`
	ThroughputCost float64            `json:"throughput_cost"`
	ThroughputCV   float64            `json:"throughput_cv"`
}

const (
	baseMs         = 10.0
	baseThroughput = 1000.0
	spinnerName    = "temper-bg-spinner" // refine/background's argv[0]
)

// thread is what the benchmark reads of one thread.
type thread struct {
	tid     int
	comm    string
	policy  int
	nice    int
	sliceNs int64
	cpus    string
}

func main() {
	state := flag.String("state", "", "the harness's directory: config.json and the trial counter")
	explain := flag.Bool("explain", false, "write what was read of every thread to stderr")
	flag.Parse()
	if err := run(*state, *explain); err != nil {
		fmt.Fprintln(os.Stderr, "planted bench:", err)
		os.Exit(1)
	}
}

func run(dir string, explain bool) error {
	if dir == "" {
		return errors.New("-state DIR is required")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return err
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	threads, err := readThreads(c.Pid)
	if err != nil {
		return err
	}
	if explain {
		for _, t := range threads {
			fmt.Fprintf(os.Stderr, "%d %s policy=%d nice=%d slice=%d cpus=%s\n", t.tid, t.comm, t.policy, t.nice, t.sliceNs, t.cpus)
		}
	}
	planted, err := inState(c, threads)
	if err != nil {
		return err
	}
	bg, err := spinners()
	if err != nil {
		return err
	}
	n, err := nextTrial(dir)
	if err != nil {
		return err
	}
	// ChaCha8 rather than PCG: its streams for neighbouring trial
	// numbers are unrelated, where PCG's first draws are not.
	var key [32]byte
	binary.LittleEndian.PutUint64(key[0:], c.Seed)
	binary.LittleEndian.PutUint64(key[8:], n)
	rng := rand.New(rand.NewChaCha8(key))
	p50 := baseMs * lognormal(rng, c.CV)
	tput := baseThroughput * lognormal(rng, c.ThroughputCV)
	if planted {
		p50 *= 1 - c.Effect[strconv.Itoa(bg)]
		tput *= 1 - c.ThroughputCost
	}
	if explain {
		fmt.Fprintf(os.Stderr, "trial %d: planted=%v bg=%d\n", n, planted, bg)
	}
	fmt.Printf("{\"metric\": \"p50_ms\", \"value\": %.6g}\n", p50)
	fmt.Printf("{\"metric\": \"throughput\", \"value\": %.6g}\n", tput)
	fmt.Printf("{\"metric\": \"errors\", \"value\": 0}\n")
	return nil
}

// lognormal draws a factor with median 1 and coefficient of variation cv.
func lognormal(rng *rand.Rand, cv float64) float64 {
	sigma := math.Sqrt(math.Log1p(cv * cv))
	return math.Exp(sigma * rng.NormFloat64())
}

// inState says whether every thread of the planted group is in the
// planted state.
func inState(c Config, threads []thread) (bool, error) {
	var main *thread
	var group []thread
	for i, t := range threads {
		if t.tid == c.Pid {
			main = &threads[i]
		}
		if strings.HasPrefix(t.comm, c.Prefix) {
			group = append(group, t)
		}
	}
	if len(group) == 0 {
		return false, fmt.Errorf("pid %d has no thread named %s*", c.Pid, c.Prefix)
	}
	for _, t := range group {
		switch c.When {
		case "slice_below_default":
			if main == nil {
				return false, fmt.Errorf("pid %d: no main thread to read the default slice from", c.Pid)
			}
			// A SCHED_IDLE thread (no se.slice) keeps the default slice.
			if t.sliceNs < 0 || t.sliceNs >= main.sliceNs {
				return false, nil
			}
		case "nice_below_zero":
			if t.nice >= 0 {
				return false, nil
			}
		default:
			return false, fmt.Errorf("config.json: when %q: want slice_below_default or nice_below_zero", c.When)
		}
	}
	return true, nil
}

// readThreads reads every thread of pid.
func readThreads(pid int) ([]thread, error) {
	base := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	var out []thread
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		t, err := readThread(filepath.Join(base, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // exited between the listing and the read
		}
		if err != nil {
			return nil, fmt.Errorf("thread %d: %w", tid, err)
		}
		t.tid = tid
		out = append(out, t)
	}
	return out, nil
}

func readThread(dir string) (thread, error) {
	var t thread
	comm, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return t, err
	}
	t.comm = strings.TrimSuffix(string(comm), "\n")
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return t, err
	}
	// Fields after the comm, which may hold spaces and parentheses: the
	// last ')' ends it, and the next field is field 3 (state).
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return t, fmt.Errorf("stat: %q", s)
	}
	f := strings.Fields(s[i+1:])
	field := func(n int) (int, error) {
		if n-3 >= len(f) {
			return 0, fmt.Errorf("stat has no field %d", n)
		}
		return strconv.Atoi(f[n-3])
	}
	if t.nice, err = field(19); err != nil {
		return t, err
	}
	if t.policy, err = field(41); err != nil {
		return t, err
	}
	// The kernel prints no se.slice for a SCHED_IDLE thread: -1.
	if t.sliceNs, err = keyed(filepath.Join(dir, "sched"), "se.slice", ':'); errors.Is(err, errNoKey) {
		t.sliceNs = -1
	} else if err != nil {
		return t, err
	}
	st, err := os.Open(filepath.Join(dir, "status"))
	if err != nil {
		return t, err
	}
	defer st.Close()
	sc := bufio.NewScanner(st)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			t.cpus = strings.TrimSpace(v)
		}
	}
	return t, sc.Err()
}

// keyed reads the integer of the line "key <sep> value" in path.
func keyed(path, key string, sep byte) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(l, string(sep))
		if ok && strings.TrimSpace(k) == key {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: %w %s", path, errNoKey, key)
}

// errNoKey is wrapped when a file has no line for the key.
var errNoKey = errors.New("no line")

// spinners counts refine's background spinners started by this
// benchmark's parent: the trial's background level.
func spinners() (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	parent := strconv.Itoa(os.Getppid())
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone
		}
		argv0, _, _ := strings.Cut(string(cmd), "\x00")
		if argv0 != spinnerName {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == parent { // field 4: ppid
			n++
		}
	}
	return n, nil
}

// nextTrial returns the number of this trial (0, 1, …) from DIR/counter,
// incremented under an exclusive lock.
func nextTrial(dir string) (uint64, error) {
	f, err := os.OpenFile(filepath.Join(dir, "counter"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, err
	}
	b := make([]byte, 32)
	k, _ := f.ReadAt(b, 0)
	var n uint64
	if s := strings.TrimSpace(string(b[:k])); s != "" {
		if n, err = strconv.ParseUint(s, 10, 64); err != nil {
			return 0, fmt.Errorf("counter: %w", err)
		}
	}
	if err := f.Truncate(0); err != nil {
		return 0, err
	}
	if _, err := f.WriteAt([]byte(strconv.FormatUint(n+1, 10)+"\n"), 0); err != nil {
		return 0, err
	}
	return n, nil
}
