package pipeline

import (
	"fmt"
	"io"
	"path/filepath"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/synthesize"
)

// SynthesizeOptions say how to synthesize a profile and where to write it.
type SynthesizeOptions struct {
	synthesize.Options
	// Out is the profiles tree the profile is written to, at
	// profiles.RelPath; "" writes nothing.
	Out string
	// Exports are other forms of the profile to write (Kind and File set).
	Exports []Export
}

// Export is the profile in another form (synthesize.ExportLayered,
// ExportHelm), for a file.
type Export struct {
	Kind, File string
	// Name says the export in messages, in the caller's words (the command
	// names its flag); "" says "the KIND export".
	Name string
	// Data is the export itself, made by Synthesize.
	Data []byte
}

func (e Export) name() string {
	if e.Name != "" {
		return e.Name
	}
	return "the " + e.Kind + " export"
}

// Synthesized is a synthesized profile and where it and its exports were
// written.
type Synthesized struct {
	*synthesize.Result
	Path    string // "" when not written
	Exports []Export
	// Alternatives are the portfolio's other profiles as written, least
	// risky first (synthesize.Result.WritePortfolio); nil when not written.
	Alternatives []string
}

// OutputError is an output that could not be made or written; Name says
// which, in the caller's words when it gave them ("" when Err says it).
type OutputError struct {
	Name string
	Err  error
}

func (e *OutputError) Error() string {
	if e.Name == "" {
		return e.Err.Error()
	}
	return e.Name + ": " + e.Err.Error()
}

func (e *OutputError) Unwrap() error { return e.Err }

// ClashError is an output that would be written over an input or over
// another output: Path is the file, Output and Other say the two.
type ClashError struct {
	Output, Path, Other string
}

func (e *ClashError) Error() string {
	return fmt.Sprintf("%s would be written to %s, which is %s", e.Output, e.Path, e.Other)
}

// Synthesize turns an analysis into a self-checked profile, makes its
// exports and writes both: the profile under opts.Out, each export to its
// file, all whole or not at all. Before it writes anything it refuses, with
// a *ClashError, to write over the analysis (opts.Source), the snapshot
// (opts.SnapshotPath) or one output over another. Errors of synthesis wrap
// synthesize's sentinels (ErrID, ErrShape, …); those of an output are an
// *OutputError.
func Synthesize(a *analyze.Analysis, opts SynthesizeOptions) (*Synthesized, error) {
	r, err := synthesize.Profile(a, opts.Options)
	if err != nil {
		return nil, err
	}
	out := &Synthesized{Result: r}
	if len(opts.Exports) > 0 {
		data, err := r.TOML()
		if err != nil {
			return nil, err
		}
		out.Exports = append([]Export(nil), opts.Exports...)
		for i := range out.Exports {
			e := &out.Exports[i]
			if e.Data, err = r.Export(e.Kind, data); err != nil {
				return nil, &OutputError{e.name(), err}
			}
		}
	}
	if opts.Out != "" {
		out.Path = r.Path(opts.Out)
	}
	if err := checkClashes(opts, out.Path, out.Exports); err != nil {
		return nil, err
	}
	if opts.Out != "" {
		if _, err := r.WriteFile(opts.Out); err != nil {
			return nil, &OutputError{Err: err}
		}
		if out.Alternatives, err = r.WritePortfolio(opts.Out); err != nil {
			return nil, &OutputError{Err: err}
		}
	}
	for _, e := range out.Exports {
		if err := atomicfile.Write(e.File, 0o644, func(w io.Writer) error {
			_, err := w.Write(e.Data)
			return err
		}); err != nil {
			return nil, &OutputError{e.name(), err}
		}
	}
	return out, nil
}

// checkClashes refuses to write the profile (at path) or an export over
// the analysis, the snapshot or another output.
func checkClashes(opts SynthesizeOptions, path string, exports []Export) error {
	seen := map[string]string{}
	for _, in := range []struct{ what, path string }{{"the analysis", opts.Source}, {"the snapshot", opts.SnapshotPath}} {
		if in.path != "" {
			seen[filepath.Clean(in.path)] = in.what
		}
	}
	outs := []struct{ what, path string }{{"the profile", path}}
	for _, e := range exports {
		outs = append(outs, struct{ what, path string }{e.name(), e.File})
	}
	for _, o := range outs {
		if o.path == "" {
			continue
		}
		p := filepath.Clean(o.path)
		if what, ok := seen[p]; ok {
			return &ClashError{Output: o.what, Path: o.path, Other: what}
		}
		seen[p] = o.what
	}
	return nil
}

// Report writes the profile's groups, the files written and the helm
// command that deploys the profile (from its file, or from ./ID.toml when
// it was not written).
func (s *Synthesized) Report(w io.Writer) error {
	if err := s.ReportGroups(w); err != nil {
		return err
	}
	helmSource := s.Path
	if s.Path == "" {
		helmSource = "./" + synthesize.HelmKey(s.Profile.ID, "")
	} else {
		fmt.Fprintf(w, "wrote %s\n", s.Path)
	}
	for _, a := range s.Alternatives {
		fmt.Fprintf(w, "wrote %s (portfolio alternative; refine races it)\n", a)
	}
	for _, e := range s.Exports {
		fmt.Fprintf(w, "wrote %s (%s)\n", e.File, e.Kind)
	}
	_, err := fmt.Fprintf(w, "deploy: %s\n", synthesize.HelmCommand(s.Profile.ID, helmSource))
	return err
}
