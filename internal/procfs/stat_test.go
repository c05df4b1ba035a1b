package procfs

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// statTail is a stat line after "(comm) ": state R, ppid 77, utime 7,
// stime 3, nice -5 (field 19), starttime 4242 (22), processor 1 (39),
// rt_priority 0 (40), policy 7 = SCHED_EXT (41), and the fields after 41.
const statTail = "R 77 1 1 0 -1 4194304 99 0 0 0 7 3 0 0 20 -5 1 0 4242 3133440 412 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 1 0 7 0 0 0 0 0 0 0 0 0 0"

// tailStat is what ParseStat makes of "42 (comm) " + statTail.
func tailStat(comm string) Stat {
	return Stat{PID: 42, Comm: comm, State: 'R', PPID: 77, Utime: 7, Stime: 3, Nice: -5, StartTime: 4242, Processor: 1, Policy: 7}
}

// withField returns statTail with field n (numbered as in proc_pid_stat(5))
// replaced by v.
func withField(n int, v string) string {
	f := strings.Fields(statTail)
	f[n-3] = v
	return strings.Join(f, " ")
}

func TestParseStat(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		want       Stat
		wantErr    string
	}{
		{"plain", "42 (cat) " + statTail + "\n", tailStat("cat"), ""},
		{"no newline", "42 (cat) " + statTail, tailStat("cat"), ""},
		{"spaces", "42 (Web Content) " + statTail, tailStat("Web Content"), ""},
		{"parentheses", "42 (a) b (c)) " + statTail, tailStat("a) b (c)"), ""},
		{"looks like fields", "42 (x) R 1 2 3) " + statTail, tailStat("x) R 1 2 3"), ""},
		{"newline in comm", "42 (a\nb) " + statTail, tailStat("a\nb"), ""},
		{"empty comm", "42 () " + statTail, tailStat(""), ""},
		{"only a close paren", "42 ()) " + statTail, tailStat(")"), ""},
		{"zombie", "42 (x) " + withField(3, "Z"), func() Stat { s := tailStat("x"); s.State = 'Z'; return s }(), ""},
		{"largest start time", "42 (x) " + withField(22, "18446744073709551615"), func() Stat { s := tailStat("x"); s.StartTime = 1<<64 - 1; return s }(), ""},
		{"exactly 41 fields", "42 (x) " + strings.Join(strings.Fields(statTail)[:39], " "), tailStat("x"), ""},

		{"empty", "", Stat{}, "no (comm)"},
		{"no parentheses", "42 cat " + statTail, Stat{}, "no (comm)"},
		{"only close", "42 cat) " + statTail, Stat{}, "no (comm)"},
		{"close before open", "42 )cat( " + statTail, Stat{}, "no (comm)"},
		{"bad pid", "x (cat) " + statTail, Stat{}, "stat pid"},
		{"truncated", "42 (cat) R 1 2 3", Stat{}, "has 6 fields, want at least 41"},
		{"truncated after start time", "42 (cat) " + strings.Join(strings.Fields(statTail)[:20], " "), Stat{}, "has 22 fields"},
		{"two-letter state", "42 (x) " + withField(3, "RS"), Stat{}, "stat state"},
		{"bad ppid", "42 (x) " + withField(4, "p"), Stat{}, "stat field 4"},
		{"bad nice", "42 (x) " + withField(19, "x"), Stat{}, "stat field 19"},
		{"start time overflows", "42 (x) " + withField(22, "18446744073709551616"), Stat{}, "stat field 22"},
		{"negative utime", "42 (x) " + withField(14, "-1"), Stat{}, "stat field 14"},
		{"processor overflows", "42 (x) " + withField(39, "99999999999999999999"), Stat{}, "stat field 39"},
		{"bad policy", "42 (x) " + withField(41, "0x1"), Stat{}, "stat field 41"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.line))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseStat = %+v, %v; want an error mentioning %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestStatFields(t *testing.T) {
	for _, tt := range []struct {
		line    string
		want    []string
		wantErr bool
	}{
		{"12 (a) b) S 1", []string{"S", "1"}, false},
		{"12 (a b) ", []string{}, false},
		{"12 a b S 1", nil, true},
	} {
		got, err := StatFields([]byte(tt.line))
		if (err != nil) != tt.wantErr || strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("StatFields(%q) = %q, %v; want %q, error %v", tt.line, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestStatExited(t *testing.T) {
	for state, want := range map[byte]bool{'R': false, 'S': false, 'D': false, 'T': false, 't': false, 'I': false, 'P': false, 'Z': true, 'X': true} {
		if got := (Stat{State: state}).Exited(); got != want {
			t.Errorf("state %c: Exited = %v, want %v", state, got, want)
		}
	}
}

func TestParseSchedstat(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    Schedstat
		wantErr bool
	}{
		{"5000000 120000 42\n", Schedstat{RunNs: 5000000, WaitNs: 120000, Timeslices: 42}, false},
		{"18446744073709551615 0 0", Schedstat{RunNs: 1<<64 - 1}, false},
		{"1 2", Schedstat{}, true},
		{"1 x 3", Schedstat{}, true},
		{"", Schedstat{}, true},
	} {
		got, err := ParseSchedstat([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSchedstat(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// FuzzParseStat: no input panics the parser, and what it accepts has the
// command name between the first '(' and the last ')' and the state as the
// first field after it.
func FuzzParseStat(f *testing.F) {
	for _, s := range []string{
		"42 (cat) " + statTail, "42 (a) b (c)) " + statTail, "42 ()) " + statTail, "42 (a\nb) " + statTail,
		"42 (x) " + withField(22, "18446744073709551616"), "1 (x", ")(", "", "42 (cat) R 1 2 3",
	} {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		st, err := ParseStat(line)
		if err != nil {
			return
		}
		s := string(line)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if st.Comm != s[open+1:end] {
			t.Fatalf("comm %q, want %q", st.Comm, s[open+1:end])
		}
		if rest := strings.Fields(s[end+1:]); len(rest) < 39 || rest[0] != string([]byte{st.State}) {
			t.Fatalf("accepted %q: state %q, fields after comm %q", s, st.State, rest)
		}
	})
}

// FuzzStatComm: whatever a thread names itself (up to 15 bytes of anything
// but NUL: spaces, parentheses, newlines, digits), the fields after the
// name are read right.
func FuzzStatComm(f *testing.F) {
	for _, s := range []string{"cat", "a) b (c)", ") R 1 2 3 (", "))))", "((((", "", " ", "x\ny", "\n) Z 0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, comm string) {
		if len(comm) > 15 || strings.ContainsRune(comm, 0) {
			return
		}
		st, err := ParseStat(fmt.Appendf(nil, "42 (%s) %s\n", comm, statTail))
		if err != nil {
			t.Fatalf("comm %q: %v", comm, err)
		}
		if want := tailStat(comm); st != want {
			t.Fatalf("comm %q: got %+v, want %+v", comm, st, want)
		}
	})
}
