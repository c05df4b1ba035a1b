package synthesize

import (
	"bytes"
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/profiles"
)

// fuzzNames are thread and process names that make matchers hard: empty,
// prefixes of each other, shared by roles, exactly 15 bytes, longer than
// the kernel keeps, multi-byte characters cut by the kernel's 15 bytes,
// invalid UTF-8, control characters, a Unicode line separator, spaces.
var fuzzNames = []string{
	"", "a", "wl", "wl-w", "wl-worker-0", "wl-worker-1", "wl-compute-1", "postgres", "mariadbd",
	"exactly15bytes!", "sixteen-bytes-xx", "a-very-long-thread-name-0", "数据库线程池", "ab数据库线程池",
	"\xff\xfe", "x\ny", " space", "GC Thread#0", "GC Thread#1", "ib_io_rd-1", "ib_", "ib", "\u2028ls",
	"redis-server", "bio_aof", "io_thd_1",
}

var fuzzShapes = []string{"2cpu-2c-smt1", "4cpu-2c-smt2", "8cpu-4c-smt2", "4cpu", "16cpu-8c-smt2", "4c"}

var fuzzClasses = analyze.Classes()

// bytesource reads fuzz input as a stream of small choices; past its end
// every choice is 0.
type bytesource struct {
	b []byte
	i int
}

func (s *bytesource) next() int {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return int(s.b[s.i-1])
}

func (s *bytesource) pick(n int) int { return s.next() % n }

// fuzzAnalysis builds an analysis and options from fuzz input.
func fuzzAnalysis(data []byte) (*analyze.Analysis, Options) {
	s := &bytesource{b: data}
	nClusters := 1 + s.pick(4)
	classes := map[int]analyze.Class{}
	for c := 1; c <= nClusters; c++ {
		classes[c] = fuzzClasses[s.pick(len(fuzzClasses))]
	}
	nThreads := 1 + s.pick(30)
	var threads []th
	for i := range nThreads {
		tid := int32(100 + i)
		t := th{tid: tid, tgid: tid, comm: fuzzNames[s.pick(len(fuzzNames))], cluster: 1 + s.pick(nClusters)}
		if i > 0 && s.pick(3) > 0 {
			t.tgid = threads[s.pick(len(threads))].tgid // a thread of an earlier process
		}
		switch s.pick(4) {
		case 0:
			t.family = fuzzNames[s.pick(len(fuzzNames))] // a family that need not fit the comm
		case 1:
			t.family = analyze.Family(t.comm)
		}
		if s.pick(4) == 0 {
			t.process = fuzzNames[s.pick(len(fuzzNames))]
		}
		t.share = float64(s.next()) / 200
		t.p90us = int64(s.next() * s.next())
		t.kernel = s.pick(16) == 15
		threads = append(threads, t)
	}
	a := mkAnalysis(classes, threads...)
	for i := range a.Threads {
		a.Threads[i].Features.CPUs = []int{s.pick(4)}
		if s.pick(8) == 0 {
			a.Threads[i].Features.Run = analyze.Dist{}
		}
	}
	sh, _ := profiles.ParseShape(fuzzShapes[s.pick(len(fuzzShapes))])
	opt := Options{ID: "fuzz", Shape: &sh, RequestMillicores: s.next() * 40}
	return a, opt
}

// FuzzSynthesize: for any analysis, Profile either fails with one
// non-empty line, or returns a profile in which every thread lands where the
// evidence says, that lints clean, that is the same every time, whose TOML
// parses back, whose Helm values carry it byte for byte, and whose
// scx_layered export (or its one-line refusal) obeys scx_layered's rules and
// puts every thread in the same layer. It never panics.
func FuzzSynthesize(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0, 1, 2, 3, 12, 4, 0, 1, 9, 190, 40, 40, 5, 5, 1, 2, 1, 7, 3, 2, 100, 10, 10, 1, 2})
	f.Add([]byte("postgres roles all share one name and split across classes"))
	f.Add(bytes.Repeat([]byte{1, 7, 2, 255, 3, 200, 9}, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, opt := fuzzAnalysis(data)
		r, err := Profile(a, opt)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("internal error: %v", err)
			}
			return
		}
		checkProfile(t, a, r)
		again, err := Profile(a, opt)
		if err != nil {
			t.Fatal(err)
		}
		t1, _ := r.TOML()
		t2, _ := again.TOML()
		if !bytes.Equal(t1, t2) {
			t.Fatalf("not deterministic:\n%s\n---\n%s", t1, t2)
		}
		values, err := HelmValues(opt.ID, t1)
		if err != nil {
			t.Fatal(err)
		}
		if got := helmProfile(t, opt.ID, values); got != string(t1) {
			t.Fatalf("helm values do not carry the TOML:\n%s", values)
		}
		spec, err := LayeredSpec(r.Profile)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("export error is not one line: %q", msg)
			}
			return
		}
		checkLayeredEquivalent(t, a, r.Profile, spec)
	})
}
