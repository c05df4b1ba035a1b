package kubejob

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/internal/bytesize"
)

// Annotations of the run's ConfigMap.
const (
	// AnnotationStatus is pending until the pod publishes, then succeeded
	// or failed.
	AnnotationStatus = "temper.codes/status"
	// AnnotationPaths maps each data key to the relative path the output
	// is written to locally (JSON object).
	AnnotationPaths = "temper.codes/paths"
	// AnnotationNote says which outputs were left out and why.
	AnnotationNote = "temper.codes/note"
)

// Values of AnnotationStatus.
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// MaxConfigMapBytes is the most a ConfigMap's values (data and binaryData
// together) may hold: the API server refuses more.
const MaxConfigMapBytes = 1 << 20

// Output is one file a run brings back.
type Output struct {
	Key  string // the ConfigMap key: letters, digits, '-', '_', '.'
	Path string // where it goes under the local output directory
	Data []byte
	// Binary outputs go in binaryData (the gzipped trace).
	Binary bool
	// Required outputs must fit or the run fails; the others are left
	// out, whole, when they do not.
	Required bool
}

// Well-known keys.
const (
	KeySummary = "summary.txt" // the stage's standard output
	KeyError   = "error.txt"   // why the stage failed, with its stderr's tail
	KeyProfile = "profile.toml"
)

// ErrTooLarge: the outputs a run must return do not fit in a ConfigMap.
var ErrTooLarge = errors.New("outputs too large for a ConfigMap")

// Pack puts outputs into a ConfigMap's data within limit bytes. Outputs
// are taken in order; a required one that does not fit is an error, an
// optional one that does not fit is left out whole (never cut) and the
// note says so (a shorter run makes smaller outputs: a command says which
// of its options gives one). Nothing is ever truncated.
func Pack(outs []Output, limit int) (data map[string]string, binary map[string][]byte, paths map[string]string, note string, err error) {
	data, binary, paths = map[string]string{}, map[string][]byte{}, map[string]string{}
	used := 0
	for _, o := range outs {
		if !o.Required {
			continue
		}
		used += len(o.Data)
	}
	if used > limit {
		var parts []string
		for _, o := range outs {
			if o.Required {
				parts = append(parts, fmt.Sprintf("%s %s", o.Key, bytesize.Format(int64(len(o.Data)))))
			}
		}
		return nil, nil, nil, "", fmt.Errorf("%w: %s exceed the ConfigMap limit of %s", ErrTooLarge, strings.Join(parts, " + "), bytesize.Format(int64(limit)))
	}
	var left []string
	for _, o := range outs {
		if !o.Required {
			if used+len(o.Data) > limit {
				left = append(left, fmt.Sprintf("%s (%s)", o.Key, bytesize.Format(int64(len(o.Data)))))
				continue
			}
			used += len(o.Data)
		}
		if o.Binary {
			binary[o.Key] = o.Data
		} else {
			data[o.Key] = string(o.Data)
		}
		paths[o.Key] = o.Path
	}
	if len(left) > 0 {
		note = fmt.Sprintf("left out %s: a ConfigMap holds at most %s and the outputs above took %s; they were not cut, and the pod's copy is gone with it",
			strings.Join(left, ", "), bytesize.Format(int64(limit)), bytesize.Format(int64(used)))
	}
	return data, binary, paths, note, nil
}

// Fill writes packed outputs and the status into the run's ConfigMap.
func Fill(cm *corev1.ConfigMap, status string, outs []Output, limit int) error {
	data, binary, paths, note, err := Pack(outs, limit)
	if err != nil {
		return err
	}
	p, err := json.Marshal(paths)
	if err != nil {
		return err
	}
	cm.Data, cm.BinaryData = data, binary
	if len(binary) == 0 {
		cm.BinaryData = nil
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[AnnotationStatus] = status
	cm.Annotations[AnnotationPaths] = string(p)
	if note != "" {
		cm.Annotations[AnnotationNote] = note
	} else {
		delete(cm.Annotations, AnnotationNote)
	}
	return nil
}

// Outputs reads a run's outputs back from its ConfigMap, sorted by key.
func Outputs(cm *corev1.ConfigMap) ([]Output, error) {
	paths := map[string]string{}
	if p := cm.Annotations[AnnotationPaths]; p != "" {
		if err := json.Unmarshal([]byte(p), &paths); err != nil {
			return nil, fmt.Errorf("configmap %s/%s: annotation %s: %w", cm.Namespace, cm.Name, AnnotationPaths, err)
		}
	}
	var outs []Output
	for k, v := range cm.Data {
		outs = append(outs, Output{Key: k, Path: paths[k], Data: []byte(v)})
	}
	for k, v := range cm.BinaryData {
		outs = append(outs, Output{Key: k, Path: paths[k], Data: v, Binary: true})
	}
	sort.Slice(outs, func(i, j int) bool { return outs[i].Key < outs[j].Key })
	for i := range outs {
		p := outs[i].Path
		if p == "" {
			outs[i].Path = outs[i].Key
			continue
		}
		// The paths come from the cluster: never let one leave the
		// output directory.
		if !filepath.IsLocal(p) {
			return nil, fmt.Errorf("configmap %s/%s: output %s has path %q outside the output directory", cm.Namespace, cm.Name, outs[i].Key, p)
		}
	}
	return outs, nil
}

// WriteOutputs writes each output to its Path under dir, each file whole
// or not at all (atomicfile), creating directories as needed; a Path that
// would leave dir is an error. It returns the paths written, in the order
// of outs; on an error, those written before it.
func WriteOutputs(dir string, outs []Output) ([]string, error) {
	var written []string
	for _, o := range outs {
		if !filepath.IsLocal(o.Path) {
			return written, fmt.Errorf("output %s: path %q is outside the output directory", o.Key, o.Path)
		}
		path := filepath.Join(dir, o.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return written, err
		}
		if err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
			_, err := w.Write(o.Data)
			return err
		}); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}

// Collect gathers a finished stage's outputs from its output directory,
// most important first (Pack keeps that order): the summary it printed,
// the profile (train), the report, the snapshot, the analysis, the ledger,
// the gzipped trace. stageErr is the stage's error, nil if it succeeded;
// stderrTail the end of what it wrote to stderr.
func Collect(stage, dir string, stdout []byte, stageErr error, stderrTail []byte) ([]Output, error) {
	outs := []Output{{Key: KeySummary, Path: KeySummary, Data: stdout, Required: true}}
	if stageErr != nil {
		msg := stageErr.Error() + "\n"
		if len(stderrTail) > 0 {
			msg += "\nend of its stderr:\n" + string(stderrTail)
		}
		outs = append(outs, Output{Key: KeyError, Path: KeyError, Data: []byte(msg), Required: true})
	}
	file := func(key, rel string, required bool) error {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		switch {
		case errors.Is(err, fs.ErrNotExist) && (!required || stageErr != nil):
			return nil
		case err != nil:
			return err
		}
		outs = append(outs, Output{Key: key, Path: rel, Data: b, Required: required})
		return nil
	}
	obs := ""
	if stage == StageTrain {
		obs = "observe"
		prof, err := trainedProfile(dir)
		if err != nil && stageErr == nil {
			return nil, err
		}
		if prof != "" {
			if err := file(KeyProfile, prof, true); err != nil {
				return nil, err
			}
			// Locally it goes where synthesize puts profiles, whether
			// refine kept a refined one or not.
			id, shape := filepath.Base(filepath.Dir(prof)), filepath.Base(prof)
			outs[len(outs)-1].Path = filepath.Join("profiles", id, shape)
		}
		if err := file("REPORT.md", "refine/REPORT.md", false); err != nil {
			return nil, err
		}
	}
	if err := file("snapshot.json", filepath.Join(obs, "snapshot.json"), false); err != nil {
		return nil, err
	}
	if stage == StageTrain {
		for _, f := range [][2]string{{"analysis.json", "analysis.json"}, {"ledger.jsonl", "refine/ledger.jsonl"}} {
			if err := file(f[0], f[1], false); err != nil {
				return nil, err
			}
		}
	}
	trace := filepath.Join(obs, "trace.pftrace")
	if b, err := os.ReadFile(filepath.Join(dir, trace)); err == nil {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		if _, err := w.Write(b); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		outs = append(outs, Output{Key: "trace.pftrace.gz", Path: trace + ".gz", Data: z.Bytes(), Binary: true})
	}
	return outs, nil
}

// trainedProfile is the profile a train run ends with, relative to dir:
// the refined one (refine/ID/SHAPE.toml) if refine kept one, else the
// synthesized one (profiles/ID/SHAPE.toml).
func trainedProfile(dir string) (string, error) {
	for _, pattern := range []string{"refine/*/*.toml", "profiles/*/*.toml"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return "", err
		}
		if len(m) > 1 {
			slices.Sort(m)
			return "", fmt.Errorf("train left %d profiles (%s): want one", len(m), strings.Join(m, ", "))
		}
		if len(m) == 1 {
			return filepath.Rel(dir, m[0])
		}
	}
	return "", fmt.Errorf("train left no profile in %s", dir)
}
