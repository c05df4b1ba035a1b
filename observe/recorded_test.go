package observe_test

import (
	"encoding/json"
	"os"
	"testing"

	"temper.codes/temper-train/observe/internal/recordtest"
)

// The committed tracefs recording of testdata/workload and /proc's account
// of its window (see recordtest). recorded_linux_test.go's
// TestLiveTracefsRecording records it afresh and, with -update-recorded,
// rewrites both files: its file sorts first, so it runs before the test here
// reads them.
const (
	recordedTracePath = "../testdata/traces/workload-tracefs.txt.gz"
	recordedMetaPath  = "../testdata/traces/workload-tracefs.json"
)

// TestRecordedWorkloadTrace checks the committed recording.
func TestRecordedWorkloadTrace(t *testing.T) {
	b, err := os.ReadFile(recordedMetaPath)
	if err != nil {
		t.Fatalf("%v (create it as root: go test ./observe -run Live -update-recorded)", err)
	}
	var meta recordtest.Meta
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatalf("%s: %v", recordedMetaPath, err)
	}
	if len(meta.Threads) == 0 || meta.PID == 0 || len(meta.Overruns) == 0 {
		t.Fatalf("%s: missing threads, pid or overruns", recordedMetaPath)
	}
	recordtest.Check(t, recordedTracePath, &meta)
}
