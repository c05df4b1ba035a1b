package procfs

import (
	"maps"
	"strings"
	"testing"
)

func TestParseCgroup(t *testing.T) {
	for _, tt := range []struct {
		name    string
		in      string
		want    Cgroups
		cpu     string
		wantErr bool
	}{
		{"pure v2", "0::/kubepods.slice/pod1/cri-abc.scope\n", Cgroups{V2: "/kubepods.slice/pod1/cri-abc.scope"}, "/kubepods.slice/pod1/cri-abc.scope", false},
		{"hybrid: v1 cpu wins", "9:name=systemd:/\n4:memory:/m\n2:cpu,cpuacct:/kubepods/pod1/abc\n0::/init.scope\n",
			Cgroups{V2: "/init.scope", V1: map[string]string{"name=systemd": "/", "memory": "/m", "cpu": "/kubepods/pod1/abc", "cpuacct": "/kubepods/pod1/abc"}}, "/kubepods/pod1/abc", false},
		{"v1 cpu alone", "3:cpuset:/x\n1:cpu:/batch\n", Cgroups{V1: map[string]string{"cpuset": "/x", "cpu": "/batch"}}, "/batch", false},
		{"v1 without cpu, v2 present", "4:memory:/m\n0::/user.slice\n", Cgroups{V2: "/user.slice", V1: map[string]string{"memory": "/m"}}, "/user.slice", false},
		{"cpuacct is not cpu", "2:cpuacct:/acct\n0::/v2\n", Cgroups{V2: "/v2", V1: map[string]string{"cpuacct": "/acct"}}, "/v2", false},
		{"cpuset is not cpu", "3:cpuset:/s\n0::/\n", Cgroups{V2: "/", V1: map[string]string{"cpuset": "/s"}}, "/", false},
		{"path with colons", "0::/a:b:c\n", Cgroups{V2: "/a:b:c"}, "/a:b:c", false},
		{"no trailing newline", "0::/x", Cgroups{V2: "/x"}, "/x", false},
		{"empty", "", Cgroups{}, "", false},
		{"malformed", "garbage\n", Cgroups{}, "", true},
		{"one colon", "0:/x\n", Cgroups{}, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCgroup([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseCgroup = %+v, %v; want error %v", got, err, tt.wantErr)
			}
			if got.V2 != tt.want.V2 || !maps.Equal(got.V1, tt.want.V1) {
				t.Errorf("ParseCgroup = %+v, want %+v", got, tt.want)
			}
			if c := got.CPU(); c != tt.cpu {
				t.Errorf("CPU() = %q, want %q", c, tt.cpu)
			}
			if err != nil && !strings.Contains(err.Error(), "want id:controllers:path") {
				t.Errorf("error %q does not say what a line should be", err)
			}
		})
	}
}

// FuzzParseCgroup: no input panics the parser, and every path it reports
// is the tail of some line of the input.
func FuzzParseCgroup(f *testing.F) {
	for _, s := range []string{"0::/a\n", "2:cpu,cpuacct:/k/p\n0::/\n", "1:name=systemd:/x:y\n", "garbage", "::", "0::"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCgroup(data)
		if err != nil {
			return
		}
		paths := []string{c.V2}
		for _, p := range c.V1 {
			paths = append(paths, p)
		}
		for _, p := range paths {
			if p != "" && !strings.Contains(string(data), ":"+p) {
				t.Fatalf("path %q is in no line of %q", p, data)
			}
		}
	})
}
