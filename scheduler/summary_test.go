package scheduler

import (
	"errors"
	"strings"
	"testing"
	"time"

	"temper.codes/temper-train/profiles"
)

func TestSummaryWrite(t *testing.T) {
	stats := []GroupStats{{Group: "workers", Treatment: profiles.Latency, Threads: 2, RuntimeNs: 1e9}}
	var table strings.Builder
	if err := WriteStats(&table, stats, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	head := "profile   wl (backend cfs)\ntarget    pid 42\nstopped   after 2.00 s: the target exited\n"
	for _, tc := range []struct {
		name string
		sum  Summary
		want string
	}{
		{"clean", Summary{Elapsed: 2 * time.Second, Stats: stats}, head + "reverted  every change\n\n" + table.String()},
		{"revert failed", Summary{Elapsed: 2 * time.Second, Stats: stats, RevertErr: errors.New("eperm")},
			head + "reverted  FAILED (see the error below)\n\n" + table.String()},
		{"no stats", Summary{Elapsed: 2 * time.Second, StatsErr: errors.New("gone")}, head + "reverted  every change\n"},
	} {
		var b strings.Builder
		if err := tc.sum.Write(&b, "wl", "cfs", "pid 42", "the target exited"); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s: Write =\n%s\nwant\n%s", tc.name, b.String(), tc.want)
		}
	}
}

func TestSummaryErrs(t *testing.T) {
	stop, revert, stats := errors.New("refresh failed"), errors.New("eperm"), errors.New("gone")
	for _, tc := range []struct {
		name  string
		sum   Summary
		retry string
		want  []string
	}{
		{"clean", Summary{}, " (retry)", nil},
		{"all", Summary{Err: stop, RevertErr: revert, StatsErr: stats}, " (retry)",
			[]string{"refresh failed", "revert: eperm (retry)", "stats: gone"}},
		{"revert, no advice", Summary{RevertErr: revert}, "", []string{"revert: eperm"}},
	} {
		errs := tc.sum.Errs(tc.retry)
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: Errs = %q; want %q", tc.name, got, tc.want)
		}
		if tc.sum.RevertErr != nil && !errors.Is(errors.Join(errs...), revert) {
			t.Errorf("%s: the revert error is not wrapped", tc.name)
		}
	}
}
