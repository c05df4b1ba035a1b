package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/observe/record"
	"temper.codes/temper-train/observe/snapshot"
	"temper.codes/temper-train/target"
)

// File names of an observation in its directory.
const (
	TraceFile    = "trace.pftrace"
	SnapshotFile = "snapshot.json"
)

// ObserveOptions say how to trace a target and where to.
type ObserveOptions struct {
	// Dir receives the trace and the snapshot; created if missing, and
	// removed again when Observe created it and fails. "" names it after
	// the target and the time (DefaultObserveDir).
	Dir string
	// Record bounds the recording: Duration, MaxEvents, MaxBytes,
	// BufferBytes, Attach, FilterSwitches, TracingChecked. What depends on
	// the target (Tgids, Refresh, StopWhenGone, Siblings) is filled in.
	Record record.Options
	// AgentURL, if set, is the node agent's /observe endpoint, fetched
	// into the snapshot.
	AgentURL string
	// StopCommand stops a target that is a started command once the trace
	// and snapshot are taken, so that Exit holds its state; without it the
	// command keeps running for the caller's next stage.
	StopCommand bool
	// Progress receives the recording's state now and then; OnAttached is
	// called once the tracer is attached. Both may be nil.
	Progress   func(record.Progress)
	OnAttached func()
}

// Observation is a finished recording.
type Observation struct {
	Dir, TracePath, SnapshotPath string
	Snapshot                     *snapshot.Snapshot
	Record                       *record.Result
	// Exit is the state of a started command that StopCommand stopped;
	// StopErr why stopping it failed (the trace and snapshot are whole).
	Exit    *os.ProcessState
	StopErr error
}

// Observe snapshots the target, traces it and writes both files into
// opts.Dir. Nothing is left there unless the trace succeeded.
func Observe(ctx context.Context, tgt *target.Target, opts ObserveOptions) (*Observation, error) {
	dir := opts.Dir
	if dir == "" {
		dir = DefaultObserveDir(tgt, time.Now())
	}
	created, err := MakeDir(dir)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok && created {
			os.Remove(dir) // only if empty: never delete what was there
		}
	}()
	ro := opts.Record
	snap, err := snapshot.Begin(ctx, snapshot.Options{Tgids: tgt.Tgids, Cgroup: tgt.Cgroup, Pod: tgt.Pod,
		AgentURL: opts.AgentURL, Target: tgt.Description,
		Trace: snapshot.TraceParams{DurationNs: int64(ro.Duration), MaxEvents: ro.MaxEvents, MaxBytes: ro.MaxBytes}})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	ro.Tgids = tgt.Tgids
	ro.Refresh = tgt.Refresh
	ro.StopWhenGone = tgt.Kind == target.KindPid || tgt.Kind == target.KindCommand
	ro.Siblings = snap.Topology.SiblingLists()
	ro.Progress, ro.OnAttached = opts.Progress, opts.OnAttached

	obs := &Observation{Dir: dir, TracePath: filepath.Join(dir, TraceFile), SnapshotPath: filepath.Join(dir, SnapshotFile), Snapshot: snap}
	err = atomicfile.Write(obs.TracePath, 0o644, func(w io.Writer) error {
		var err error
		obs.Record, err = record.Run(ctx, w, ro)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The end half of the snapshot is read before a started command is
	// stopped, so its threads' counters cover the whole trace.
	endCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := snap.End(endCtx); err != nil {
		os.Remove(obs.TracePath)
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if opts.StopCommand && tgt.Kind == target.KindCommand {
		obs.Exit, obs.StopErr = tgt.Stop(2 * time.Second)
	}
	res := obs.Record
	snap.Trace.Attach = res.Attach
	snap.Trace.Params = map[string]string{"stop_reason": res.StopReason, "clock": "CLOCK_BOOTTIME",
		"trace_start_ns": strconv.FormatInt(res.Start, 10), "trace_end_ns": strconv.FormatInt(res.End, 10)}
	snap.Events = snapshot.EventCounts{Total: res.Events, LostPerCPU: make([]int64, len(res.Lost))}
	for i, n := range res.Lost {
		snap.Events.LostPerCPU[i] = int64(n)
	}
	snap.Warnings = append(snap.Warnings, res.Warnings...)
	if err := snap.WriteFile(obs.SnapshotPath); err != nil {
		os.Remove(obs.TracePath)
		return nil, err
	}
	ok = true
	return obs, nil
}

// DefaultObserveDir names an observation's directory after the target and
// the start time: observe-<target>-<YYYYMMDD-hhmmss>.
func DefaultObserveDir(t *target.Target, now time.Time) string {
	var name string
	switch t.Kind {
	case target.KindPid:
		name = fmt.Sprintf("pid%d", t.Pid)
	case target.KindCommand:
		name = filepath.Base(t.Cmd.Path)
	case target.KindPod:
		name = t.Pod.Namespace + "-" + t.Pod.Name
	default:
		name = filepath.Base(t.Cgroup)
	}
	name = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, name)
	return fmt.Sprintf("observe-%s-%s", name, now.Format("20060102-150405"))
}
