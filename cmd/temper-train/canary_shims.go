package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"temper.codes/temper-train/internal/console"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/pipeline"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/refine/bench"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/target"
)

// The names canary.go used before the pipeline package, each a thin
// wrapper over it: this file goes when canary calls pipeline.Fresh and
// pipeline.Live itself.

func benchCommand(line, adapter string) ([]string, bench.Adapter, error) {
	c, err := parseBench(line, adapter)
	return c.Argv, c.Adapter, err
}

func machineID(shape profiles.Shape) ledger.Machine { return machine.Identify(shape) }

func toolVersions(tool, adapter string) map[string]string {
	c := bench.Command{Argv: []string{tool}}
	c.Adapter, _ = bench.Lookup(adapter)
	v := bench.ToolVersions(c)
	v["temper-train"] = version
	return v
}

func makeDir(dir string) (bool, error) { return pipeline.MakeDir(dir) }

func writeRefined(path string, res *refine.Result, ledgerPath string, lint func(*profiles.Profile) []profiles.Finding) error {
	return pipeline.WriteRefined(path, res, ledgerPath, lint)
}

func writeReport(dir, ledgerPath string, openLoop bool, prof *profiles.Profile) error {
	return pipeline.WriteReport(dir, ledgerPath, openLoop, prof)
}

func lintForRefine(p *profiles.Profile, path string, lint func(*profiles.Profile) []profiles.Finding, w io.Writer) error {
	fs := lint(p)
	if f, bad := profiles.FirstError(fs); bad {
		return fmt.Errorf("%s: %s; nothing was changed", path, f)
	}
	for _, f := range fs {
		fmt.Fprintf(w, "%s: %s\n", path, f)
	}
	return nil
}

func cmp(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

func startLoad(line, adapter string, timeout time.Duration) (func() (int, error), error) {
	c, err := parseBench(line, adapter)
	if err != nil {
		return nil, err
	}
	c.Timeout = timeout
	return pipeline.StartLoad(c), nil
}

type liveScheduler struct {
	backend scheduler.Backend
	topo    *machine.Topology
	tgt     *target.Target
}

func (s *liveScheduler) sched() refine.Scheduler {
	return (&pipeline.Live{Backend: s.backend, Topology: s.topo, Target: s.tgt}).Scheduler()
}

func (s *liveScheduler) Apply(ctx context.Context, p *profiles.Profile) (refine.Session, error) {
	return s.sched().Apply(ctx, p)
}

func (s *liveScheduler) Alive() error { return s.sched().Alive() }

type refineProgress struct{ line *console.Line }

func newRefineProgress(w io.Writer, quiet bool) *refineProgress {
	return &refineProgress{console.NewLine(w, quiet, 10*time.Second)}
}

func (p *refineProgress) log(format string, args ...any) { p.line.Log(format, args...) }
func (p *refineProgress) update(r refine.Progress)       { p.line.Update(refineProgressText(r)) }

// args turns the target flags back into command-line arguments.
func (f targetFlags) args() []string {
	var a []string
	if f.pid != 0 {
		a = append(a, "--pid", strconv.Itoa(f.pid))
	}
	if f.cgroup != "" {
		a = append(a, "--cgroup", f.cgroup)
	}
	if f.pod != "" {
		a = append(a, "--pod", f.pod)
	}
	if f.container != "" {
		a = append(a, "--container", f.container)
	}
	if f.kubeconfig != "" {
		a = append(a, "--kubeconfig", f.kubeconfig)
	}
	if f.node != "" {
		a = append(a, "--node", f.node)
	}
	return a
}
