package synthesize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/internal/bounded"
	"temper.codes/temper-train/internal/jsonerr"
)

// maxAnalysisBytes caps an analysis file: real ones are well under a MiB.
const maxAnalysisBytes = 64 << 20

// LoadAnalysis reads the analysis JSON that `temper-train analyze --json`
// wrote. Errors name the file and say what to do; they are one line.
func LoadAnalysis(path string) (*analyze.Analysis, error) {
	data, err := bounded.ReadFile(path, maxAnalysisBytes)
	if err != nil {
		return nil, fmt.Errorf("analysis %s: %w", path, err)
	}
	a, err := ReadAnalysis(data)
	if err != nil {
		return nil, fmt.Errorf("analysis %s: %w", path, err)
	}
	return a, nil
}

// ErrNotAnalysis is wrapped by the errors of ReadAnalysis for data that is
// not an analysis of this version at all (empty, no schema, another schema),
// so that a caller can say how to write one.
var ErrNotAnalysis = errors.New("not an analysis of this version")

// ReadAnalysis decodes an analysis. The schema is checked first, so that a
// snapshot, a profile or an analysis of another version is reported as what
// it is rather than as a type error somewhere inside. Unknown fields are
// allowed: adding fields does not change analyze's schema version.
func ReadAnalysis(data []byte) (*analyze.Analysis, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, tagged(ErrNotAnalysis, "empty file: want an analysis (analyze's JSON)")
	}
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, jsonerr.Decode(err, data, "an analysis")
	}
	switch {
	case head.Schema == nil:
		return nil, tagged(ErrNotAnalysis, "no \"schema\" field: not a temper-train analysis (want %q)", analyze.Schema)
	case *head.Schema != analyze.Schema:
		return nil, tagged(ErrNotAnalysis, "schema %q, want %q: analyse the trace again with this version", *head.Schema, analyze.Schema)
	}
	var a analyze.Analysis
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, jsonerr.Decode(err, data, "an analysis")
	}
	return &a, nil
}

// checkAnalysis rejects what synthesize cannot build a profile from, with
// the thread or cluster named: no threads, threads in clusters the analysis
// does not list, classes this version does not know, numbers that are not
// numbers. It returns the clusters by id.
func checkAnalysis(a *analyze.Analysis) (map[int]*analyze.Cluster, error) {
	if a == nil {
		return nil, errors.New("no analysis")
	}
	if a.Schema != "" && a.Schema != analyze.Schema {
		return nil, fmt.Errorf("schema %q, want %q", a.Schema, analyze.Schema)
	}
	clusters := make(map[int]*analyze.Cluster, len(a.Clusters))
	for i := range a.Clusters {
		c := &a.Clusters[i]
		if _, dup := clusters[c.ID]; dup {
			return nil, fmt.Errorf("cluster %d is listed twice", c.ID)
		}
		if !c.Class.Valid() {
			return nil, fmt.Errorf("cluster %d has class %q; this synthesize knows %s, %s, %s and %s (re-run analyze with this version)",
				c.ID, oneLine(string(c.Class)), analyze.ClassSyncCompute, analyze.ClassLatencyCritical, analyze.ClassIOWakeChain, analyze.ClassSporadic)
		}
		if !finite(c.Confidence) || c.Confidence < 0 || c.Confidence > 1 {
			return nil, fmt.Errorf("cluster %d: confidence %v is outside 0..1", c.ID, c.Confidence)
		}
		clusters[c.ID] = c
	}
	user := 0
	for i := range a.Threads {
		t := &a.Threads[i]
		if _, ok := clusters[t.Cluster]; !ok {
			return nil, fmt.Errorf("thread %d (%s) is in cluster %d, which the analysis does not list", t.Tid, quote(t.Comm), t.Cluster)
		}
		f := &t.Features
		for _, v := range []struct {
			name string
			x    float64
		}{{"cpu_share", f.CPUShare}, {"wake_rate_per_s", f.WakeRate}} {
			if !finite(v.x) || v.x < 0 {
				return nil, fmt.Errorf("thread %d (%s): %s %v is not a rate or share", t.Tid, quote(t.Comm), v.name, v.x)
			}
		}
		if !t.Kernel {
			user++
		}
	}
	switch {
	case len(a.Threads) == 0:
		return nil, errors.New("no threads: nothing to group (check analyze's target: its snapshot, pids or process name)")
	case user == 0:
		return nil, errors.New("every thread is a kernel thread: a pod's profile cannot match kernel threads (check analyze's target)")
	}
	if !finite(a.Lint.CFS.ThrottledShare) || a.Lint.CFS.ThrottledShare < 0 || a.Lint.CFS.ThrottledShare > 1 {
		return nil, fmt.Errorf("lint.cfs_bandwidth.throttled_share %v is outside 0..1", a.Lint.CFS.ThrottledShare)
	}
	if !finite(a.Lint.CFS.QuotaCPUs) || a.Lint.CFS.QuotaCPUs < 0 {
		return nil, fmt.Errorf("lint.cfs_bandwidth.quota_cpus %v is not a CPU count", a.Lint.CFS.QuotaCPUs)
	}
	return clusters, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// quote renders a name from the trace for a message or a description:
// quoted, with anything unprintable escaped, so that an odd comm cannot
// break a line or hide itself.
func quote(s string) string { return fmt.Sprintf("%q", s) }

// oneLine keeps a message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
