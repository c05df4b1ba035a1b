package main

import (
	"errors"
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
