// Command temper-train is the offline training pipeline of the temper node
// scheduler: it measures a workload's threads and writes the workload profile
// that tells the scheduler how to treat each group of them.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError marks errors in how the command was called (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "temper-train: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintln(stderr, "Run 'temper-train --help' for usage.")
		return exitUsage
	}
	return exitFailure
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "temper-train",
		Short: "Measure a workload's threads and train its scheduling profile",
		Long: `temper-train turns measurements of a running workload into a workload profile:
a TOML file that groups the workload's threads by name and gives each group a
scheduling treatment, keyed to the machine shape it was measured on.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	addProfileFlag(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newVersionCmd(), newTraceCmd(), newObserveCmd(), newAnalyzeCmd())
	root.AddCommand(newLintCmd())
	root.AddCommand(newApplyCmd())
	root.AddCommand(newSynthesizeCmd())
	root.AddCommand(newRefineCmd(), newTrainCmd())
	root.AddCommand(newJobCmd(), newProfilesCmd())
	return root
}

// args wraps a cobra argument validator so its failures count as usage errors.
func args(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := v(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Example: "  temper-train version",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "temper-train %s\n", version)
			return err
		},
	}
}

// addProfileFlag adds the hidden --cpuprofile FILE flag: a CPU profile of the
// command, for looking into a slow run or as a default.pgo for
// profile-guided optimisation.
func addProfileFlag(root *cobra.Command) {
	var path string
	var f *os.File
	root.PersistentFlags().StringVar(&path, "cpuprofile", "", "write a CPU profile of the command to `FILE`")
	root.PersistentFlags().MarkHidden("cpuprofile")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if path == "" {
			return nil
		}
		var err error
		if f, err = os.Create(path); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			f = nil
			return fmt.Errorf("--cpuprofile %s: %w", path, err)
		}
		return nil
	}
	root.PersistentPostRunE = func(*cobra.Command, []string) error {
		if f == nil {
			return nil
		}
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpuprofile %s: %w", path, err)
		}
		return nil
	}
}
