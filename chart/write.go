package chart

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"temper.codes/temper-train/internal/atomicfile"
)

// Named is a figure and the file name it is written under, without the
// format's extension.
type Named struct {
	Name   string
	Figure *Figure
}

// Write renders every figure in each of formats ("svg", "png"; both when
// none is given) into dir and returns the paths written, figure by figure.
// dir is created if missing; an existing non-directory is an error. Every
// picture is rendered before the first is written and each is written
// atomically (a temporary file renamed into place), so a failure leaves no
// partial file: at worst the pictures written before it, whole, whose paths
// are returned with the error.
func Write(dir string, figs []Named, formats ...string) ([]string, error) {
	fmts, err := Formats(formats)
	if err != nil {
		return nil, err
	}
	if err := CheckDir(dir); err != nil {
		return nil, err
	}
	type picture struct {
		path string
		data []byte
	}
	var pics []picture
	for _, f := range figs {
		for _, format := range fmts {
			data, err := f.Figure.Render(format)
			if err != nil {
				return nil, fmt.Errorf("plot %s.%s: %w", f.Name, format, err)
			}
			pics = append(pics, picture{filepath.Join(dir, f.Name+"."+format), data})
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot directory %s: %w", dir, err)
	}
	var written []string
	for _, p := range pics {
		err := atomicfile.Write(p.path, 0o644, func(w io.Writer) error {
			if _, err := w.Write(p.data); err != nil {
				return fmt.Errorf("write %s: %w", p.path, err)
			}
			return nil
		})
		if err != nil {
			return written, err // names the file
		}
		written = append(written, p.path)
	}
	return written, nil
}

// CheckDir returns an error naming dir unless it can be Write's output
// directory as far as can be told without writing: it must be a directory
// or not exist yet. Commands call it before slow work so a wrong path fails
// fast.
func CheckDir(dir string) error {
	if dir == "" {
		return errors.New("plot directory: empty path; give a directory to write the pictures to")
	}
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("plot directory %s exists and is not a directory; give a new or existing directory", dir)
	case err == nil, errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("plot directory %s: %w", dir, err)
	}
}

// Formats checks requested picture formats and removes repeats; none means
// svg and png.
func Formats(formats []string) ([]string, error) {
	if len(formats) == 0 {
		return []string{"svg", "png"}, nil
	}
	var out []string
	for _, f := range formats {
		if f != "svg" && f != "png" {
			return nil, fmt.Errorf("plot format %q: want svg or png", f)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}
