package snapshot

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
)

// statTail is the part of a stat line after "(comm) ": state R, utime 7,
// stime 3, nice -5 (field 19), starttime 4242 (22), processor 1 (39),
// rt_priority 0 (40), policy 7 = SCHED_EXT (41), and the fields after 41.
const statTail = "R 1 1 1 0 -1 4194304 99 0 0 0 7 3 0 0 20 -5 1 0 4242 3133440 412 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 1 0 7 0 0 0 0 0 0 0 0 0 0"

func TestParseStat(t *testing.T) {
	want := procStat{PID: 42, State: "R", Utime: 7, Stime: 3, Nice: -5, StartTicks: 4242, CPU: 1, RTPriority: 0, Policy: 7}
	tests := []struct {
		name    string
		line    string
		comm    string
		wantErr string
	}{
		{"plain", "42 (cat) " + statTail + "\n", "cat", ""},
		{"spaces", "42 (Web Content) " + statTail, "Web Content", ""},
		{"parens", "42 (a) b (c)) " + statTail, "a) b (c)", ""},
		{"looks like fields", "42 (x) R 1 2 3) " + statTail, "x) R 1 2 3", ""},
		{"empty comm", "42 () " + statTail, "", ""},
		{"no parens", "42 cat " + statTail, "", "no (comm)"},
		{"only close", "42 cat) " + statTail, "", "no (comm)"},
		{"bad pid", "x (cat) " + statTail, "", "stat pid"},
		{"short", "42 (cat) R 1 2 3", "", "fields"},
		{"bad nice", "42 (cat) " + strings.Replace(statTail, " -5 ", " x ", 1), "", "field 19"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(tt.line)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := want
			w.Comm = tt.comm
			if got != w {
				t.Errorf("got  %+v\nwant %+v", got, w)
			}
		})
	}
}

func TestParseStatSelf(t *testing.T) {
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseStat(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != currentTid() || st.State != "R" || st.Policy != 0 {
		t.Errorf("own stat %+v: want own tid %d, running, SCHED_OTHER", st, currentTid())
	}
}

func currentTid() int {
	link, _ := os.Readlink("/proc/thread-self")
	var pid, tid int
	fmt.Sscanf(link, "%d/task/%d", &pid, &tid)
	return tid
}

func TestParseStatus(t *testing.T) {
	full := "Name:\tsnap\nTgid:\t100\nPid:\t101\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n"
	got, err := parseStatus([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	if want := (procStatus{Tgid: 100, CPUsAllowedList: "0-1", Voluntary: 12, Nonvoluntary: 3}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		strings.Replace(full, "voluntary_ctxt_switches:\t12\n", "", 1),
		strings.Replace(full, "\t12", "\ttwelve", 1),
		"",
	} {
		if _, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("parseStatus(%q) succeeded", bad)
		}
	}
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ThreadCgroup
		wantErr bool
	}{
		{"hybrid, cpu alone", "9:name=systemd:/\n2:cpuacct:/a\n1:cpu:/kubepods/pod1\n0::/unified/x\n", ThreadCgroup{V2: "/unified/x", V1CPU: "/kubepods/pod1"}, false},
		{"v1 cpu,cpuacct", "4:memory:/m\n3:cpu,cpuacct:/k/p\n", ThreadCgroup{V1CPU: "/k/p"}, false},
		{"cpuset is not cpu", "3:cpuset:/s\n0::/\n", ThreadCgroup{V2: "/"}, false},
		{"pure v2", "0::/kubepods.slice/pod.slice\n", ThreadCgroup{V2: "/kubepods.slice/pod.slice"}, false},
		{"path with colon", "0::/a:b\n", ThreadCgroup{V2: "/a:b"}, false},
		{"empty", "", ThreadCgroup{}, false},
		{"malformed", "garbage\n", ThreadCgroup{}, true},
	}
	for _, tt := range tests {
		got, err := parseProcCgroup([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestPolicyName(t *testing.T) {
	for n, want := range map[int]string{0: "SCHED_OTHER", 1: "SCHED_FIFO", 2: "SCHED_RR", 3: "SCHED_BATCH", 5: "SCHED_IDLE", 6: "SCHED_DEADLINE", 7: "SCHED_EXT", 4: "SCHED_4"} {
		if got := PolicyName(n); got != want {
			t.Errorf("PolicyName(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestClockTicks(t *testing.T) {
	auxv := func(pairs ...uint64) []byte {
		var b []byte
		for _, v := range pairs {
			b = binary.NativeEndian.AppendUint64(b, v)
		}
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want int64
	}{
		{"found", auxv(6, 4096, 17, 250, 0, 0), 250},
		{"absent", auxv(6, 4096, 0, 0), 100},
		{"after terminator", auxv(0, 0, 17, 250), 100},
		{"truncated", auxv(6, 4096, 17)[:20], 100},
		{"empty", nil, 100},
	}
	for _, tt := range tests {
		if got := clockTicks(tt.in); got != tt.want {
			t.Errorf("%s: clockTicks = %d, want %d", tt.name, got, tt.want)
		}
	}
	real, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		t.Fatal(err)
	}
	if got := clockTicks(real); got != 100 {
		t.Logf("this kernel's USER_HZ is %d", got)
	}
}

func TestTicksToNs(t *testing.T) {
	for _, tt := range []struct{ ticks, hz, want int64 }{
		{0, 100, 0}, {1, 100, 10_000_000}, {150, 100, 1_500_000_000}, {7, 1000, 7_000_000}, {1, 0, 0},
		{1 << 36, 100, (1 << 36) * 10_000_000}, {7, 3, 2_333_333_333},
	} {
		if got := ticksToNs(tt.ticks, tt.hz); got != tt.want {
			t.Errorf("ticksToNs(%d, %d) = %d, want %d", tt.ticks, tt.hz, got, tt.want)
		}
	}
}

// FuzzParseStat: no input panics the parser, and what it accepts has the
// comm between the first '(' and the last ')'.
func FuzzParseStat(f *testing.F) {
	f.Add("42 (cat) " + statTail)
	f.Add("42 (a) b (c)) " + statTail)
	f.Add("42 ()) " + statTail)
	f.Add("1 (x")
	f.Add(")(")
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, line string) {
		st, err := parseStat(line)
		if err != nil {
			return
		}
		trimmed := strings.TrimRight(line, "\n")
		open, closing := strings.IndexByte(trimmed, '('), strings.LastIndexByte(trimmed, ')')
		if st.Comm != trimmed[open+1:closing] {
			t.Fatalf("comm %q, want %q", st.Comm, trimmed[open+1:closing])
		}
	})
}

// FuzzStatComm: whatever a thread names itself (comm is up to 15 bytes of
// anything but NUL), the fields after it are read correctly.
func FuzzStatComm(f *testing.F) {
	for _, s := range []string{"cat", "a) b (c)", ") R 1 2 3 (", "))))", "", " ", "x\ny"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, comm string) {
		if len(comm) > 15 || strings.ContainsRune(comm, 0) {
			return
		}
		st, err := parseStat(fmt.Sprintf("42 (%s) %s\n", comm, statTail))
		if err != nil {
			t.Fatalf("comm %q: %v", comm, err)
		}
		want := procStat{PID: 42, Comm: comm, State: "R", Utime: 7, Stime: 3, Nice: -5, StartTicks: 4242, CPU: 1, Policy: 7}
		if st != want {
			t.Fatalf("comm %q: got %+v, want %+v", comm, st, want)
		}
	})
}
