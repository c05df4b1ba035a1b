package observe

import (
	"os"
	"path/filepath"
	"testing"

	"temper.codes/temper-train/internal/tpcheck"
)

// checkImporterRules holds a trace we wrote to trace_processor's importer
// rules (see internal/tpcheck, which reads the bytes with protowire, not with
// this package's reader) and returns the report.
func checkImporterRules(t *testing.T, name string, data []byte) *tpcheck.Report {
	t.Helper()
	rep, err := tpcheck.Check(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Logf("%s: %s", name, rep)
	if err := rep.Err(); err != nil {
		t.Errorf("%s breaks trace_processor's import rules: %v", name, err)
	}
	return rep
}

// TestImporterRules checks every trace this repository writes or commits:
// the writer's golden stream written afresh, the committed goldens, the
// committed ftrace-text recording converted, and the real-server recordings.
func TestImporterRules(t *testing.T) {
	t.Run("writer/golden-events", func(t *testing.T) {
		checkImporterRules(t, "golden events", writeEvents(t, goldenInfo, goldenEvents()))
	})
	t.Run("convert/workload-tracefs", func(t *testing.T) {
		data, err := os.ReadFile(recordedTracePath)
		if err != nil {
			t.Fatal(err)
		}
		evs, r := readAll(t, recordedTracePath, data)
		rep := checkImporterRules(t, "converted "+recordedTracePath, writeEvents(t, r.Info(), evs))
		if rep.Filtered {
			t.Error("a converted tracefs recording says it is filtered")
		}
	})
	paths := []string{filepath.Join("..", "testdata", "golden", "roundtrip.pftrace")}
	servers, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "servers", "*", "trace.pftrace.gz"))
	if len(servers) == 0 {
		t.Fatal("no committed server traces found")
	}
	for _, p := range append(paths, servers...) {
		t.Run("committed/"+filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p), func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			checkImporterRules(t, p, data)
		})
	}
}
