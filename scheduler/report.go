package scheduler

import (
	"encoding/json"
	"fmt"
	"io"

	"temper.codes/temper-train/internal/atomicfile"
)

// ReportVersion is the version of Report's JSON schema (apply's
// --stats-json; docs/scheduler.md documents it). Version 2 split version
// 1's "missing" into the counters not measured ("missing") and what was
// not applied ("notes"), and added "wait_ns".
const ReportVersion = 2

// Report is a stopped session in JSON: the closing per-group stats and the
// group of each thread of the target when it stopped.
type Report struct {
	Version    int            `json:"version"`
	Profile    string         `json:"profile"`
	Backend    string         `json:"backend"`
	Target     string         `json:"target"`
	StopReason string         `json:"stop_reason"`
	ElapsedNs  int64          `json:"elapsed_ns"`
	Groups     []ReportGroup  `json:"groups"`
	Threads    []ReportThread `json:"threads"`
}

// ReportGroup is one GroupStats.
type ReportGroup struct {
	Name        string   `json:"name"`
	Treatment   string   `json:"treatment"`
	Threads     int      `json:"threads"`
	RuntimeNs   uint64   `json:"runtime_ns"`
	WaitNs      uint64   `json:"wait_ns"`
	Dispatches  uint64   `json:"dispatches"`
	Preemptions uint64   `json:"preemptions"`
	SiblingBusy uint64   `json:"sibling_busy"`
	Missing     []string `json:"missing"` // "counter: why"; such a counter is 0, not a measurement
	Notes       []string `json:"notes"`
}

// ReportThread is one thread of the target and the group its profile puts
// it in.
type ReportThread struct {
	Tid   int    `json:"tid"`
	Tgid  int    `json:"tgid"`
	Comm  string `json:"comm"`
	Group string `json:"group"` // the group's name; "" when no group matched
	Index int    `json:"group_index"`
}

// NewReport describes a stopped session of plan p through backend on
// target; reason is why it stopped, in the caller's words.
func NewReport(p Plan, backend, target, reason string, sum Summary) Report {
	out := Report{Version: ReportVersion, Profile: p.Profile.ID, Backend: backend, Target: target, StopReason: reason,
		ElapsedNs: sum.Elapsed.Nanoseconds(), Groups: []ReportGroup{}, Threads: []ReportThread{}}
	for _, s := range sum.Stats {
		g := ReportGroup{Name: s.Group, Treatment: string(s.Treatment), Threads: s.Threads, RuntimeNs: s.RuntimeNs, WaitNs: s.WaitNs,
			Dispatches: s.Dispatches, Preemptions: s.Preemptions, SiblingBusy: s.SiblingBusy, Missing: []string{}, Notes: []string{}}
		for _, m := range s.Missing {
			g.Missing = append(g.Missing, m.String())
		}
		g.Notes = append(g.Notes, s.Notes...)
		out.Groups = append(out.Groups, g)
	}
	for _, th := range sum.Threads {
		g := p.Classifier.Group(th)
		name := ""
		if g >= 0 {
			name = p.Profile.ThreadGroups[g].Name
		}
		out.Threads = append(out.Threads, ReportThread{Tid: th.Tid, Tgid: th.Tgid, Comm: th.Comm, Group: name, Index: g})
	}
	return out
}

// Write writes the report to path atomically, as indented JSON.
func (r Report) Write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("stats report: %w", err)
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}
