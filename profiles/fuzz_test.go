package profiles

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics; every profile it accepts comes back equal
// through Marshal (and Marshal is stable); Lint never panics on it.
func FuzzParse(f *testing.F) {
	for _, c := range BuiltinCandidates() {
		src, err := BuiltinSource(c.Profile.ID)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	files, _ := filepath.Glob("testdata/bad/*.toml")
	golden, _ := filepath.Glob("testdata/golden/*.toml")
	for _, p := range append(files, golden...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.toml", data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error: %q", err)
			}
			return
		}
		out, err := Marshal(p)
		if err != nil {
			t.Fatalf("accepted but cannot marshal: %v", err)
		}
		q, err := Parse("fuzz.toml", out)
		if err != nil {
			t.Fatalf("marshalled output does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip differs:\n%#v\n%#v\n%s", p, q, out)
		}
		if again, _ := Marshal(q); !bytes.Equal(out, again) {
			t.Fatalf("Marshal not stable:\n%s\n%s", out, again)
		}
		for _, opt := range []LintOptions{{}, {Backend: BackendSCXLayered, Shape: &Shape{Cores: 2, ThreadsPerCore: 2}, RequestMillicores: 2250, Demote: true}} {
			Lint(p, opt)
		}
		Demote(p, Shape{Cores: 2})
	})
}

// FuzzCovers checks that the reachability rule is sound: when covers(a, b)
// says group a takes every thread b matches, no thread matches b but not a.
func FuzzCovers(f *testing.F) {
	f.Add("ib_", "", "", "ib_io", "", "", "ib_io_rd", "", uint16(0))
	f.Add("", "conn,ib_", "", "worker", "", "", "worker-1", "", uint16(0))
	f.Add("", "conn", "", "connection", "", "", "connection", "", uint16(0))
	f.Add("a", "", "/pod", "ab", "", "/pod/x", "abc", "/pod/x/y", uint16(0b1011))
	f.Add("", "", "", "x", "", "", "x", "", uint16(0b1))
	f.Fuzz(func(t *testing.T, ap, ae, acg, bp, be, bcg, comm, cgroup string, flags uint16) {
		bit := func(i int) bool { return flags&(1<<i) != 0 }
		mk := func(p, e, cg string, all, leaderSet, leader, useCmd bool) Match {
			m := Match{ExcludePrefix: list(e), CgroupPrefix: cg, All: all}
			if useCmd {
				m.CmdlinePrefix = list(p)
			} else {
				m.CommPrefix = list(p)
			}
			if leaderSet {
				m.GroupLeader = &leader
			}
			return m
		}
		a := mk(ap, ae, acg, bit(0), bit(1), bit(2), bit(3))
		b := mk(bp, be, bcg, bit(4), bit(5), bit(6), bit(7))
		if len(a.Kinds()) == 0 || len(b.Kinds()) == 0 || !covers(a, b) {
			return
		}
		p := &Profile{ThreadGroups: []ThreadGroup{{Match: a}, {Match: b}}}
		c, err := Compile(p)
		if err != nil {
			return
		}
		tid := 2
		if bit(8) {
			tid = 1
		}
		th := Thread{Tid: tid, Tgid: 1, Comm: comm, Pcomm: comm, Cmdline: comm, Cgroup: cgroup}
		if c.groups[1].matches(th) && !c.groups[0].matches(th) {
			t.Fatalf("covers(%+v, %+v) but %+v matches only the second", a, b, th)
		}
	})
}

func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
