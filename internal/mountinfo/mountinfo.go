// Package mountinfo parses /proc/PID/mountinfo, the kernel's table of the
// mounts in a process's mount namespace (proc_pid_mountinfo(5)).
//
// It is the one parser of that file in this module: target and
// observe/snapshot look up the cgroup v1 and v2 hierarchies in it, and
// internal/tracefs looks up where tracefs is mounted. Each of them builds its
// own small view from []Mount; the details of the format — the variable
// number of optional fields before the " - " separator, the octal escapes
// (\040 for a space) in paths, an empty mount source — are handled here once.
package mountinfo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of mountinfo:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	ID Parent Major:Minor Root MountPoint Options [Optional...] - FSType Source SuperOptions
//
// Paths, the filesystem type, the source and every option are unescaped.
type Mount struct {
	ID, Parent   int    // this mount's ID and its parent mount's ID
	Major, Minor uint32 // the st_dev of the files in this mount
	// Root is the directory of the filesystem mounted at MountPoint: "/" when
	// the whole filesystem is mounted, "/kubepods" for a bind mount of that
	// subtree.
	Root         string
	MountPoint   string   // relative to the process's root directory
	Options      []string // per-mount options: "rw", "nosuid", "relatime", ...
	Optional     []string // optional fields ("shared:7", "master:2"), as written; nil when there are none
	FSType       string   // "cgroup", "cgroup2", "tracefs", "fuse.sshfs", ...
	Source       string   // filesystem-specific ("/dev/sda1", "cgroup", "none"); may be empty
	SuperOptions []string // per-superblock options: "rw", "cpu", "name=systemd", "mode=755", ...
}

// maxLine bounds a line, so a corrupt or hostile input cannot make Parse
// buffer without end. Real lines are far shorter: the longest are overlay
// mounts listing their layer directories.
const maxLine = 1 << 20

// Read parses /proc/self/mountinfo.
func Read() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Parse parses mountinfo text, one Mount a line in input order. Blank lines
// are skipped; any other line that is not a mountinfo line is an error that
// names the line by number and quotes it.
func Parse(r io.Reader) ([]Mount, error) {
	var mounts []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w: %s", n, err, quote(line))
		}
		mounts = append(mounts, m)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("mountinfo line %d: longer than %d bytes", n+1, maxLine)
		}
		return nil, fmt.Errorf("mountinfo line %d: %w", n+1, err)
	}
	return mounts, nil
}

// parseLine parses one non-blank line. The kernel separates fields with one
// space and escapes spaces, tabs, newlines and backslashes inside them, so the
// first " - " is the separator: no field before it contains a space.
func parseLine(line string) (Mount, error) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return Mount{}, errors.New(`no " - " separator`)
	}
	// Split on spaces only: strings.Fields would also split on the Unicode
	// spaces (U+00A0, U+0085) that the kernel leaves unescaped in paths.
	f := strings.FieldsFunc(pre, func(r rune) bool { return r == ' ' })
	if len(f) < 6 {
		return Mount{}, fmt.Errorf(`%d fields before " - ", want 6 (ID, parent ID, major:minor, root, mount point, options) and any optional fields`, len(f))
	}
	var m Mount
	var err error
	if m.ID, err = parseID(f[0]); err != nil {
		return Mount{}, fmt.Errorf("mount ID: %w", err)
	}
	if m.Parent, err = parseID(f[1]); err != nil {
		return Mount{}, fmt.Errorf("parent ID: %w", err)
	}
	if m.Major, m.Minor, err = parseDev(f[2]); err != nil {
		return Mount{}, err
	}
	m.Root, m.MountPoint = unescape(f[3]), unescape(f[4])
	m.Options = splitOptions(f[5])
	if len(f) > 6 {
		m.Optional = f[6:]
	}
	// The source is empty when a filesystem was mounted with an empty source
	// string ("tmpfs  rw"), so split on single spaces. The super options are
	// the rest of the line.
	g := strings.SplitN(strings.TrimRight(post, " \t\r"), " ", 3)
	if len(g) < 3 || g[0] == "" {
		return Mount{}, errors.New(`want filesystem type, source and super options after " - "`)
	}
	m.FSType, m.Source = unescape(g[0]), unescape(g[1])
	m.SuperOptions = splitOptions(g[2])
	return m, nil
}

func parseID(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, strconv.IntSize-1)
	if err != nil {
		return 0, fmt.Errorf("%q is not a non-negative integer", s)
	}
	return int(n), nil
}

// parseDev parses "major:minor".
func parseDev(s string) (major, minor uint32, err error) {
	a, b, ok := strings.Cut(s, ":")
	ma, err1 := strconv.ParseUint(a, 10, 32)
	mi, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("device %q is not major:minor", s)
	}
	return uint32(ma), uint32(mi), nil
}

// splitOptions splits a comma-separated option list and unescapes each
// option. The split comes first: the kernel escapes a comma inside an option
// value as \054.
func splitOptions(s string) []string {
	if s == "" {
		return nil
	}
	opts := strings.Split(s, ",")
	for i, o := range opts {
		opts[i] = unescape(o)
	}
	return opts
}

// unescape undoes the kernel's octal escapes: a backslash and three octal
// digits (\040 space, \011 tab, \012 newline, \134 backslash, \054 comma)
// stand for that byte. Any other backslash is kept as it is.
func unescape(s string) string {
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && s[i+1] <= '3' && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b = append(b, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }

// quote quotes a line for an error message, shortened if it is long.
func quote(line string) string {
	const most = 200
	if len(line) > most {
		return strconv.Quote(line[:most]) + "..."
	}
	return strconv.Quote(line)
}
