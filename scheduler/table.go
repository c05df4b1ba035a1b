package scheduler

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"temper.codes/temper-train/internal/table"
)

// WriteStats writes stats as a table, one row per group: its treatment,
// threads, CPU time and the CPUs that is over elapsed, and its counters
// ("-" for one the backend does not measure). Below the table come the
// notes and unmeasured counters, each text once with the groups it holds
// for ("all groups" when it holds for every one).
func WriteStats(w io.Writer, stats []GroupStats, elapsed time.Duration) error {
	t := table.New(table.Column{Name: "GROUP", Left: true}, table.Column{Name: "TREATMENT", Left: true}, table.Column{Name: "THREADS"},
		table.Column{Name: "CPU s"}, table.Column{Name: "CPUS"}, table.Column{Name: "DISPATCHES"}, table.Column{Name: "PREEMPTIONS"},
		table.Column{Name: "SIBLING-BUSY"})
	type note struct {
		text   string
		groups []string
	}
	var notes []note
	add := func(text, group string) {
		i := slices.IndexFunc(notes, func(n note) bool { return n.text == text })
		if i < 0 {
			notes = append(notes, note{text: text})
			i = len(notes) - 1
		}
		notes[i].groups = append(notes[i].groups, group)
	}
	for _, s := range stats {
		for _, n := range s.Notes {
			add(n, s.Group)
		}
		for _, m := range s.Missing {
			add(m.String(), s.Group)
		}
		count := func(c Counter, v uint64) string {
			if !s.Measures(c) {
				return "-"
			}
			return fmt.Sprint(v)
		}
		cpus := 0.0
		if elapsed > 0 {
			cpus = float64(s.RuntimeNs) / float64(elapsed.Nanoseconds())
		}
		t.Row(s.Group, string(s.Treatment), fmt.Sprint(s.Threads), fmt.Sprintf("%.2f", float64(s.RuntimeNs)/1e9),
			fmt.Sprintf("%.2f", cpus), count(Dispatches, s.Dispatches), count(Preemptions, s.Preemptions),
			count(SiblingBusy, s.SiblingBusy))
	}
	if err := t.Write(w, false); err != nil {
		return err
	}
	for _, n := range notes {
		who := strings.Join(n.groups, ", ")
		if len(n.groups) == len(stats) {
			who = "all groups"
		}
		if _, err := fmt.Fprintf(w, "  %s: %s\n", who, n.text); err != nil {
			return err
		}
	}
	return nil
}

// Wait blocks until the session stops on its own (its For passed, its
// context ended, the target exited or a refresh failed) or through Stop.
// While it runs, every interval it passes report the stats so far and the
// time since Began; a read that fails skips that report. interval 0 means
// no reports.
func (s *Session) Wait(interval time.Duration, report func(stats []GroupStats, elapsed time.Duration)) {
	if interval <= 0 || report == nil {
		<-s.done
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
			if stats, err := s.Stats(); err == nil {
				report(stats, time.Since(s.begin))
			}
		}
	}
}
