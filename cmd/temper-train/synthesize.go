package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/observe/snapshot"
	"temper.codes/temper-train/pipeline"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/synthesize"
)

// synthesizeFlags are the synthesize command's options.
type synthesizeFlags struct {
	id       string
	snapshot string
	shape    string
	request  string
	out      string
	exports  []string
}

// newSynthesizeCmd is `temper-train synthesize`. Register it on the root
// command.
func newSynthesizeCmd() *cobra.Command {
	var f synthesizeFlags
	cmd := &cobra.Command{
		Use:   "synthesize ANALYSIS.json --id ID",
		Short: "Turn an analysis into a workload profile (TOML), with scx_layered and Helm exports",
		Long: `Synthesize reads an analysis (temper-train analyze --json) and writes the
workload profile OUT/ID/SHAPE.toml (OUT defaults to profiles): one thread group
per cluster class, matched by comm prefixes of the thread families, first match
wins, the remainder last:

  sync_compute      → exclusive whole cores, one per hot thread (cpu_share ≥ 0.3);
                      with no hot thread batch, or normal where a favoured
                      group waits on it
  latency_critical  → exclusive when its hot threads fit the shape, else latency
  io_wake_chain     → latency (preempt, higher weight)
  sporadic          → the catch-all: yield where nothing waits on it, it uses
                      < 5% CPU and wakes rarely; else, or with no thread, normal

Exclusive cores only for a real request (--request, the pod's, or its quota;
never one inferred from use), with at least two cores shared and the rest of
the node's measured demand within 0.7 of them; a group that does not fit is
demoted to normal with a warning. With a load generator on the node (most of a
group's wakeups from outside the target) no group is favoured. The arithmetic
and the measured evidence are written into the profile.

The machine shape comes from --snapshot (observe's snapshot.json: topology,
pod requests and limits, cgroup quota), else --shape (e.g. 8cpu-4c-smt2), else
the CPU count the trace recorded (logical CPUs only: no exclusive cores). The
request comes from --request, else the snapshot, else the observed CPU use
rounded up to whole CPUs (which buys no exclusive cores).

Before writing, the profile is compiled and every analysed thread is checked
to land in its group, and lint must report no error. Files are written whole
or not at all; an existing profile is overwritten (git shows the diff).
--out - prints the TOML instead.

--export scx-layered FILE writes the equivalent scx_layered layer spec (JSON);
--export helm FILE writes values for the agent's Helm chart with the profile
under agent.profiles.ID.toml. Both forms --export KIND FILE and
--export KIND=FILE work; the analysis comes first.`,
		Example: `  temper-train synthesize out/analysis.json --id my-service --snapshot out/snapshot.json
  temper-train synthesize analysis.json --id llama --shape 8cpu-4c-smt2 --request 2250m
  temper-train synthesize analysis.json --id wl --shape 2cpu-2c-smt1 --export scx-layered wl.json --export helm wl-values.yaml`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runSynthesize(cmd, f, a)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "", "profile id: lowercase letters, digits and '-' (required)")
	fl.StringVar(&f.snapshot, "snapshot", "", "snapshot.json recorded with the trace (topology, pod request, cgroup quota)")
	fl.StringVar(&f.shape, "shape", "", "machine shape when there is no snapshot, e.g. 8cpu-4c-smt2")
	fl.StringVar(&f.request, "request", "", "the pod's CPU request, e.g. 2250m or 2.25 (default: the snapshot's, else the observed use)")
	fl.StringVar(&f.out, "out", "profiles", `directory to write ID/SHAPE.toml under ("-" prints the TOML)`)
	fl.StringArrayVar(&f.exports, "export", nil, "also write KIND FILE: scx-layered (layer-spec JSON) or helm (chart values); repeatable")
	return cmd
}

// parseExports pairs each --export KIND with its FILE: "KIND=FILE", or the
// next argument after the analysis ("--export KIND FILE", which the flag
// parser leaves as an argument).
func parseExports(values, extra []string) ([]pipeline.Export, error) {
	var out []pipeline.Export
	for _, v := range values {
		kind, file, ok := strings.Cut(v, "=")
		if !ok {
			if len(extra) == 0 {
				return nil, fmt.Errorf("--export %s needs a FILE: --export %s FILE", v, v)
			}
			file, extra = extra[0], extra[1:]
		}
		switch kind {
		case synthesize.ExportLayered, synthesize.ExportHelm:
		default:
			return nil, fmt.Errorf("--export %q: unknown kind (known: %s, %s)", kind, synthesize.ExportLayered, synthesize.ExportHelm)
		}
		if file == "" {
			return nil, fmt.Errorf("--export %s: empty FILE", kind)
		}
		if slices.ContainsFunc(out, func(e pipeline.Export) bool { return e.Kind == kind }) {
			return nil, fmt.Errorf("--export %s given twice", kind)
		}
		out = append(out, pipeline.Export{Kind: kind, File: file, Name: "--export " + kind})
	}
	if len(extra) > 0 {
		return nil, fmt.Errorf("unexpected argument %q: synthesize takes one analysis; exports are --export KIND FILE", extra[0])
	}
	return out, nil
}

// synthesizeFlagError names the flag behind an error of package synthesize:
// the library says which option is wrong, the command which flag sets it.
func synthesizeFlagError(err error) error {
	switch {
	case errors.Is(err, synthesize.ErrID):
		return fmt.Errorf("--id: %w", err)
	case errors.Is(err, synthesize.ErrShape):
		return fmt.Errorf("--shape: %w", err)
	case errors.Is(err, synthesize.ErrNoShape):
		return fmt.Errorf("%w: pass --snapshot snapshot.json (written by observe) or --shape (e.g. --shape 8cpu-4c-smt2)", err)
	case errors.Is(err, synthesize.ErrRequest):
		return fmt.Errorf("--request: %w", err)
	case errors.Is(err, synthesize.ErrNotAnalysis):
		return fmt.Errorf("%w (write one with `temper-train analyze TRACE --json FILE`)", err)
	}
	return err
}

// runSynthesize checks the flags, has the pipeline synthesize and write the
// profile and its exports, and prints what it did.
func runSynthesize(cmd *cobra.Command, f synthesizeFlags, a []string) error {
	exports, err := parseExports(f.exports, a[1:])
	if err != nil {
		return usageError{err}
	}
	if f.id == "" {
		return usageError{errors.New("no profile id: pass --id (lowercase letters, digits and '-', e.g. --id my-service)")}
	}
	if f.out == "" {
		return usageError{errors.New("--out is empty: give a directory, or - for stdout")}
	}
	opt := synthesize.Options{ID: f.id, Source: a[0], SnapshotPath: f.snapshot}
	if f.shape != "" {
		s, err := profiles.ParseShape(f.shape)
		if err != nil {
			return usageError{fmt.Errorf("--shape: %w", err)}
		}
		opt.Shape = &s
	}
	if f.request != "" {
		m, err := profiles.ParseMillicores(f.request)
		if err != nil {
			return usageError{fmt.Errorf("--request: %w", err)}
		}
		opt.RequestMillicores = m
	}
	if f.snapshot != "" {
		s, err := snapshot.Load(f.snapshot)
		if err != nil {
			return err
		}
		opt.Snapshot = s
	}
	an, err := synthesize.LoadAnalysis(a[0])
	if err != nil {
		return synthesizeFlagError(err)
	}
	so := pipeline.SynthesizeOptions{Options: opt, Exports: exports}
	if f.out != "-" {
		so.Out = f.out
	}
	syn, err := pipeline.Synthesize(an, so)
	var ce *pipeline.ClashError
	var oe *pipeline.OutputError
	switch {
	case errors.As(err, &ce):
		return usageError{err}
	case errors.As(err, &oe):
		return err
	case err != nil:
		return fmt.Errorf("synthesize %s: %w", a[0], synthesizeFlagError(err))
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for _, w := range syn.Warnings {
		fmt.Fprintf(stderr, "temper-train: warning: %s\n", w)
	}
	for _, fd := range syn.Lint {
		fmt.Fprintf(stderr, "temper-train: lint: %s\n", fd)
	}
	if syn.Path != "" {
		return syn.Report(stdout)
	}
	data, err := syn.TOML()
	if err != nil {
		return fmt.Errorf("synthesize %s: %w", a[0], err)
	}
	if _, err := stdout.Write(data); err != nil {
		return err
	}
	return syn.Report(stderr)
}
