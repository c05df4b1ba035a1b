package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/observe/snapshot"
	"temper.codes/temper-train/pipeline"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/synthesize"
)

// Export kinds of synthesize --export.
const (
	exportLayered = "scx-layered"
	exportHelm    = "helm"
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

  sync_compute      → exclusive whole cores, one per hot thread (cpu_share ≥ 0.3)
  latency_critical  → exclusive when its hot threads fit the shape, else latency
  io_wake_chain     → latency (preempt, higher weight)
  sporadic          → the catch-all, yield

exclusive_cores = ceil(cpu_fraction × request), with cpu_fraction chosen so
that it equals the hot threads and one core stays shared; a group that does
not fit is demoted to latency with a warning. The arithmetic and the measured
evidence are written into the profile.

The machine shape comes from --snapshot (observe's snapshot.json: topology,
pod requests and limits, cgroup quota), else --shape (e.g. 8cpu-4c-smt2), else
the CPU count the trace recorded (logical CPUs only: no exclusive cores). The
request comes from --request, else the snapshot, else the observed CPU use
rounded up to whole CPUs.

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

// export is one --export: what to write and where.
type export struct {
	kind, file string
	data       []byte
}

// parseExports pairs each --export KIND with its FILE: "KIND=FILE", or the
// next argument after the analysis ("--export KIND FILE", which the flag
// parser leaves as an argument).
func parseExports(values, extra []string) ([]export, error) {
	var out []export
	for _, v := range values {
		kind, file, ok := strings.Cut(v, "=")
		if !ok {
			if len(extra) == 0 {
				return nil, fmt.Errorf("--export %s needs a FILE: --export %s FILE", v, v)
			}
			file, extra = extra[0], extra[1:]
		}
		switch kind {
		case exportLayered, exportHelm:
		default:
			return nil, fmt.Errorf("--export %q: unknown kind (known: %s, %s)", kind, exportLayered, exportHelm)
		}
		if file == "" {
			return nil, fmt.Errorf("--export %s: empty FILE", kind)
		}
		if slices.ContainsFunc(out, func(e export) bool { return e.kind == kind }) {
			return nil, fmt.Errorf("--export %s given twice", kind)
		}
		out = append(out, export{kind: kind, file: file})
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

// runSynthesize checks the flags, synthesizes and self-checks the profile,
// builds every output in memory and only then writes the files.
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
		m, err := parseMillicores(f.request)
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
	syn, err := pipeline.Synthesize(an, pipeline.SynthesizeOptions{Options: opt})
	if err != nil {
		return fmt.Errorf("synthesize %s: %w", a[0], synthesizeFlagError(err))
	}
	r := syn.Result
	data, err := r.TOML()
	if err != nil {
		return fmt.Errorf("synthesize %s: %w", a[0], err)
	}
	path := r.Path(f.out)
	helmSource := path
	if f.out == "-" {
		path, helmSource = "", "./"+synthesize.HelmKey(f.id, "")
	}
	for i := range exports {
		e := &exports[i]
		switch e.kind {
		case exportLayered:
			if fd, bad := profiles.FirstError(profiles.Lint(r.Profile, profiles.LintOptions{Backend: profiles.BackendSCXLayered})); bad {
				return fmt.Errorf("--export %s: %s", e.kind, fd)
			}
			e.data, err = synthesize.LayeredSpec(r.Profile)
		case exportHelm:
			e.data, err = synthesize.HelmValues(f.id, data)
		}
		if err != nil {
			return fmt.Errorf("--export %s: %w", e.kind, err)
		}
	}
	if err := checkOutputs(a[0], f.snapshot, path, exports); err != nil {
		return usageError{err}
	}

	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for _, w := range r.Warnings {
		fmt.Fprintf(stderr, "temper-train: warning: %s\n", w)
	}
	for _, fd := range r.Lint {
		fmt.Fprintf(stderr, "temper-train: lint: %s\n", fd)
	}
	report := stdout
	if path == "" {
		if _, err := stdout.Write(data); err != nil {
			return err
		}
		report = stderr
	} else {
		if _, err := r.WriteFile(f.out); err != nil {
			return err
		}
	}
	for _, e := range exports {
		if err := atomicfile.Write(e.file, 0o644, func(w io.Writer) error {
			_, err := w.Write(e.data)
			return err
		}); err != nil {
			return fmt.Errorf("--export %s: %w", e.kind, err)
		}
	}
	return printSynthesis(report, r, path, helmSource, exports)
}

// checkOutputs refuses to write over an input or to write two outputs to
// one file.
func checkOutputs(analysis, snap, profile string, exports []export) error {
	seen := map[string]string{}
	for _, in := range []struct{ what, path string }{{"the analysis", analysis}, {"the snapshot", snap}} {
		if in.path != "" {
			seen[filepath.Clean(in.path)] = in.what
		}
	}
	outs := []struct{ what, path string }{{"the profile", profile}}
	for _, e := range exports {
		outs = append(outs, struct{ what, path string }{"--export " + e.kind, e.file})
	}
	for _, o := range outs {
		if o.path == "" {
			continue
		}
		p := filepath.Clean(o.path)
		if what, ok := seen[p]; ok {
			return fmt.Errorf("%s would be written to %s, which is %s", o.what, o.path, what)
		}
		seen[p] = o.what
	}
	return nil
}

// printSynthesis prints the groups as a table, the files written and the
// helm command that deploys the profile.
func printSynthesis(w io.Writer, r *synthesize.Result, path, helmSource string, exports []export) error {
	p := r.Profile
	fmt.Fprintf(w, "profile %s for %s (request %dm, %d threads, %d hot)\n", p.ID, p.MachineShape.Key(),
		p.Traits.CPURequestMillicores, p.Traits.Threads, p.Traits.HotThreads)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTREATMENT\tTHREADS\tHOT\tCORES\tCPU_FRACTION\tSLICE_US\tWEIGHT\tMATCH")
	for _, g := range p.ThreadGroups {
		threads, hot := "-", "-"
		if e := g.Evidence; e != nil {
			threads, hot = strconv.Itoa(e.Threads), strconv.Itoa(e.HotThreads)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", g.Name, g.Treatment, threads, hot,
			dash(g.ExclusiveCores), dashF(g.CPUFraction), dash(g.SliceUs), g.Weight, matchSummary(g.Match))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if path != "" {
		fmt.Fprintf(w, "wrote %s\n", path)
	}
	for _, e := range exports {
		fmt.Fprintf(w, "wrote %s (%s)\n", e.file, e.kind)
	}
	_, err := fmt.Fprintf(w, "deploy: %s\n", synthesize.HelmCommand(p.ID, helmSource))
	return err
}

func dash(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func dashF(x float64) string {
	if x == 0 {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// matchSummary writes a match as kind=values, ANDed with spaces.
func matchSummary(m profiles.Match) string {
	var parts []string
	list := func(kind string, v []string) {
		if len(v) > 0 {
			parts = append(parts, kind+"="+strings.Join(quoteAll(v), ","))
		}
	}
	list("comm_prefix", m.CommPrefix)
	if m.CommRegex != "" {
		parts = append(parts, "comm_regex="+strconv.Quote(m.CommRegex))
	}
	list("exclude_prefix", m.ExcludePrefix)
	list("pcomm_prefix", m.PcommPrefix)
	list("cmdline_prefix", m.CmdlinePrefix)
	if m.GroupLeader != nil {
		parts = append(parts, "group_leader="+strconv.FormatBool(*m.GroupLeader))
	}
	if m.CgroupPrefix != "" {
		parts = append(parts, "cgroup_prefix="+strconv.Quote(m.CgroupPrefix))
	}
	if m.All {
		parts = append(parts, "all")
	}
	return strings.Join(parts, " ")
}

func quoteAll(v []string) []string {
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = strconv.Quote(s)
	}
	return out
}
