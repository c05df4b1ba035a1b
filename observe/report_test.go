package observe

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReportThreads(t *testing.T) {
	threads := []ThreadSummary{
		{Tid: 10, Tgid: 10, Name: "main", Running: 500e6, SwitchOuts: 7},
		{Tid: 11, Tgid: 10, Name: "worker", Running: 250e6},
		{Tid: 12, Name: "orphan", Running: 1e6},
	}
	cases := []struct {
		name      string
		opts      ReportOptions
		want, not []string
	}{
		{"all", ReportOptions{}, []string{"main", "orphan", " ?  ", "50.0"}, []string{"more threads", "SWITCH-OUTS"}},
		{"top", ReportOptions{Top: 1, AllThreads: "--top 0"}, []string{"main", "(2 more threads; --top 0 lists all)\n"}, []string{"worker"}},
		{"top unsaid", ReportOptions{Top: 2}, []string{"(1 more threads)\n"}, []string{"orphan", "lists all"}},
		{"wide", ReportOptions{Wide: true}, []string{"SWITCH-OUTS", "PREEMPTED", "CPUS"}, nil},
	}
	for _, c := range cases {
		var b bytes.Buffer
		if err := ReportThreads(&b, threads, 1e9, c.opts); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, b.String())
			}
		}
		for _, w := range c.not {
			if strings.Contains(b.String(), w) {
				t.Errorf("%s: %q in\n%s", c.name, w, b.String())
			}
		}
	}
}

func TestReportFiltered(t *testing.T) {
	s := &Summary{Info: TraceInfo{Format: "perfetto", Filtered: true}, Events: map[Kind]int64{KindSwitch: 3}}
	for _, c := range []struct{ filter, want string }{
		{"observe --filter-switches", "were recorded (observe --filter-switches): other"},
		{"", "were recorded: other"},
	} {
		var b bytes.Buffer
		if err := s.Report(&b, "t.pftrace", ReportOptions{Filter: c.filter}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("Filter %q: no %q in\n%s", c.filter, c.want, b.String())
		}
	}
}

// TestConvertWriteJSON converts the committed tracefs text to a gzipped
// Perfetto trace and checks that both summarise to the same JSON but for
// the format, and that WriteJSON keeps the first top threads.
func TestConvertWriteJSON(t *testing.T) {
	out := filepath.Join(t.TempDir(), "w.pftrace.gz")
	c, err := Convert(workloadTracePath, out)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err != nil || st.Size() != c.Bytes || c.Events == 0 {
		t.Fatalf("Convert = %+v; file %v, %v", c, st, err)
	}
	decode := func(path string, top int) SummaryJSON {
		s, err := SummarizeFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := s.WriteJSON(&b, "trace", top); err != nil {
			t.Fatal(err)
		}
		var j SummaryJSON
		if err := json.Unmarshal(b.Bytes(), &j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	in, conv := decode(workloadTracePath, 0), decode(out, 3)
	var n int64
	for _, v := range conv.Events {
		n += v
	}
	if n != c.Events || len(conv.Threads) != 3 || !conv.Gzip || conv.Format == in.Format {
		t.Errorf("converted: %d events (Convert said %d), %d threads, gzip %v, format %q (input %q)",
			n, c.Events, len(conv.Threads), conv.Gzip, conv.Format, in.Format)
	}
	if conv.SchemaVersion != 1 || conv.SpanNS != in.SpanNS || len(in.Threads) <= 3 {
		t.Errorf("schema %d, span %d (input %d), %d input threads", conv.SchemaVersion, conv.SpanNS, in.SpanNS, len(in.Threads))
	}
}
