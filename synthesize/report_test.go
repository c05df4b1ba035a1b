package synthesize

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"temper.codes/temper-train/profiles"
)

func llama(t *testing.T) *Result {
	t.Helper()
	r, err := Profile(inference(), Options{ID: "llama", Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 2250, NodeBusyCPUs: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReportGroups(t *testing.T) {
	r := llama(t)
	var b bytes.Buffer
	if err := r.ReportGroups(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "profile llama for 8cpu-4c-smt2 (request 2250m, ") {
		t.Errorf("first line %q", lines[0])
	}
	if len(lines) != 2+len(r.Profile.ThreadGroups) || !strings.HasPrefix(lines[1], "GROUP ") || !strings.Contains(lines[1], " TREATMENT  THREADS  HOT") {
		t.Fatalf("want a header and one row per group:\n%s", b.String())
	}
	last := lines[len(lines)-1]
	if !strings.HasSuffix(last, "  all") {
		t.Errorf("the catch-all's row %q does not end in its match", last)
	}
}

func TestMatchText(t *testing.T) {
	leader := true
	cases := []struct {
		m    profiles.Match
		want string
	}{
		{profiles.Match{All: true}, "all"},
		{profiles.Match{CommPrefix: []string{"wl-", "a b"}, ExcludePrefix: []string{"wl-io"}},
			`comm_prefix="wl-","a b" exclude_prefix="wl-io"`},
		{profiles.Match{CommRegex: "^io_", PcommPrefix: []string{"pg"}, CmdlinePrefix: []string{"/bin/x"}, GroupLeader: &leader, CgroupPrefix: "/kube"},
			`comm_regex="^io_" pcomm_prefix="pg" cmdline_prefix="/bin/x" group_leader=true cgroup_prefix="/kube"`},
	}
	for _, c := range cases {
		if got := matchText(c.m); got != c.want {
			t.Errorf("matchText(%+v) = %s, want %s", c.m, got, c.want)
		}
	}
}

func TestExport(t *testing.T) {
	r := llama(t)
	toml, err := r.TOML()
	if err != nil {
		t.Fatal(err)
	}
	helm, err := r.Export(ExportHelm, toml)
	if err != nil || !bytes.Contains(helm, []byte("llama")) {
		t.Errorf("helm: %v\n%s", err, helm)
	}
	spec, err := r.Export(ExportLayered, toml)
	if want, _ := LayeredSpec(r.Profile); err != nil || !bytes.Equal(spec, want) {
		t.Errorf("scx-layered: %v; not LayeredSpec's", err)
	}
	if _, err := r.Export("yaml", toml); !errors.Is(err, ErrExportKind) {
		t.Errorf("unknown kind: %v, want ErrExportKind", err)
	}
	r.Profile.ThreadGroups[0].Match = profiles.Match{CommRegex: "^llama"}
	if _, err := r.Export(ExportLayered, toml); err == nil || !strings.Contains(err.Error(), "no comm_regex matcher") {
		t.Errorf("comm_regex on scx-layered: %v, want the lint error", err)
	}
}
