package pipeline

import (
	"fmt"
	"io"

	"temper.codes/temper-train/internal/bytesize"
	"temper.codes/temper-train/observe"
)

// ObservationReportOptions say how much of an observation's report shows,
// and how it tells the reader to do better.
type ObservationReportOptions struct {
	// Top is the number of the target's threads listed, busiest first; 0
	// lists all. AllThreads says how the reader lists them all, in the
	// caller's words; empty leaves it unsaid.
	Top        int
	AllThreads string
	// BiggerBuffer says how the reader gives the recorder a bigger ring
	// buffer when events were lost, in the caller's words (the command
	// names its flag); empty leaves it unsaid.
	BiggerBuffer string
}

// Report writes one screen about the recording: the target, where it
// went, why it stopped, what was lost, and the target's busiest threads
// (read back from the trace).
func (o *Observation) Report(w io.Writer, opts ObservationReportOptions) error {
	res, snap, exit := o.Record, o.Snapshot, o.Exit
	span := res.End - res.Start
	fmt.Fprintf(w, "target    %s\n", snap.Target.Description)
	if exit != nil {
		fmt.Fprintf(w, "command   %s\n", exit)
	}
	fmt.Fprintf(w, "stopped   after %.2f s: %s\n", float64(span)/1e9, res.StopReason)
	fmt.Fprintf(w, "events    %d (%.0f/s) via %s, %s on disk (%.1f bytes/event)\n", res.Events,
		float64(res.Events)/max(float64(span)/1e9, 1e-9), res.Attach, bytesize.Format(res.Bytes),
		float64(res.Bytes)/float64(max(res.Events, 1)))
	if lost := res.TotalLost(); lost > 0 {
		try := ""
		if opts.BiggerBuffer != "" {
			try = " (try " + opts.BiggerBuffer + ")"
		}
		fmt.Fprintf(w, "LOST      %d events (per CPU %v): the kernel's ring buffer was full; states near the gaps are uncertain%s\n", lost, res.Lost, try)
	} else {
		fmt.Fprintln(w, "lost      none")
	}
	if res.Discarded > 0 {
		fmt.Fprintf(w, "discarded %d events that arrived after the bound was reached\n", res.Discarded)
	}
	for _, msg := range snap.Warnings {
		fmt.Fprintf(w, "warning   %s\n", msg)
	}
	fmt.Fprintf(w, "wrote     %s\n          %s\n", o.TracePath, o.SnapshotPath)

	r, err := observe.Open(o.TracePath)
	if err != nil {
		return err
	}
	defer r.Close()
	sum, err := observe.Summarize(r)
	if err != nil {
		return fmt.Errorf("read back %s: %w", o.TracePath, err)
	}
	traced := map[int32]bool{}
	for _, g := range res.Targets {
		traced[int32(g)] = true
	}
	var threads []observe.ThreadSummary
	for _, th := range sum.Threads {
		if traced[th.Tgid] {
			threads = append(threads, th)
		}
	}
	fmt.Fprintf(w, "\n%d threads of the target (CPU%% of %.2f s):\n", len(threads), float64(span)/1e9)
	return observe.ReportThreads(w, threads, span, observe.ReportOptions{Top: opts.Top, AllThreads: opts.AllThreads})
}
