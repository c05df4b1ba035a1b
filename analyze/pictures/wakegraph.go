package pictures

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/internal/atomicfile"
)

// ErrNoGraphviz says Graphviz's dot, which lays out the wake graph, is not
// installed; the DOT file can still be rendered elsewhere.
var ErrNoGraphviz = errors.New("Graphviz is not installed (no dot on PATH; apt-get install graphviz)")

// dotTimeout bounds a layout: dot takes well under a second on the real
// servers' graphs, and a pathological graph should not hang the command.
const dotTimeout = 60 * time.Second

// WakeGraphSVG lays out the analysis's wake graph (analyze's WriteDOT) with
// Graphviz's dot and writes it to path as SVG, atomically.
// ErrNoGraphviz when dot is not installed.
func WakeGraphSVG(a *analyze.Analysis, path string) error {
	bin, err := exec.LookPath("dot")
	if err != nil {
		return fmt.Errorf("wake graph %s: %w", path, ErrNoGraphviz)
	}
	var src bytes.Buffer
	if err := a.WriteDOT(&src); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), dotTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-Tsvg")
	cmd.Stdin = &src
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		msg, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		return fmt.Errorf("wake graph %s: dot -Tsvg: %v: %s", path, err, msg)
	}
	if err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(out.Bytes())
		return err
	}); err != nil {
		return fmt.Errorf("wake graph %s: %w", path, err)
	}
	return nil
}
