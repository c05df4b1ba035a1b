// Package ledger is refine's record of a run: one JSON object per line,
// appended and fsynced line by line, so that a crash, SIGKILL or Ctrl-C
// loses at most the line being written and a later run can resume exactly
// where this one stopped. The first line is the Header; then trial starts
// and ends, decisions and notes in the order they happened.
//
// A trial's start record is written before the benchmark runs and its end
// record after; a start without an end is a trial that was cut off, and the
// run that resumes re-runs it (and says so in a note). A torn last line (the
// write that a SIGKILL interrupted) is dropped on reading.
package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/refine/stats"
)

// Version is the ledger format version written in the header. Version 2:
// rounds are races (stage "race", Decision.Race) and the final is
// group-sequential (Decision.Look); a version 1 ledger's screen and confirm
// decisions can be neither replayed nor reported by this engine.
const Version = 2

// Record kinds, the "type" of every line.
const (
	KindHeader     = "header"
	KindTrialStart = "trial_start"
	KindTrialEnd   = "trial_end"
	KindDecision   = "decision"
	KindNote       = "note"
	KindEnd        = "end"
	KindCycle      = "cycle"
	KindProcess    = "process"
)

// ErrMismatch is wrapped when a ledger given to resume belongs to another
// profile or machine.
var ErrMismatch = errors.New("ledger belongs to another run")

// Header is the ledger's first line: what was refined, where and how.
type Header struct {
	Type          string            `json:"type"`
	Version       int               `json:"version"`
	Start         time.Time         `json:"start"`
	Profile       string            `json:"profile"`      // the input profile's path
	ProfileHash   string            `json:"profile_hash"` // refine.Hash of its content
	ProfileCommit string            `json:"profile_commit,omitempty"`
	Machine       Machine           `json:"machine"`
	Backend       string            `json:"backend"`
	Tools         map[string]string `json:"tools"`   // tool → version line
	Command       []string          `json:"command"` // temper-train's own argv
	Bench         []string          `json:"bench"`   // the benchmark's argv
	Adapter       string            `json:"adapter"`
	Target        string            `json:"target"`
	// Rig describes the node-shaped rig the workload ran in (rig.Describe),
	// one line per part; empty when there was none.
	Rig  []string `json:"rig,omitempty"`
	Seed uint64   `json:"seed"`
	// NoCeilings says the sched_ext backend ran without its per-pod CPU
	// ceilings (cpu.max unenforced in its profile arms); false on other
	// backends, which have none.
	NoCeilings bool `json:"no_ceilings,omitempty"`
	// Config is the engine's configuration; a resumed run uses it, not its
	// own flags, so that it replays the same plan.
	Config json.RawMessage `json:"config"`
}

// Machine identifies the machine a run measured: a ledger from another
// machine cannot be resumed here.
type Machine = machine.Identity

// TrialStart is written just before a trial's benchmark runs.
type TrialStart struct {
	Type      string    `json:"type"`
	Trial     string    `json:"trial"` // unique, deterministic id: stage/comparison/index
	Stage     string    `json:"stage"` // calibration, race, final, canary
	Step      string    `json:"step,omitempty"`
	Arm       string    `json:"arm"`       // "A" (reference) or "B" (candidate)
	Candidate string    `json:"candidate"` // hash of the arm's profile; "stock" for no profile
	Params    string    `json:"params,omitempty"`
	Bg        int       `json:"bg"`
	Spinners  []int     `json:"spinners,omitempty"` // pids, reaped if the run dies
	Start     time.Time `json:"start"`
	Rerun     bool      `json:"rerun,omitempty"` // the trial was cut off before and runs again
}

// TrialEnd is written when a trial's benchmark has finished or failed.
// A failed trial has Error set and no metrics: it is never a number.
type TrialEnd struct {
	Type    string             `json:"type"`
	Trial   string             `json:"trial"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Groups are the arm's per-group scheduler counters over the trial,
	// per second of trial (the mechanism check reads them).
	Groups map[string]GroupRates `json:"groups,omitempty"`
	// CPU is what the target's pod cgroup consumed over the trial, when the
	// run could read it (a node rig); nil otherwise.
	CPU   *CPUUsage `json:"cpu,omitempty"`
	End   time.Time `json:"end"`
	Error string    `json:"error,omitempty"`
}

// CPUUsage is the target pod cgroup's CPU accounting over one trial: the
// usage and CFS bandwidth counters' change from before the benchmark to
// after it, and the quota in force.
type CPUUsage struct {
	Wall  float64 `json:"wall_s"`          // seconds between the readings
	Usage float64 `json:"usage_s"`         // CPU seconds the pod's tasks used
	Quota float64 `json:"quota,omitempty"` // the limit in CPUs (quota / period); 0: none
	// Periods are the quota periods in which the pod ran, Throttled those
	// that ended with its quota spent, ThrottledS the seconds its tasks were
	// held off the CPU for it (they stay 0 while sched_ext runs them).
	Periods    uint64  `json:"nr_periods"`
	Throttled  uint64  `json:"nr_throttled"`
	ThrottledS float64 `json:"throttled_s"`
	// Ceiling is, for an arm its backend ran outside CFS bandwidth control
	// (sched_ext's profile arms), the tightest CPU ceiling the scheduler
	// held the pod to, in CPUs: 0 when it held it to none (its ceilings
	// off, or no limit it saw). nil for an arm on CFS, where the kernel
	// enforces Quota, and in ledgers that did not record it.
	Ceiling *float64 `json:"ceiling,omitempty"`
}

// Cores is the CPUs the pod used on average: usage over wall time.
func (u CPUUsage) Cores() float64 {
	if u.Wall <= 0 {
		return 0
	}
	return u.Usage / u.Wall
}

// GroupRates are one thread group's scheduler counters during a trial,
// divided by the trial's length.
type GroupRates struct {
	CPUs            float64 `json:"cpus"` // runtime / wall time
	SwitchesPerS    float64 `json:"switches_per_s"`
	PreemptsPerS    float64 `json:"preempts_per_s"`
	SiblingBusyPerS float64 `json:"sibling_busy_per_s"`
}

// Interval is a point estimate with its confidence interval. A bound the
// sample is too small for is infinite.
type Interval struct {
	Lo     Num `json:"lo"`
	Center Num `json:"center"`
	Hi     Num `json:"hi"`
}

// Stats is i as the statistics package holds it.
func (i Interval) Stats() stats.Interval {
	return stats.Interval{Lo: float64(i.Lo), Center: float64(i.Center), Hi: float64(i.Hi)}
}

// Num is a float64 that survives JSON when it is infinite or NaN (written
// as the strings "+Inf", "-Inf", "NaN"; JSON numbers have neither).
type Num float64

// MarshalJSON writes finite values as numbers and the others as strings.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (n *Num) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("number %q: %w", s, err)
		}
		*n = Num(f)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// Decision is one comparison and what refine made of it.
type Decision struct {
	Type      string     `json:"type"`
	Stage     string     `json:"stage"`
	Round     int        `json:"round,omitempty"`
	Step      string     `json:"step,omitempty"`
	Group     string     `json:"group,omitempty"` // the group the step changes
	Candidate string     `json:"candidate"`
	Test      string     `json:"test"` // "mann-whitney-u"
	Metric    string     `json:"metric"`
	Bg        int        `json:"bg"`
	N         [2]int     `json:"n"` // reference, candidate
	Base      Interval   `json:"base"`
	Cand      Interval   `json:"cand"`
	Effect    Interval   `json:"effect"` // relative shift (cand − base) / base
	P         Num        `json:"p"`
	Verdict   string     `json:"verdict"`
	Guards    []Guard    `json:"guards,omitempty"`
	Mechanism *Mechanism `json:"mechanism,omitempty"`
	// Race is a candidate's standing in its round's race (Stage "race");
	// Look is the final comparison's look a decision of the common effect
	// was made at (Stage "final", Bg AllLevels).
	Race     *Race  `json:"race,omitempty"`
	Look     *Look  `json:"look,omitempty"`
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason"`
	Line     string `json:"line"` // the benchstat-style line printed
}

// AllLevels is a decision's Bg when it is about every background level at
// once: the final's common effect across the ladder.
const AllLevels = -1

// Race is where a candidate ended in its round's race. A race ranks; it
// tests nothing: Gain is an estimate with its standard error, never a
// p-value.
type Race struct {
	Rung  int `json:"rung"`  // 1-based rung the candidate ran last in
	Rungs int `json:"rungs"` // rungs the race had
	Rank  int `json:"rank"`  // 1-based rank among the candidates of that rung
	Of    int `json:"of"`
	// Trials are the candidate's own trials over every rung (its incumbent
	// trials are shared with the other candidates).
	Trials int `json:"trials"`
	// Gain is the estimated relative improvement of the metric over the
	// incumbent run beside it (positive is better, whichever way the
	// metric improves), over the rung it ended in, and GainSE its
	// standard error at the noise pooled over the races (NaN for a
	// candidate carried, not raced).
	Gain   Num `json:"gain"`
	GainSE Num `json:"gain_se"`
	// CarriedFrom is, for a candidate not raced again (verdict carried),
	// the round whose race measured it, and Basis how its gain carries
	// over: "state" (its kernel state raced then, by difference with the
	// winner) or "move" (its move raced then on a group no step has
	// touched since, groups' effects assumed to add).
	CarriedFrom int    `json:"carried_from,omitempty"`
	Basis       string `json:"basis,omitempty"`
	// Failed is, for a candidate dropped because the benchmark failed
	// under it, the benchmark's error.
	Failed string `json:"failed,omitempty"`
}

// Look is one look of the group-sequential final comparison.
type Look struct {
	Index int `json:"index"` // 1-based
	Of    int `json:"of"`
	// Alpha is the nominal one-sided level this look was held to (the
	// α-spending rule's share), Spent the level spent up to it.
	Alpha   Num    `json:"alpha"`
	Spent   Num    `json:"spent"`
	Outcome string `json:"outcome"` // continue, keep, drop
	// N is the final's planned n per arm and level at its last look,
	// sized from Noise (the σ of one trial's log value the race measured,
	// NaN if none); Detectable is the smallest effect that n had 90% power
	// for.
	N          int `json:"n"`
	Noise      Num `json:"noise"`
	Detectable Num `json:"detectable"`
}

// Shift is the decision's effect, the relative shift with its interval,
// written as every decision line writes it (stats.FormatEffect):
// "-7.2% [-11.0% -3.1%]".
func (d Decision) Shift() string { return stats.FormatEffect(d.Effect.Stats()) }

// Guard is one guard metric's check within a decision: non-inferiority,
// the loss's one-sided upper confidence bound (Worst) against the
// tolerated loss (Bound).
type Guard struct {
	Metric string  `json:"metric"`
	Bound  float64 `json:"bound"`
	// Regresses is set when harm beyond Bound is not excluded (the guard
	// vetoes).
	Regresses bool `json:"regresses"`
	P         Num  `json:"p"`
	// Worst is the upper confidence bound of the loss, in Effect's unit
	// (positive is worse).
	Worst Num `json:"worst"`
	// Effect is the relative shift, or with Count the change of the mean
	// per trial (a count such as errors, or a reference without a ratio).
	Effect Num  `json:"effect"`
	Count  bool `json:"count,omitempty"`
}

// Change is the guard's effect written as every report writes it
// (stats.FormatChange): "-3.1%", or "+4" errors per trial.
func (g Guard) Change() string {
	m := stats.Relative
	if g.Count {
		m = stats.Count
	}
	return stats.FormatChange(m, float64(g.Effect))
}

// WorstChange is the upper confidence bound of the guard's loss, worded
// as reports print it: "8.1% worse", "4 more per trial".
func (g Guard) WorstChange() string {
	w := float64(g.Worst)
	if g.Count {
		return strings.TrimPrefix(stats.FormatChange(stats.Count, w), "+") + " more per trial"
	}
	return strings.TrimPrefix(stats.FormatShift(w), "+") + " worse"
}

// Mechanism records whether the group a step changes moved the way its
// treatment predicts.
type Mechanism struct {
	Group     string `json:"group"`
	Counter   string `json:"counter"`   // what is compared: preempts_per_run (GroupRates PreemptsPerS / SwitchesPerS)
	Predicted string `json:"predicted"` // "down", "up"
	Base      Num    `json:"base"`      // medians per arm
	Cand      Num    `json:"cand"`
	P         Num    `json:"p"`
	Moved     bool   `json:"moved"`
	Suspect   bool   `json:"suspect"` // a metric win without the mechanism
	Note      string `json:"note,omitempty"`
}

// Note is free text worth keeping with the record: a re-run trial, reaped
// spinners, a noise warning.
type Note struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	Text string    `json:"text"`
}

// Process is written by the process that applies profiles, when it starts
// or resumes: the run that resumes after it died reads it back to revert
// what it left applied.
type Process struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	Pid  int       `json:"pid"`
	// StateFile is the cfs backend's state file, which records every
	// change the process made.
	StateFile string `json:"state_file,omitempty"`
}

// legacyProcessNote is how ledgers before the process record noted it.
const legacyProcessNote = "pid %d; cfs state file %s"

// End closes a run that finished (not one that was cut off).
type End struct {
	Type    string    `json:"type"`
	Time    time.Time `json:"time"`
	Reason  string    `json:"reason"`
	Refined string    `json:"refined,omitempty"` // path of the refined profile, if one was written
}

// Cycle is one cycle of the canary loop (temper-train canary), written to
// the loop's own ledger when the cycle ends; the cycle's trials and
// decisions are in the refine ledger it names.
type Cycle struct {
	Type  string    `json:"type"`
	Cycle int       `json:"cycle"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// State is passed, failed (rolled back), inconclusive (kept, more
	// trials next time) or unchanged (no candidate this cycle).
	State string `json:"state"`
	// Before and After are the hashes of the last good profile when the
	// cycle began and ended ("stock" for none).
	Before string `json:"before"`
	After  string `json:"after"`
	// Candidate is the hash of the profile the cycle checked, and
	// CandidatePath its file; Drill marks one planted on purpose
	// (a drill: a known-harmful profile that the check must roll back).
	Candidate     string   `json:"candidate,omitempty"`
	CandidatePath string   `json:"candidate_path,omitempty"`
	Drill         bool     `json:"drill,omitempty"`
	Drift         []string `json:"drift,omitempty"`
	Check         []string `json:"check,omitempty"` // the guard check's decision lines
	Reason        string   `json:"reason"`
	Ledger        string   `json:"ledger,omitempty"` // the cycle's refine ledger
	Commit        string   `json:"commit,omitempty"` // the git commit of an accepted profile
	Line          string   `json:"line"`             // the summary line printed
}

// Writer appends records to a ledger file, one fsynced line each.
type Writer struct {
	f    *os.File
	path string
}

// Create starts a new ledger at path with its header; an existing file is
// an error (a ledger is never overwritten: resume it or pick another name).
// The Writer holds the ledger's lock until Close (see Append).
func Create(path string, h Header) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if err := lock(f, path); err != nil {
		f.Close()
		return nil, err
	}
	w := &Writer{f: f, path: path}
	h.Type, h.Version = KindHeader, Version
	if err := w.Append(h); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return w, nil
}

// Append opens an existing ledger for appending (a resumed run). It first
// takes the ledger's lock, held until Close, so that a ledger has one writer:
// while another Writer holds it, Append changes nothing and returns a
// *LockError (wrapping ErrLocked) naming the holder. Then a torn last line is
// cut off so that the next record starts on a line of its own.
func Append(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if err := lock(f, path); err != nil {
		f.Close()
		return nil, err
	}
	if err := cutTorn(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("ledger %s: cut torn last line: %w", path, err)
	}
	return &Writer{f: f, path: path}, nil
}

// cutTorn truncates f after its last newline, reading only the tail: a torn
// line is at most MaxLine long, or it would not have been written.
func cutTorn(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	for end := size; end > 0; {
		n := min(end, 64<<10)
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, end-n); err != nil {
			return err
		}
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			end = end - n + int64(i) + 1
			if end == size {
				return nil
			}
			return f.Truncate(end)
		}
		if end -= n; size-end > MaxLine {
			return fmt.Errorf("last line longer than the %d-byte line limit", MaxLine)
		}
	}
	return f.Truncate(0)
}

// Path is the ledger's file name.
func (w *Writer) Path() string { return w.path }

// Append writes one record as a line and fsyncs it. Records are the types
// of this package; their Type field is filled in.
func (w *Writer) Append(rec any) error {
	switch r := rec.(type) {
	case Header:
		r.Type = KindHeader
		rec = r
	case TrialStart:
		r.Type = KindTrialStart
		rec = r
	case TrialEnd:
		r.Type = KindTrialEnd
		rec = r
	case Decision:
		r.Type = KindDecision
		rec = r
	case Note:
		r.Type = KindNote
		if r.Time.IsZero() {
			r.Time = time.Now().UTC()
		}
		rec = r
	case Cycle:
		r.Type = KindCycle
		rec = r
	case Process:
		r.Type = KindProcess
		if r.Time.IsZero() {
			r.Time = time.Now().UTC()
		}
		rec = r
	case End:
		r.Type = KindEnd
		if r.Time.IsZero() {
			r.Time = time.Now().UTC()
		}
		rec = r
	default:
		return fmt.Errorf("ledger: cannot record a %T", rec)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if _, err := w.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("ledger %s: %w", w.path, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("ledger %s: fsync: %w", w.path, err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// Ledger is a ledger read back.
type Ledger struct {
	Header    Header
	Starts    []TrialStart
	Ends      map[string]TrialEnd // by trial id, the last end of each
	Decisions []Decision
	Notes     []Note
	Cycles    []Cycle
	// Processes are the processes that applied profiles for the run, the
	// first first (older ledgers noted them as text; those notes are read
	// here too).
	Processes []Process
	End       *End
	// Torn is true when the last line was cut off mid-write.
	Torn bool
}

// Done returns the trials that ended without error, by id.
func (l *Ledger) Done() map[string]TrialEnd {
	done := map[string]TrialEnd{}
	for id, e := range l.Ends {
		if e.Error == "" {
			done[id] = e
		}
	}
	return done
}

// Open returns the trials started but never ended (cut off by a crash):
// the last start of each such trial.
func (l *Ledger) Open() []TrialStart {
	var open []TrialStart
	seen := map[string]bool{}
	for i := len(l.Starts) - 1; i >= 0; i-- {
		s := l.Starts[i]
		if seen[s.Trial] {
			continue
		}
		seen[s.Trial] = true
		if _, ok := l.Ends[s.Trial]; !ok {
			open = append(open, s)
		} else if e := l.Ends[s.Trial]; e.End.Before(s.Start) {
			open = append(open, s) // re-run started after a failed end
		}
	}
	return open
}

// Read parses a ledger. An unparsable line other than a torn last one is
// an error naming the file and line.
func Read(path string) (*Ledger, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	return parse(path, f)
}

// MaxLine caps a ledger line, in bytes: the largest records (a decision
// with its guards) are a few KiB.
const MaxLine = 4 << 20

func parse(path string, r io.Reader) (*Ledger, error) {
	l := &Ledger{Ends: map[string]TrialEnd{}}
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		b, err := readLine(br)
		if len(b) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("ledger %s line %d: %w", path, line, err)
		}
		torn := err == io.EOF // no newline: the write was cut off
		var kind struct {
			Type string `json:"type"`
		}
		if jerr := json.Unmarshal(b, &kind); jerr != nil {
			if torn {
				l.Torn = true
				break
			}
			return nil, fmt.Errorf("ledger %s line %d: not JSON: %v", path, line, jerr)
		}
		if line == 1 && kind.Type != KindHeader {
			return nil, fmt.Errorf("ledger %s line 1: want the header, got %q: not a refine ledger", path, kind.Type)
		}
		var derr error
		switch kind.Type {
		case KindHeader:
			if line != 1 {
				return nil, fmt.Errorf("ledger %s line %d: a second header", path, line)
			}
			derr = json.Unmarshal(b, &l.Header)
		case KindTrialStart:
			var s TrialStart
			derr = json.Unmarshal(b, &s)
			l.Starts = append(l.Starts, s)
		case KindTrialEnd:
			var e TrialEnd
			derr = json.Unmarshal(b, &e)
			l.Ends[e.Trial] = e
		case KindDecision:
			var d Decision
			derr = json.Unmarshal(b, &d)
			l.Decisions = append(l.Decisions, d)
		case KindNote:
			var n Note
			derr = json.Unmarshal(b, &n)
			l.Notes = append(l.Notes, n)
			p := Process{Type: KindProcess, Time: n.Time}
			if _, err := fmt.Sscanf(n.Text, legacyProcessNote, &p.Pid, &p.StateFile); err == nil {
				l.Processes = append(l.Processes, p)
			}
		case KindProcess:
			var p Process
			derr = json.Unmarshal(b, &p)
			l.Processes = append(l.Processes, p)
		case KindCycle:
			var c Cycle
			derr = json.Unmarshal(b, &c)
			l.Cycles = append(l.Cycles, c)
		case KindEnd:
			var e End
			derr = json.Unmarshal(b, &e)
			l.End = &e
		default:
			return nil, fmt.Errorf("ledger %s line %d: unknown record type %q", path, line, kind.Type)
		}
		if derr != nil {
			return nil, fmt.Errorf("ledger %s line %d: %s record: %v", path, line, kind.Type, derr)
		}
		if torn {
			break
		}
	}
	if l.Header.Type != KindHeader {
		return nil, fmt.Errorf("ledger %s: empty: no header", path)
	}
	if l.Header.Version != Version {
		return nil, fmt.Errorf("ledger %s line 1: version %d, this temper-train reads version %d (a ledger from another refine engine: its REPORT.md stands; start a new run rather than resume it)", path, l.Header.Version, Version)
	}
	return l, nil
}

// readLine reads one line with its newline, or up to the end of the input;
// a line longer than MaxLine is an error naming the cap, read no further.
func readLine(br *bufio.Reader) ([]byte, error) {
	var long []byte
	for {
		b, err := br.ReadSlice('\n')
		if long = append(long, b...); len(long) > MaxLine {
			return nil, fmt.Errorf("line longer than the %d-byte limit", MaxLine)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return long, err
		}
	}
}
