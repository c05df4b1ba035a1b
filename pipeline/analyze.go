package pipeline

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/analyze/pictures"
	"temper.codes/temper-train/chart"
	"temper.codes/temper-train/profiles"
)

// AnalyzeOptions say which threads of a trace to analyse and which files
// to write; an empty path writes nothing.
type AnalyzeOptions struct {
	analyze.Options
	JSON string // the analysis (schema temper-train/analysis/v1)
	// DOT is the wake graph for Graphviz; when Graphviz is installed it is
	// also laid out as SVG next to it (FILE.svg for FILE.dot).
	DOT   string
	Plots string // a directory of pictures (SVG and PNG), created if missing
}

// PlotsError is a failure to write the pictures.
type PlotsError struct{ Err error }

func (e *PlotsError) Error() string { return "plots: " + e.Err.Error() }
func (e *PlotsError) Unwrap() error { return e.Err }

// Analyzed is an analysis and the files written from it.
type Analyzed struct {
	*analyze.Analysis
	// Wrote are the DOT file, its SVG and the pictures written, in that
	// order (not the JSON).
	Wrote []string
	// NoSVG says why the wake graph has no SVG ("" when it has one or
	// none was asked for).
	NoSVG string
}

// Analyze analyses the trace at path and writes the outputs opts names.
// A Plots directory that cannot be written fails before the analysis,
// which takes a while.
func Analyze(path string, opts AnalyzeOptions) (*Analyzed, error) {
	if opts.Plots != "" {
		if err := chart.CheckDir(opts.Plots); err != nil {
			return nil, &PlotsError{err}
		}
	}
	a, err := analyze.File(path, opts.Options)
	if err != nil {
		return nil, err // names the file already
	}
	out := &Analyzed{Analysis: a}
	if opts.DOT != "" {
		if err := a.WriteDOTFile(opts.DOT); err != nil {
			return nil, err
		}
		out.Wrote = append(out.Wrote, opts.DOT)
		svg := strings.TrimSuffix(opts.DOT, ".dot") + ".svg"
		switch err := pictures.WakeGraphSVG(a, svg); {
		case errors.Is(err, pictures.ErrNoGraphviz):
			out.NoSVG = fmt.Sprintf("wake graph: %v; wrote %s only", pictures.ErrNoGraphviz, opts.DOT)
		case err != nil:
			return nil, err
		default:
			out.Wrote = append(out.Wrote, svg)
		}
	}
	if opts.Plots != "" {
		plots, err := pictures.Write(a, opts.Plots)
		if err != nil {
			return nil, &PlotsError{err}
		}
		out.Wrote = append(out.Wrote, plots...)
	}
	if opts.JSON != "" {
		if err := a.WriteFile(opts.JSON); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// lintError is the first error finding, as an error saying what was
// refused; nil when there is none.
func lintError(fs []profiles.Finding, format string, args ...any) error {
	f, ok := profiles.FirstError(fs)
	if !ok {
		return nil
	}
	return fmt.Errorf("%s: %s", fmt.Sprintf(format, args...), f)
}

// Report writes the analysis's terminal report (analyze.Analysis.Report)
// and then the files Analyze wrote besides the JSON, one "wrote" line each.
func (a *Analyzed) Report(w io.Writer, opts analyze.ReportOptions) error {
	if err := a.Analysis.Report(w, opts); err != nil {
		return err
	}
	for _, p := range a.Wrote {
		if _, err := fmt.Fprintf(w, "wrote %s\n", p); err != nil {
			return err
		}
	}
	return nil
}
