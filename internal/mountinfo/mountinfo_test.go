package mountinfo

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// parseTests are mountinfo texts and the mounts they hold. The cgroup layouts
// are the ones target and observe/snapshot look their hierarchies up
// in; the tracefs lines are the ones internal/tracefs looks for.
var parseTests = []struct {
	name string
	text string
	want []Mount
}{
	{
		name: "hybrid v1 and v2",
		text: `22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`,
		want: []Mount{
			{ID: 22, Parent: 1, Major: 0, Minor: 21, Root: "/", MountPoint: "/sys", Options: []string{"rw", "nosuid", "nodev", "noexec", "relatime"}, Optional: []string{"shared:7"}, FSType: "sysfs", Source: "sysfs", SuperOptions: []string{"rw"}},
			{ID: 30, Parent: 22, Minor: 27, Root: "/", MountPoint: "/sys/fs/cgroup", Options: []string{"rw", "relatime"}, FSType: "tmpfs", Source: "tmpfs", SuperOptions: []string{"rw", "mode=755"}},
			{ID: 31, Parent: 30, Minor: 28, Root: "/", MountPoint: "/sys/fs/cgroup/cpu", Options: []string{"rw", "relatime"}, FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "cpu"}},
			{ID: 32, Parent: 30, Minor: 29, Root: "/", MountPoint: "/sys/fs/cgroup/cpuacct", Options: []string{"rw", "relatime"}, FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "cpuacct"}},
			{ID: 39, Parent: 30, Minor: 36, Root: "/", MountPoint: "/sys/fs/cgroup/systemd", Options: []string{"rw", "relatime"}, FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "name=systemd"}},
			{ID: 40, Parent: 30, Minor: 37, Root: "/", MountPoint: "/sys/fs/cgroup/unified", Options: []string{"rw", "relatime"}, FSType: "cgroup2", Source: "cgroup2", SuperOptions: []string{"rw"}},
		},
	},
	{
		name: "pure v2",
		text: "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
		want: []Mount{{ID: 35, Parent: 24, Minor: 30, Root: "/", MountPoint: "/sys/fs/cgroup", Options: []string{"rw", "nosuid", "nodev", "noexec", "relatime"}, Optional: []string{"shared:9"},
			FSType: "cgroup2", Source: "cgroup2", SuperOptions: []string{"rw", "nsdelegate", "memory_recursiveprot"}}},
	},
	{
		name: "co-mounted controllers, two optional fields",
		text: `25 24 0:22 / /sys/fs/cgroup/systemd rw,nosuid shared:5 master:2 - cgroup cgroup rw,xattr,name=systemd
28 24 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:10 - cgroup cgroup rw,cpu,cpuacct
`,
		want: []Mount{
			{ID: 25, Parent: 24, Minor: 22, Root: "/", MountPoint: "/sys/fs/cgroup/systemd", Options: []string{"rw", "nosuid"}, Optional: []string{"shared:5", "master:2"}, FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "xattr", "name=systemd"}},
			{ID: 28, Parent: 24, Minor: 25, Root: "/", MountPoint: "/sys/fs/cgroup/cpu,cpuacct", Options: []string{"rw", "nosuid"}, Optional: []string{"shared:10"}, FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "cpu", "cpuacct"}},
		},
	},
	{
		name: "bind mount of a subtree, escaped space",
		text: `90 30 0:31 /kubepods /mnt/kube\040pods rw - cgroup cgroup rw,cpu,cpuacct` + "\n",
		want: []Mount{{ID: 90, Parent: 30, Minor: 31, Root: "/kubepods", MountPoint: "/mnt/kube pods", Options: []string{"rw"}, FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "cpu", "cpuacct"}}},
	},
	{
		name: "tracefs mounts",
		text: `29 22 0:12 / /sys/kernel/tracing rw,relatime shared:12 - tracefs nodev rw
41 22 0:13 / /mnt/trace\040fs rw - tracefs nodev rw
`,
		want: []Mount{
			{ID: 29, Parent: 22, Minor: 12, Root: "/", MountPoint: "/sys/kernel/tracing", Options: []string{"rw", "relatime"}, Optional: []string{"shared:12"}, FSType: "tracefs", Source: "nodev", SuperOptions: []string{"rw"}},
			{ID: 41, Parent: 22, Minor: 13, Root: "/", MountPoint: "/mnt/trace fs", Options: []string{"rw"}, FSType: "tracefs", Source: "nodev", SuperOptions: []string{"rw"}},
		},
	},
	{
		// \011 tab, \012 newline, \134 backslash, \054 a comma inside an
		// option value; escapes at the very end; backslashes that are not
		// escapes (too short, not octal, above \377) kept.
		name: "escapes",
		text: `1 0 8:1 /a\011b /mnt/a\012b\134c\040 rw - fuse.my\040fs /dev/my\040disk rw,lowerdir=/x\054y,\9,\400,\04` + "\n",
		want: []Mount{{ID: 1, Major: 8, Minor: 1, Root: "/a\tb", MountPoint: "/mnt/a\nb\\c ", Options: []string{"rw"}, FSType: "fuse.my fs", Source: "/dev/my disk",
			SuperOptions: []string{"rw", "lowerdir=/x,y", `\9`, `\400`, `\04`}}},
	},
	{
		// The kernel leaves non-ASCII spaces unescaped; they are part of
		// the path, not separators.
		name: "unicode spaces in a path",
		text: "1 0 0:1 / /mnt/a\u00a0b\u0085c rw - tmpfs tmpfs rw\n",
		want: []Mount{{ID: 1, Minor: 1, Root: "/", MountPoint: "/mnt/a\u00a0b\u0085c", Options: []string{"rw"}, FSType: "tmpfs", Source: "tmpfs", SuperOptions: []string{"rw"}}},
	},
	{
		name: "empty source",
		text: "60 22 0:50 / /mnt rw,relatime - tmpfs  rw,size=1024k\n",
		want: []Mount{{ID: 60, Parent: 22, Minor: 50, Root: "/", MountPoint: "/mnt", Options: []string{"rw", "relatime"}, FSType: "tmpfs", SuperOptions: []string{"rw", "size=1024k"}}},
	},
	{
		name: "blank lines, CRLF, trailing space",
		text: "\n1 0 0:1 / / rw - ext4 /dev/sda1 rw\r\n   \n2 1 0:2 / /proc rw - proc proc rw \n",
		want: []Mount{
			{ID: 1, Minor: 1, Root: "/", MountPoint: "/", Options: []string{"rw"}, FSType: "ext4", Source: "/dev/sda1", SuperOptions: []string{"rw"}},
			{ID: 2, Parent: 1, Minor: 2, Root: "/", MountPoint: "/proc", Options: []string{"rw"}, FSType: "proc", Source: "proc", SuperOptions: []string{"rw"}},
		},
	},
	{name: "empty", text: ""},
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// malformedTests are inputs Parse rejects, with what the error must say:
// the line's number, the reason and the line itself.
var malformedTests = []struct {
	name string
	text string
	want []string
}{
	{"three fields", "1 2 3\n", []string{"line 1:", `no " - " separator`, `"1 2 3"`}},
	{"no fields before the separator but two", "1 2 - cgroup2\n", []string{"line 1:", `2 fields before " - "`, `"1 2 - cgroup2"`}},
	{"nothing after the separator", "1 2 0:1 / /a rw - \n", []string{"line 1:", "want filesystem type, source and super options"}},
	{"type only", "1 2 0:1 / /a rw - cgroup2\n", []string{"line 1:", "want filesystem type, source and super options"}},
	{"no super options", "1 2 0:1 / /a rw - cgroup2 cgroup2\n", []string{"line 1:", "want filesystem type, source and super options"}},
	{"empty type", "1 2 0:1 / /a rw -  cgroup2 rw\n", []string{"line 1:", "want filesystem type"}},
	{"bad ID", "x 2 0:1 / /a rw - tmpfs tmpfs rw\n", []string{"line 1:", `mount ID: "x" is not`}},
	{"negative parent", "1 -2 0:1 / /a rw - tmpfs tmpfs rw\n", []string{"line 1:", `parent ID: "-2" is not`}},
	{"bad device", "1 2 0-1 / /a rw - tmpfs tmpfs rw\n", []string{"line 1:", `device "0-1" is not major:minor`}},
	{"half a device", "1 2 0: / /a rw - tmpfs tmpfs rw\n", []string{"line 1:", `device "0:" is not major:minor`}},
	{"second line bad", "1 0 0:1 / / rw - ext4 /dev/sda1 rw\n\ngarbage\n", []string{"line 3:", `"garbage"`}},
	{"long line shortened", "1 2 0:1 / /" + strings.Repeat("a", 300) + " rw\n", []string{"line 1:", `aaaa"...`}},
	{"longer than the limit", strings.Repeat("a", maxLine+1), []string{"line 1:", "longer than"}},
}

func TestParseMalformed(t *testing.T) {
	for _, tt := range malformedTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.text))
			if err == nil {
				t.Fatalf("no error; parsed %+v", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if len(err.Error()) > 400 {
				t.Errorf("error is %d bytes long", len(err.Error()))
			}
		})
	}
}

// TestRead reads this process's own mount table: every process has a root
// mount and /proc (Read just read it).
func TestRead(t *testing.T) {
	mounts, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	var root, proc bool
	for _, m := range mounts {
		root = root || m.MountPoint == "/"
		proc = proc || m.FSType == "proc"
		if m.Root == "" || m.FSType == "" || len(m.SuperOptions) == 0 {
			t.Errorf("incomplete mount %+v", m)
		}
	}
	if !root || !proc {
		t.Errorf("no root mount (%v) or no proc mount (%v) among %d", root, proc, len(mounts))
	}
}

// FuzzParse checks that Parse never panics, and that whatever it accepts is
// read back the same after being written out again as the kernel would
// write it.
func FuzzParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add(tt.text)
	}
	for _, tt := range malformedTests {
		if len(tt.text) < 1000 {
			f.Add(tt.text)
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		mounts, err := Parse(strings.NewReader(text))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "mountinfo line ") {
				t.Fatalf("error %q does not name the line", err)
			}
			return
		}
		var b strings.Builder
		for _, m := range mounts {
			if m.Root == "" || m.MountPoint == "" || m.FSType == "" || len(m.Options) == 0 || len(m.SuperOptions) == 0 {
				t.Fatalf("incomplete mount %+v from %q", m, text)
			}
			b.WriteString(format(m))
		}
		if b.Len() > maxLine {
			return // escaping made a line too long to read back
		}
		again, err := Parse(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("%q: reading back %q: %v", text, b.String(), err)
		}
		if !reflect.DeepEqual(again, mounts) {
			t.Fatalf("%q: read back as\n%+v\nwant\n%+v", text, again, mounts)
		}
	})
}

// format writes m as a mountinfo line.
func format(m Mount) string {
	opts := func(o []string) string {
		e := make([]string, len(o))
		for i, s := range o {
			e[i] = escape(s)
		}
		return strings.Join(e, ",")
	}
	optional := ""
	for _, o := range m.Optional {
		optional += " " + o
	}
	return fmt.Sprintf("%d %d %d:%d %s %s %s%s - %s %s %s\n", m.ID, m.Parent, m.Major, m.Minor,
		escape(m.Root), escape(m.MountPoint), opts(m.Options), optional, escape(m.FSType), escape(m.Source), opts(m.SuperOptions))
}

// escape escapes what the kernel escapes, plus what would change the
// meaning of a line when written raw: commas in options, carriage returns.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\r', '\\', ',':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
