package scx

// Checks of refine and train through this backend end to end, in make
// vmtest's VM: testdata/vmtest/init.sh runs temper-train there and calls
// these on what the run left (its ledger, REPORT.md, the target's threads,
// a log of sched_ext's state), each file named in the environment. Without
// those variables (outside the VM) they skip: they check a run, and there
// is none here.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/refine/ledger"
)

// vmRunFile is the file the environment variable names; the test skips
// without it.
func vmRunFile(t *testing.T, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("%s checks a temper-train run in make vmtest's VM; %s names its file there", t.Name(), env)
	}
	return v
}

// enableSeq reads how many times a sched_ext scheduler has been enabled
// since boot (-1 where the kernel does not count them).
func enableSeq() int64 {
	b, err := os.ReadFile(filepath.Join(sysfsRoot, "enable_seq"))
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// TestWatchSchedExt records sched_ext's state and enable_seq every time
// either changes, one line "TIME STATE SEQ" each (TIME in RFC 3339 with
// nanoseconds, UTC, as the ledger's), in $TEMPER_VMTEST_WATCH, until it is
// killed: the record the refine checks compare the ledger's trials with.
// Every line is written as it happens, so a kill loses nothing.
func TestWatchSchedExt(t *testing.T) {
	out := vmRunFile(t, "TEMPER_VMTEST_WATCH")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	last := ""
	for {
		s, err := readState(sysfsRoot)
		if err != nil {
			s = "missing"
		}
		cur := fmt.Sprintf("%s %d", s, enableSeq())
		if cur != last {
			if _, err := fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), cur); err != nil {
				t.Fatal(err)
			}
			last = cur
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stateAt is one line of TestWatchSchedExt's log.
type stateAt struct {
	at    time.Time
	state string
	seq   int64
}

func (s stateAt) String() string {
	return fmt.Sprintf("%s (enable_seq %d) at %s", s.state, s.seq, s.at.Format("15:04:05.000"))
}

// problems collects a check's failures and reports the first few: one
// cause (a scheduler never attached) fails every trial alike.
type problems struct {
	t    *testing.T
	n    int
	show int
}

func (p *problems) add(format string, args ...any) {
	p.t.Helper()
	p.n++
	if p.n <= p.show {
		p.t.Errorf(format, args...)
	}
}

func (p *problems) close() {
	p.t.Helper()
	if p.n > p.show {
		p.t.Errorf("... and %d more like those", p.n-p.show)
	}
}

// stateLog is TestWatchSchedExt's log read back, oldest first.
type stateLog []stateAt

func readStateLog(t *testing.T, path string) stateLog {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var l stateLog
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			continue // a line the kill cut off
		}
		at, err := time.Parse(time.RFC3339Nano, fs[0])
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		seq, err := strconv.ParseInt(fs[2], 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		l = append(l, stateAt{at, fs[1], seq})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(l) == 0 {
		t.Fatalf("%s: no state recorded", path)
	}
	return l
}

// at is the state in force at time x; ok is false before the log began.
func (l stateLog) at(x time.Time) (stateAt, bool) {
	i := sort.Search(len(l), func(i int) bool { return l[i].at.After(x) })
	if i == 0 {
		return stateAt{}, false
	}
	return l[i-1], true
}

// within is every state in force at some time in [a, b].
func (l stateLog) within(a, b time.Time) []stateAt {
	first, ok := l.at(a)
	if !ok {
		return nil
	}
	out := []stateAt{first}
	for _, s := range l {
		if s.at.After(a) && !s.at.After(b) {
			out = append(out, s)
		}
	}
	return out
}

// isStock says whether a ledger candidate is an arm without a profile:
// stock, or tier only ("stock+tier").
func isStock(candidate string) bool { return strings.HasPrefix(candidate, "stock") }

// isDetached says whether a ledger candidate runs with no scheduler
// attached under sched_ext: stock without the tier. Tier only is the
// scheduler with no group and its BestEffort tier.
func isDetached(candidate string) bool { return candidate == "stock" }

// isTier says whether a ledger candidate runs with the tier in force.
func isTier(candidate string) bool { return strings.HasSuffix(candidate, "+tier") }

// doneTrial is a trial that ended with numbers: its last start and its end.
type doneTrial struct {
	start ledger.TrialStart
	end   ledger.TrialEnd
}

// doneTrials are the ledger's completed trials in the order they started.
func doneTrials(l *ledger.Ledger) []doneTrial {
	last := map[string]ledger.TrialStart{}
	for _, s := range l.Starts {
		last[s.Trial] = s
	}
	var out []doneTrial
	for id, e := range l.Done() {
		if s, ok := last[id]; ok && len(e.Metrics) > 0 {
			out = append(out, doneTrial{s, e})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Start.Before(out[j].start.Start) })
	return out
}

// TestRefineRun checks a refine (or train) run with --backend sched_ext:
// $TEMPER_VMTEST_RUN_DIR holds its ledger.jsonl and REPORT.md,
// $TEMPER_VMTEST_STATES is TestWatchSchedExt's log over the run and
// $TEMPER_VMTEST_LADDER its background levels. The ledger has trials of
// stock and of a profile at every level; the scheduler was attached for
// every profile trial (state enabled, no re-attach inside it) and not for
// any stock one, and detached between two profile arms (enable_seq moved);
// every profile trial has the BPF scheduler's per-group counters; REPORT.md
// has the ladder table with a row per level. With
// TEMPER_VMTEST_MECHANISM=1 (a profile planted for it) some trials counted
// preemptions, a step was taken and its mechanism check was computed from
// those counters.
func TestRefineRun(t *testing.T) {
	dir := vmRunFile(t, "TEMPER_VMTEST_RUN_DIR")
	states := readStateLog(t, vmRunFile(t, "TEMPER_VMTEST_STATES"))
	var levels []int
	for _, f := range strings.Split(vmRunFile(t, "TEMPER_VMTEST_LADDER"), ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("TEMPER_VMTEST_LADDER: %v", err)
		}
		levels = append(levels, n)
	}
	l, err := ledger.Read(filepath.Join(dir, "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if name := New().Name(); l.Header.Backend != name {
		t.Errorf("ledger backend %q, want %q", l.Header.Backend, name)
	}
	if l.End == nil {
		t.Errorf("the ledger has no end record: the run did not finish")
	} else {
		t.Logf("end: %s", l.End.Reason)
	}
	trials := doneTrials(l)
	if len(trials) == 0 {
		t.Fatal("no completed trial in the ledger")
	}

	// Trials per level and arm.
	type cell struct{ stock, profile int }
	per := map[int]*cell{}
	cands := map[string]bool{}
	for _, tr := range trials {
		c := per[tr.start.Bg]
		if c == nil {
			c = &cell{}
			per[tr.start.Bg] = c
		}
		if isStock(tr.start.Candidate) {
			c.stock++
		} else {
			c.profile++
			cands[tr.start.Candidate] = true
		}
	}
	var counts []string
	for _, bg := range levels {
		c := per[bg]
		if c == nil || c.stock == 0 || c.profile == 0 {
			t.Errorf("bg %d: trials of stock and of a profile wanted, got %+v", bg, c)
			continue
		}
		counts = append(counts, fmt.Sprintf("bg %d: %d stock + %d profile", bg, c.stock, c.profile))
	}

	// The scheduler in force during each trial, and between arms.
	var attached, detached, reattached, preempting, tierTrials, tierServed int
	bad := &problems{t: t, show: 6}
	defer bad.close()
	for i, tr := range trials {
		in := states.within(tr.start.Start, tr.end.End)
		if len(in) == 0 {
			bad.add("trial %s: before the state log began", tr.start.Trial)
			continue
		}
		want := "enabled"
		if isDetached(tr.start.Candidate) {
			want = "disabled"
		}
		for _, s := range in {
			if s.state != want || s.seq != in[0].seq {
				bad.add("trial %s (%s, bg %d, %s to %s): sched_ext %v, want %s throughout (enable_seq %d)",
					tr.start.Trial, tr.start.Candidate, tr.start.Bg, tr.start.Start.Format("15:04:05.000"), tr.end.End.Format("15:04:05.000"), s, want, in[0].seq)
				break
			}
		}
		if want == "disabled" {
			detached++
			if len(tr.end.Groups) != 0 {
				bad.add("trial %s: stock under sched_ext has group stats %v: no scheduler should be attached", tr.start.Trial, tr.end.Groups)
			}
			continue
		}
		attached++
		var disp, pre float64
		for _, g := range tr.end.Groups {
			disp += g.SwitchesPerS
			pre += g.PreemptsPerS
		}
		if disp <= 0 {
			bad.add("trial %s: no dispatches from the BPF scheduler in its group stats %v", tr.start.Trial, tr.end.Groups)
		}
		if pre > 0 {
			preempting++
		}
		// With the tier and spinners, the spinners run in the tier's
		// layer (found by cgroup ancestry), if only by the guard's turns.
		if isTier(tr.start.Candidate) {
			be, ok := tr.end.Groups[BestEffortLayer]
			switch {
			case !ok:
				bad.add("trial %s (%s): the tier in force but no %s group in its stats %v", tr.start.Trial, tr.start.Candidate, BestEffortLayer, tr.end.Groups)
			case tr.start.Bg > 0 && be.SwitchesPerS <= 0:
				bad.add("trial %s (%s, bg %d): the tier's layer dispatched nothing: the spinners were not found in it", tr.start.Trial, tr.start.Candidate, tr.start.Bg)
			case tr.start.Bg > 0:
				tierServed++
			}
			tierTrials++
		}
		if i == 0 {
			continue
		}
		prev := trials[i-1]
		if isDetached(prev.start.Candidate) || prev.start.Candidate == tr.start.Candidate {
			continue
		}
		// Two profile arms in a row: the first was detached and the second
		// attached in between.
		a, _ := states.at(prev.end.End)
		b, _ := states.at(tr.start.Start)
		between := states.within(prev.end.End, tr.start.Start)
		off := slices.ContainsFunc(between, func(s stateAt) bool { return s.state != "enabled" })
		if (a.seq >= 0 && b.seq <= a.seq) || !off {
			bad.add("trials %s → %s (%s → %s): not detached between the arms (enable_seq %d → %d, states between %v)",
				prev.start.Trial, tr.start.Trial, prev.start.Candidate, tr.start.Candidate, a.seq, b.seq, between)
		}
		reattached++
	}
	// The scheduler counts a preemption where a task loses its CPU still
	// runnable; the planted profile, whose workers share the CPUs with
	// the compute pool and the spinners, must show them.
	mechanism := os.Getenv("TEMPER_VMTEST_MECHANISM") == "1"
	if mechanism && preempting == 0 {
		t.Errorf("no profile trial has a preemption in its group stats")
	}

	// The report's ladder table: a row per level.
	report, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	table := ladderTable(string(report))
	if table == "" {
		t.Errorf("REPORT.md has no ladder table (## Background ladder)")
	}
	for _, bg := range levels {
		if !strings.Contains(table, fmt.Sprintf("\n| %d |", bg)) {
			t.Errorf("REPORT.md's ladder table has no row for bg %d:\n%s", bg, table)
		}
	}

	// The mechanism check of a step taken reads the group stats.
	var mech []string
	computed := 0
	for _, d := range l.Decisions {
		m := d.Mechanism
		if m == nil {
			continue
		}
		mech = append(mech, fmt.Sprintf("%s %s: %s %.1f → %.1f p=%.3g (predicted %s, moved %v%s)",
			d.Step, d.Verdict, m.Counter, float64(m.Base), float64(m.Cand), float64(m.P), m.Predicted, m.Moved, orNote(m.Note)))
		if m.Note == "" {
			computed++
		}
	}
	if mechanism && computed == 0 {
		t.Errorf("no step's mechanism check was computed from the group stats: %v", mech)
	}
	if len(mech) == 0 {
		mech = []string{"none (no step taken)"}
	}
	t.Logf("%d trials over %d profile arm(s) (%s); attached in all %d profile and tier trials, detached in all %d stock trials, %d re-attaches between attached arms; group stats (dispatches, preemptions) in every attached trial, preemptions in %d; %d trials with the tier, its layer served in the %d with spinners; mechanism: %s",
		len(trials), len(cands), strings.Join(counts, ", "), attached, detached, reattached, preempting, tierTrials, tierServed, strings.Join(mech, "; "))
}

func orNote(n string) string {
	if n == "" {
		return ""
	}
	return "; " + n
}

// ladderTable is REPORT.md's first table under "## Background ladder",
// from a newline before its header row.
func ladderTable(report string) string {
	_, rest, ok := strings.Cut(report, "## Background ladder")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	var rows []string
	in := false
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "|") {
			rows = append(rows, line)
			in = true
		} else if in {
			break
		}
	}
	if len(rows) == 0 {
		return ""
	}
	return "\n" + strings.Join(rows, "\n") + "\n"
}

// threadSched is a thread's scheduling policy (/proc/TID/stat field 41)
// and whether sched_ext runs it (/proc/TID/sched's ext.enabled; -1 where
// the kernel does not say).
func threadSched(pid, tid int) (policy string, ext int, err error) {
	dir := fmt.Sprintf("/proc/%d/task/%d", pid, tid)
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return "", 0, err
	}
	f, err := procfs.StatFields(b)
	if err != nil || len(f) <= 41-3 {
		return "", 0, fmt.Errorf("%s/stat: no policy field (%v)", dir, err)
	}
	policy = policyNames[f[41-3]]
	if policy == "" {
		policy = "policy " + f[41-3]
	}
	ext = -1
	if b, err := os.ReadFile(dir + "/sched"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "ext.enabled"); ok {
				v = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(v), ":"))
				ext, _ = strconv.Atoi(v)
			}
		}
	}
	return policy, ext, nil
}

// TestKilledRefine checks the scheduling state of the target
// $TEMPER_VMTEST_PID around a SIGKILL of the refine that applies profiles
// to it. TEMPER_VMTEST_EXPECT=attached (before the kill): the scheduler is
// enabled and runs every thread of the target. =detached (after): within
// 15 s the kernel has detached it (the loader's link died with it), and
// every thread of the target is back on the fair class with policy normal.
func TestKilledRefine(t *testing.T) {
	pid, err := strconv.Atoi(vmRunFile(t, "TEMPER_VMTEST_PID"))
	if err != nil {
		t.Fatal(err)
	}
	expect := vmRunFile(t, "TEMPER_VMTEST_EXPECT")
	wantState, wantExt := "enabled", 1
	if expect == "detached" {
		wantState, wantExt = "disabled", 0
	}
	t0 := time.Now()
	for state(t) != wantState && time.Since(t0) < 15*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	st := state(t)
	if st != wantState {
		t.Fatalf("sched_ext state %q %v after the check began, want %q", st, time.Since(t0).Round(time.Millisecond), wantState)
	}
	seen := fmt.Sprintf("state %s after %v (enable_seq %d, root/ops %s)", st, time.Since(t0).Round(time.Millisecond), enableSeq(), opsName(sysfsRoot))
	tids, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*", pid))
	if err != nil || len(tids) == 0 {
		t.Fatalf("target %d has no threads (%v)", pid, err)
	}
	policies := map[string]int{}
	exts := map[int]int{}
	for _, d := range tids {
		tid, _ := strconv.Atoi(filepath.Base(d))
		policy, ext, err := threadSched(pid, tid)
		if err != nil {
			t.Errorf("thread %d: %v", tid, err)
			continue
		}
		policies[policy]++
		exts[ext]++
		if ext >= 0 && ext != wantExt {
			t.Errorf("thread %s: ext.enabled %d, want %d", describeTask(tid), ext, wantExt)
		}
		if expect == "detached" && policy != "normal" {
			t.Errorf("thread %s: policy %s after the kill, want normal", describeTask(tid), policy)
		}
	}
	t.Logf("%s; %d threads of pid %d: policy %v, ext.enabled %v", seen, len(tids), pid, policies, exts)
}

// TestResumedLedger checks refine --resume after a SIGKILL:
// $TEMPER_VMTEST_KILLED is the ledger as the kill left it (one trial cut
// off), $TEMPER_VMTEST_LEDGER the same ledger after the resumed run. The
// cut-off trial ran again, marked rerun; every trial the killed run
// completed kept its record and ran no more; no other trial repeated; the
// run finished with every trial complete.
func TestResumedLedger(t *testing.T) {
	killed, err := ledger.Read(vmRunFile(t, "TEMPER_VMTEST_KILLED"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Read(vmRunFile(t, "TEMPER_VMTEST_LEDGER"))
	if err != nil {
		t.Fatal(err)
	}
	open := killed.Open()
	if len(open) != 1 {
		t.Fatalf("the killed ledger has %d trials cut off, want 1 (a kill mid-trial): %v", len(open), open)
	}
	cut := open[0].Trial
	before := killed.Done()
	starts := map[string][]ledger.TrialStart{}
	for _, s := range l.Starts {
		starts[s.Trial] = append(starts[s.Trial], s)
	}
	for id, ss := range starts {
		switch {
		case id == cut:
			if len(ss) != 2 || ss[0].Rerun || !ss[1].Rerun {
				t.Errorf("the cut-off trial %s: starts %+v, want two, the second marked rerun", id, ss)
			}
		case len(ss) != 1:
			t.Errorf("trial %s started %d times, want once", id, len(ss))
		case ss[0].Rerun:
			t.Errorf("trial %s marked rerun, but only %s was cut off", id, cut)
		}
	}
	for id, e := range before {
		if got, ok := l.Ends[id]; !ok || !got.End.Equal(e.End) {
			t.Errorf("trial %s, completed before the kill: its record changed on resume (%v → %v)", id, e.End, got.End)
		}
	}
	if o := l.Open(); len(o) != 0 {
		t.Errorf("%d trials still open after the resumed run: %v", len(o), o)
	}
	// A trial may fail only under a candidate the race dropped for it, or
	// under the refined profile the final then did not keep for it (a
	// profile that starved the workload until the benchmark saw nothing).
	dropped := map[string]bool{}
	for _, d := range l.Decisions {
		if d.Race != nil && d.Race.Failed != "" || d.Look != nil && strings.Contains(d.Reason, "NOT KEPT: the benchmark failed under the refined profile") {
			dropped[d.Candidate] = true
		}
	}
	candidate := map[string]string{}
	for _, s := range l.Starts {
		candidate[s.Trial] = s.Candidate
	}
	for id, e := range l.Ends {
		if e.Error != "" && !dropped[candidate[id]] {
			t.Errorf("trial %s (%s) failed and its candidate was not dropped for it: %s", id, candidate[id], e.Error)
		}
	}
	if l.End == nil {
		t.Fatalf("the resumed run did not finish (no end record)")
	}
	t.Logf("killed after %d completed trials with %s (%s, bg %d) cut off; the resumed ledger: %d trials, %d starts, %s run again marked rerun, no other trial repeated; end: %s",
		len(before), cut, open[0].Candidate, open[0].Bg, len(l.Ends), len(l.Starts), cut, l.End.Reason)
}

// TestStateLog: the state in force at a time is the last change before it;
// within a window, that one and every change inside.
func TestStateLog(t *testing.T) {
	at := func(s string) time.Time {
		x, err := time.Parse(time.RFC3339Nano, "2026-11-28T05:00:"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	l := stateLog{{at("01"), "disabled", 0}, {at("03"), "enabled", 1}, {at("05"), "disabled", 1}, {at("06"), "enabled", 2}}
	for _, tt := range []struct {
		a, b string
		want []string // "STATE SEQ" in force, oldest first
	}{
		{"00", "02", nil},
		{"01.5", "02", []string{"disabled 0"}},
		{"03.5", "04.9", []string{"enabled 1"}},
		{"04", "06", []string{"enabled 1", "disabled 1", "enabled 2"}},
		{"07", "08", []string{"enabled 2"}},
	} {
		var got []string
		for _, s := range l.within(at(tt.a), at(tt.b)) {
			got = append(got, fmt.Sprintf("%s %d", s.state, s.seq))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("within(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestLadderTable: the table under "## Background ladder", not the one
// after it.
func TestLadderTable(t *testing.T) {
	report := "# r\n\n## Background ladder\n\nMedians.\n\n| bg | a |\n|---|---|\n| 0 | 1 |\n| 2 | 3 |\n\nWith intervals:\n\n| bg | x |\n| 9 | 9 |\n\n## Steps\n| 7 |\n"
	want := "\n| bg | a |\n|---|---|\n| 0 | 1 |\n| 2 | 3 |\n"
	if got := ladderTable(report); got != want {
		t.Errorf("ladderTable = %q, want %q", got, want)
	}
	if got := ladderTable("# r\n## Steps\n| 0 |\n"); got != "" {
		t.Errorf("no ladder section: %q, want none", got)
	}
}
