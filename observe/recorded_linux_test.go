//go:build linux

package observe_test

import (
	"compress/gzip"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/observe/internal/recordtest"
)

var updateRecorded = flag.Bool("update-recorded", false,
	"TestLiveTracefsRecording also rewrites testdata/traces/workload-tracefs.{txt.gz,json} (needs root)")

// maxRecordedGz bounds the committed trace.
const maxRecordedGz = 4 << 20

// TestLiveTracefsRecording records the workload now and checks the recording.
func TestLiveTracefsRecording(t *testing.T) {
	need.Root(t, "to record with tracefs")
	dir := t.TempDir()
	bin := testkit.Workload(t)
	tracePath := filepath.Join(dir, "trace.txt")
	meta := recordtest.RecordWorkload(t, bin, dir, tracePath, &recordtest.Tracefs{})
	recordtest.Check(t, tracePath, meta)
	if t.Failed() {
		if *updateRecorded {
			t.Fatal("recording failed its checks; committed files not updated")
		}
		return
	}
	if *updateRecorded {
		writeRecorded(t, tracePath, meta)
	}
}

// writeRecorded writes the committed trace (gzip, best compression) and json.
func writeRecorded(t *testing.T, tracePath string, meta *recordtest.Meta) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(recordedTracePath), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tmp := recordedTracePath + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tmp)
	zw, err := gzip.NewWriterLevel(out, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	zw.Name = "workload-tracefs.txt"
	if _, err := io.Copy(zw, in); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > maxRecordedGz {
		t.Fatalf("gzipped trace is %d bytes, more than %d: shorten recordtest's recordWindow", fi.Size(), maxRecordedGz)
	}
	js, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, recordedTracePath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(recordedMetaPath, append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes) and %s", recordedTracePath, fi.Size(), recordedMetaPath)
}
