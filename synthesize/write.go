package synthesize

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"unicode"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/profiles"
)

// TOML renders the profile as profiles.Marshal writes it (deterministic,
// stable field order) under the generated header comment.
func (r *Result) TOML() ([]byte, error) {
	body, err := profiles.Marshal(r.Profile)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, l := range r.Header {
		b.WriteString("# ")
		b.WriteString(commentText(l))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(body)
	return b.Bytes(), nil
}

// Path is where the profile goes under dir: <dir>/<id>/<shape-key>.toml.
func (r *Result) Path(dir string) string {
	return filepath.Join(dir, profiles.RelPath(r.Profile.ID, r.Profile.MachineShape))
}

// WriteFile writes the profile to Path(dir), creating <dir>/<id>, and
// returns the path. The file is replaced whole or not at all; an existing
// file is overwritten (it is in git: the diff shows what changed).
func (r *Result) WriteFile(dir string) (string, error) {
	data, err := r.TOML()
	if err != nil {
		return "", err
	}
	path := r.Path(dir)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("profile %s: %w", path, err)
	}
	if err := writeFile(path, data); err != nil {
		return "", fmt.Errorf("profile %s: %w", path, err)
	}
	return path, nil
}

// writeFile writes data to path atomically.
func writeFile(path string, data []byte) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// commentText keeps a header line on its line: anything unprintable is
// written as a Go escape.
func commentText(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		if unicode.IsPrint(r) {
			b.WriteRune(r)
		} else {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}
