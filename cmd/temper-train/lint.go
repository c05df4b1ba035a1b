package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/profiles"
)

// lintFlags are the lint command's options.
type lintFlags struct {
	backend  string
	strict   bool
	demote   bool
	shape    string
	request  string
	builtins []string
	explain  bool
	podJSON  string
	dir      string
}

// newLintCmd is `temper-train lint`. Register it on the root command.
func newLintCmd() *cobra.Command {
	var f lintFlags
	cmd := &cobra.Command{
		Use:   "lint [FILE...]",
		Short: "Check workload profiles before they reach a node; explain which profile a pod gets",
		Long: `Lint loads each profile strictly (unknown keys, wrong types, a missing or
unsupported schema_version, a bad id or treatment are errors naming the line)
and checks that it is sound for the backend and machine that will run it:
every matcher kind exists in the backend, regexes compile under RE2 (no
look-around), comm prefixes fit the kernel's 15-byte comm, no group is made
unreachable by an earlier one (first match wins), exclusive groups follow
exclusive_cores = ceil(cpu_fraction × request), own no more cores than they
have hot threads and fit the machine's cores with one left shared, and hot
threads will not stack on SMT siblings in any group, the remainder included.

Findings are printed one per line as FILE: SEVERITY: group "NAME": FIELD:
MESSAGE. The exit status is 1 when there is an error (or, with --strict, a
warning) and 0 otherwise.

--backend is sched_ext, cfs or scx-layered; without it the profile is checked
against every backend temper-train ships (sched_ext and cfs). --shape (a
shape key such as 8cpu-4c-smt2) and --request (a CPU quantity such as 2250m)
replace the profile's own machine_shape and traits.cpu_request_millicores.
--demote reports an exclusive group too big for the machine as a warning
that it will be demoted to latency treatment instead of an error: what
'apply --demote' does with it (without --demote, apply refuses the profile).

--builtin ID lints a compiled-in profile (repeatable; "all" for every one).

--explain --pod-json POD.json prints how a pod (as kubectl get pod -o json
prints it) resolves to a profile: the annotation temper.codes/workload-profile
(or the legacy infera.io/workload-profile) first, then container images; then
the profiles with that id whose machine_shape matches --shape, a file from
--profiles DIR (laid out DIR/<id>/<shape-key>.toml) replacing a builtin of the
same id and shape, the most specific shape winning.`,
		Example: `  temper-train lint profiles/mysql-innodb/8cpu-4c-smt2.toml
  temper-train lint --backend scx-layered --strict profiles/*/*.toml
  temper-train lint --shape 4cpu-2c-smt2 --request 2250m llama.toml
  temper-train lint --builtin all
  temper-train lint --explain --pod-json pod.json --profiles profiles --shape 8cpu-4c-smt2`,
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runLint(cmd, f, a)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.backend, "backend", "", "check against this backend: sched_ext, cfs or scx-layered (default: sched_ext and cfs)")
	fl.BoolVar(&f.strict, "strict", false, "treat warnings as errors")
	fl.BoolVar(&f.demote, "demote", false, "an exclusive group too big for the machine is a warning (apply --demote demotes it to latency), not an error")
	fl.StringVar(&f.shape, "shape", "", "the machine shape to check against, e.g. 8cpu-4c-smt2 (default: the profile's machine_shape)")
	fl.StringVar(&f.request, "request", "", "the pod's CPU request, e.g. 2250m or 2.25 (default: the profile's traits.cpu_request_millicores)")
	fl.StringSliceVar(&f.builtins, "builtin", nil, `lint the builtin profile with this id ("all" for every one)`)
	fl.BoolVar(&f.explain, "explain", false, "explain which profile the pod in --pod-json resolves to")
	fl.StringVar(&f.podJSON, "pod-json", "", "with --explain: the pod, as kubectl get pod -o json prints it")
	fl.StringVar(&f.dir, "profiles", "", "with --explain: a profiles directory (<id>/<shape-key>.toml) to resolve from besides the builtins")
	return cmd
}

func runLint(cmd *cobra.Command, f lintFlags, files []string) error {
	opt, err := f.options()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.explain {
		if len(files) > 0 || len(f.builtins) > 0 {
			return usageError{errors.New("--explain takes --pod-json, not profile files or --builtin")}
		}
		return explainPod(out, f, opt.Shape)
	}
	if f.podJSON != "" || f.dir != "" {
		return usageError{errors.New("--pod-json and --profiles go with --explain")}
	}
	if len(files) == 0 && len(f.builtins) == 0 {
		return usageError{errors.New("name profile files to lint, or --builtin ID")}
	}

	in, err := profiles.BuiltinInputs(f.builtins)
	if err != nil {
		return usageError{err}
	}
	for _, file := range files {
		in = append(in, profiles.LintInput{Name: file})
	}
	tally, err := profiles.LintAll(out, in, opt, lintFinding)
	if err != nil {
		return err
	}
	return tally.Err()
}

// options turns the flags into LintOptions, rejecting bad values as usage
// errors.
func (f lintFlags) options() (profiles.LintOptions, error) {
	opt := profiles.LintOptions{Backend: f.backend, Strict: f.strict, Demote: f.demote}
	if f.backend != "" {
		if _, err := profiles.MatcherKinds(f.backend); err != nil {
			return opt, usageError{fmt.Errorf("--backend: %w", err)}
		}
	}
	if f.shape != "" {
		s, err := profiles.ParseShape(f.shape)
		if err != nil {
			return opt, usageError{fmt.Errorf("--shape: %w", err)}
		}
		opt.Shape = &s
	}
	if f.request != "" {
		m, err := profiles.ParseMillicores(f.request)
		if err != nil {
			return opt, usageError{fmt.Errorf("--request: %w", err)}
		}
		opt.RequestMillicores = m
	}
	return opt, nil
}

// lintFinding formats a finding naming the options it points to by the
// flags that set them.
func lintFinding(f profiles.Finding) string {
	return f.Format(func(o profiles.Option) string {
		switch o {
		case profiles.OptionRequest:
			return "--request"
		case profiles.OptionShape:
			return "--shape"
		case profiles.OptionDemote:
			return "apply --demote"
		}
		return o.String()
	})
}

// explainPod prints how the pod in --pod-json resolves to a profile.
func explainPod(out io.Writer, f lintFlags, shape *profiles.Shape) error {
	if f.podJSON == "" {
		return usageError{errors.New("--explain needs --pod-json POD.json")}
	}
	pod, err := profiles.ReadPod(f.podJSON)
	if err != nil {
		return err
	}
	cands, err := profiles.Candidates(f.dir)
	if err != nil {
		return err
	}
	var machine profiles.Shape
	if shape != nil {
		machine = *shape
	} else if _, err := fmt.Fprintln(out, "no --shape: any machine shape matches"); err != nil {
		return err
	}
	if err := profiles.Explain(out, cands, pod, machine); err != nil {
		return fmt.Errorf("%s: %w", f.podJSON, err)
	}
	return nil
}

// oneLine keeps an error on one line of output.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " ")
}
