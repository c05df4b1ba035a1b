package procfs

import (
	"strings"
	"testing"
)

const fullStatus = "Name:\tsnap\nUmask:\t0022\nState:\tR (running)\nTgid:\t100\nPid:\t101\nCapEff:\t000001ffffffffff\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1,8\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n"

func TestParseStatus(t *testing.T) {
	all := StatusTgid | StatusCPUsAllowedList | StatusVoluntaryCtxtSwitches | StatusNonvoluntaryCtxtSwitches | StatusCapEff
	for _, tt := range []struct {
		name    string
		in      string
		want    Status
		wantErr string
	}{
		{"full", fullStatus, Status{Tgid: 100, CPUsAllowedList: "0-1,8", VoluntaryCtxtSwitches: 12, NonvoluntaryCtxtSwitches: 3, CapEff: 0x1ffffffffff, Present: all}, ""},
		{"no ctxt switches", strings.Replace(fullStatus, "voluntary_ctxt_switches:\t12\n", "", 1),
			Status{Tgid: 100, CPUsAllowedList: "0-1,8", NonvoluntaryCtxtSwitches: 3, CapEff: 0x1ffffffffff, Present: all &^ StatusVoluntaryCtxtSwitches}, ""},
		{"name looks like a key", "Name:\tTgid:\t7\nTgid:\t9\n", Status{Tgid: 9, Present: StatusTgid}, ""},
		{"line without colon", "garbage\nTgid:\t9", Status{Tgid: 9, Present: StatusTgid}, ""},
		{"largest counter", "voluntary_ctxt_switches:\t18446744073709551615\n", Status{VoluntaryCtxtSwitches: 1<<64 - 1, Present: StatusVoluntaryCtxtSwitches}, ""},
		{"empty", "", Status{}, ""},
		{"bad tgid", "Tgid:\tx\n", Status{}, "status Tgid"},
		{"bad counter", strings.Replace(fullStatus, "\t12", "\ttwelve", 1), Status{}, "status voluntary_ctxt_switches"},
		{"counter overflows", "nonvoluntary_ctxt_switches:\t18446744073709551616\n", Status{}, "status nonvoluntary_ctxt_switches"},
		{"bad capabilities", "CapEff:\tzz\n", Status{}, "status CapEff"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStatus([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseStatus = %+v, %v; want an error mentioning %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseStatus = %+v, %v\nwant %+v", got, err, tt.want)
			}
		})
	}
}

func TestStatusRequire(t *testing.T) {
	st := Status{Present: StatusTgid | StatusCPUsAllowedList}
	for _, tt := range []struct {
		keys StatusKey
		want string
	}{
		{StatusTgid, ""},
		{StatusTgid | StatusCPUsAllowedList, ""},
		{0, ""},
		{StatusCapEff, "status has no CapEff line"},
		{StatusTgid | StatusVoluntaryCtxtSwitches | StatusNonvoluntaryCtxtSwitches, "status has no voluntary_ctxt_switches, nonvoluntary_ctxt_switches line"},
	} {
		err := st.Require(tt.keys)
		if got := ""; err != nil {
			got = err.Error()
			if got != tt.want {
				t.Errorf("Require(%b) = %q, want %q", tt.keys, got, tt.want)
			}
		} else if tt.want != "" {
			t.Errorf("Require(%b) = nil, want %q", tt.keys, tt.want)
		}
	}
}

// FuzzParseStatus: no input panics the parser, and a key is present only
// when the file has a line for it.
func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(fullStatus))
	f.Add([]byte("Tgid:\t-1\nCapEff:\tffffffffffffffff\n"))
	f.Add([]byte("Tgid"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseStatus(data)
		if err != nil {
			return
		}
		for _, k := range statusKeys {
			has := strings.HasPrefix(string(data), k.name+":") || strings.Contains(string(data), "\n"+k.name+":")
			if st.Present&k.key != 0 && !has {
				t.Fatalf("%s present in %q", k.name, data)
			}
			if has && st.Present&k.key == 0 {
				t.Fatalf("%s not present in %q", k.name, data)
			}
		}
	})
}

func TestCaps(t *testing.T) {
	s := Caps(1<<CapSysNice | 1<<CapBPF)
	if !s.Has(CapSysNice, CapBPF) || s.Has(CapSysNice, CapSysAdmin) || !s.Has() {
		t.Errorf("Has wrong for %x", uint64(s))
	}
	if got := s.Lacking(CapBPF, CapSysAdmin, CapPerfmon); got != "CAP_SYS_ADMIN and CAP_PERFMON" {
		t.Errorf("Lacking = %q", got)
	}
	if got := s.Lacking(CapSysNice); got != "" {
		t.Errorf("Lacking of a held capability = %q", got)
	}
	own, err := EffectiveCaps()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("this process's effective capabilities: %#x", uint64(own))
}
