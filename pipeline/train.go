package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/observe/record"
	"temper.codes/temper-train/refine/bench"
	"temper.codes/temper-train/synthesize"
	"temper.codes/temper-train/target"
)

// FreshOptions say how to observe a workload under its benchmark and
// synthesize a profile for it.
type FreshOptions struct {
	ID       string        // the profile's id
	Dir      string        // DIR/observe/, DIR/analysis.json, DIR/profiles/
	Duration time.Duration // how long to trace
	// Bench runs back to back while the workload is traced (with its
	// Timeout), so that the trace shows the workload under the load it is
	// measured with.
	Bench bench.Command
	// Pictures also writes DIR/wake-graph.dot (and .svg) and DIR/plots/.
	Pictures bool
	// Stage is called as each stage starts: "observe", "analyze",
	// "synthesize" (nil: not).
	Stage func(name string)
}

// FreshProfile is a profile synthesized from a fresh observation.
type FreshProfile struct {
	Observation *Observation
	Runs        int // benchmark runs completed while tracing
	Analysis    *Analyzed
	Profile     *Synthesized // Profile.Path is where it was written
}

// Errors of Fresh about the load: ErrNoLoad when the benchmark finished no
// run while the workload was traced, with ErrLoadTooLong when no run failed
// either (the trace was shorter than one run).
var (
	ErrNoLoad      = errors.New("the benchmark finished no run while the workload was traced")
	ErrLoadTooLong = errors.New("it ran for the whole trace")
)

// Fresh observes the target for opts.Duration with the benchmark running,
// analyses the trace and synthesizes a profile: the first three stages of
// Train, and what each canary cycle starts with. A command target keeps
// running.
func Fresh(ctx context.Context, tgt *target.Target, opts FreshOptions) (*FreshProfile, error) {
	stage := func(name string) error {
		if opts.Stage != nil {
			opts.Stage(name)
		}
		return ctx.Err()
	}
	if err := stage("observe"); err != nil {
		return nil, err
	}
	if err := record.CheckTracing(); err != nil {
		return nil, fmt.Errorf("observe: %w", err)
	}
	stop := StartLoad(opts.Bench)
	obs, err := Observe(ctx, tgt, ObserveOptions{Dir: filepath.Join(opts.Dir, "observe"),
		Record: record.Options{Duration: opts.Duration, BufferBytes: 16 << 20, Attach: record.AttachAuto, TracingChecked: true}})
	runs, loadErr := stop()
	if err != nil {
		return nil, fmt.Errorf("observe: %w", err)
	}
	if runs == 0 {
		if loadErr == nil {
			loadErr = ErrLoadTooLong
		}
		return nil, fmt.Errorf("observe: %w: %w", ErrNoLoad, loadErr)
	}
	fresh := &FreshProfile{Observation: obs, Runs: runs}

	if err := stage("analyze"); err != nil {
		return nil, err
	}
	ao := AnalyzeOptions{Options: analyze.Options{Snapshot: obs.Snapshot}, JSON: filepath.Join(opts.Dir, "analysis.json")}
	if opts.Pictures {
		ao.DOT, ao.Plots = filepath.Join(opts.Dir, "wake-graph.dot"), filepath.Join(opts.Dir, "plots")
	}
	if fresh.Analysis, err = Analyze(obs.TracePath, ao); err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}

	if err := stage("synthesize"); err != nil {
		return nil, err
	}
	so := SynthesizeOptions{Out: filepath.Join(opts.Dir, "profiles"), Options: synthesize.Options{ID: opts.ID,
		Source: ao.JSON, Snapshot: obs.Snapshot, SnapshotPath: obs.SnapshotPath}}
	if fresh.Profile, err = Synthesize(fresh.Analysis.Analysis, so); err != nil {
		return nil, fmt.Errorf("synthesize: %w", err)
	}
	return fresh, nil
}

// StartLoad runs the benchmark back to back until the returned stop is
// called; stop returns how many runs completed and the last failure. A run
// cut short by stop counts as neither.
func StartLoad(c bench.Command) (stop func() (runs int, last error)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runs int
	var last error
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, err := bench.Run(ctx, c)
			switch {
			case ctx.Err() != nil:
			case err != nil:
				last = err
				// A failing benchmark is not retried in a tight loop.
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			default:
				runs++
			}
		}
	}()
	return func() (int, error) {
		cancel()
		<-done
		return runs, last
	}
}

// TrainOptions say how to train a profile for a live workload.
type TrainOptions struct {
	Fresh FreshOptions
	// Refine refines the fresh profile (Dir "": FreshOptions.Dir/refine;
	// Bench: Fresh.Bench).
	Refine RefineOptions
	// Warmup is waited before the first load when the target is a command
	// just started: a server is not listening at once, and some load tools
	// spin instead of failing on a refused connection.
	Warmup time.Duration
	// Synthesized, if set, is called with the fresh profile before it is
	// refined; an error stops the run.
	Synthesized func(*FreshProfile) error
}

// TrainResult is what Train left.
type TrainResult struct {
	Fresh  *FreshProfile
	Refine *RefineRun
}

// Train observes the target under its benchmark, analyses the trace,
// synthesizes a profile and refines it: a measured profile for a live
// workload.
func Train(ctx context.Context, tgt *target.Target, opts TrainOptions) (*TrainResult, error) {
	if _, err := MakeDir(opts.Fresh.Dir); err != nil {
		return nil, err
	}
	if tgt.Kind == target.KindCommand && opts.Warmup > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(opts.Warmup):
		}
	}
	fresh, err := Fresh(ctx, tgt, opts.Fresh)
	if err != nil {
		return nil, err
	}
	res := &TrainResult{Fresh: fresh}
	if opts.Synthesized != nil {
		if err := opts.Synthesized(fresh); err != nil {
			return res, err
		}
	}
	ro := opts.Refine
	if ro.Dir == "" {
		ro.Dir = filepath.Join(opts.Fresh.Dir, "refine")
	}
	if ro.Bench.Argv == nil {
		ro.Bench = opts.Fresh.Bench
	}
	res.Refine, err = Refine(ctx, tgt, fresh.Profile.Path, ro)
	return res, err
}
