package ledger

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParse: any bytes either parse or give a one-line error naming the
// ledger; a ledger that parses has a header and its open trials are a
// subset of its starts.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"type":"header","version":1,"seed":3}` + "\n" +
		`{"type":"trial_start","trial":"a","start":"2026-11-25T21:00:00Z","spinners":[12]}` + "\n" +
		`{"type":"trial_end","trial":"a","metrics":{"p99_ms":1.5},"end":"2026-11-25T21:00:01Z"}` + "\n" +
		`{"type":"decision","p":"NaN","effect":{"lo":"-Inf","center":0.1,"hi":"+Inf"},"accepted":false}` + "\n" +
		`{"type":"trial_start","trial":"b"`))
	f.Add([]byte(`{"type":"header","version":1}` + "\n" + `{"type":"end","reason":"converged"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := parse("fuzz.jsonl", bytes.NewReader(data))
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "ledger fuzz.jsonl") {
				t.Fatalf("error not one line naming the ledger: %q", msg)
			}
			return
		}
		if l.Header.Type != KindHeader {
			t.Fatal("parsed without a header")
		}
		starts := map[string]bool{}
		for _, s := range l.Starts {
			starts[s.Trial] = true
		}
		for _, o := range l.Open() {
			if !starts[o.Trial] {
				t.Fatalf("open trial %q never started", o.Trial)
			}
		}
	})
}
