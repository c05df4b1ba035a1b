package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"temper.codes/temper-train/kubejob"
)

// TestJobFlagError: a Spec field kubejob refuses is reported by its flag.
func TestJobFlagError(t *testing.T) {
	other := errors.New("run id \"x\": bad")
	for _, c := range []struct {
		err  error
		want string
	}{
		{&kubejob.SpecError{Field: "Image", Want: "give an image"}, "no --image: give an image with temper-train on PATH, e.g. --image registry.example/temper-train:v1"},
		{&kubejob.SpecError{Field: "Deadline", Value: time.Duration(0).String(), Want: "want at least 1s"}, "--deadline 0s: want at least 1s"},
		{&kubejob.SpecError{Field: "TTL", Value: "-1s", Want: "want between 0 and 68 years"}, "--ttl -1s: want between 0 and 68 years"},
		{other, other.Error()},
	} {
		if got := jobFlagError(c.err).Error(); got != c.want {
			t.Errorf("jobFlagError(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestWriteJobOutputs: the summary goes to stdout, the note of outputs
// left out says which flag makes them smaller, and each file written is
// named, the profile as such.
func TestWriteJobOutputs(t *testing.T) {
	dir := t.TempDir()
	outs := []kubejob.Output{{Key: kubejob.KeyProfile, Path: "profiles/x/any.toml", Data: []byte("id = \"x\"\n")},
		{Key: kubejob.KeySummary, Path: kubejob.KeySummary, Data: []byte("summary\n")}}
	var stdout, stderr bytes.Buffer
	if err := writeJobOutputs(&stdout, &stderr, dir, outs, "left out trace.pftrace.gz (2.0 MiB)"); err != nil {
		t.Fatal(err)
	}
	if got := stdout.String(); got != "summary\n" {
		t.Errorf("stdout %q, want the summary", got)
	}
	want := "note: left out trace.pftrace.gz (2.0 MiB) (shorten --duration to make them smaller)\n" +
		"wrote " + filepath.Join(dir, "profiles/x/any.toml") + " (the profile)\n" +
		"wrote " + filepath.Join(dir, kubejob.KeySummary) + "\n"
	if got := stderr.String(); got != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, want)
	}
}
