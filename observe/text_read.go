package observe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// TextReader reads ftrace's text output (/sys/kernel/tracing/trace or
// trace_pipe, trace-cmd report, systrace text): with or without the "(tgid)"
// column (options/record-tgid), with 4- or 5-character irq flags or none, and
// comms containing spaces or dashes. ftrace prints events of all CPUs merged in
// time order, so the reader returns them as they come.
//
// Lines that are not events (comments, blank lines, "##### CPU n buffer
// started ####") are skipped; "CPU:n [LOST m EVENTS]" lines are counted in
// Stats().LostEvents; a line that is none of these is an error naming its line
// number.
type TextReader struct {
	name string
	br   *bufio.Reader
	line int
	off  int64 // bytes of the (decompressed) stream read so far
	// maxLine caps a line's length (MaxTextLine unless a test lowers it), so
	// that a hostile or damaged file cannot make one line cost gigabytes.
	maxLine int
	info    TraceInfo
	stats   ReadStats
	comms   map[string]string      // interned comm strings
	ident   map[int32]textIdentity // what each pid's line prefix last said
	queue   []Event                // events decoded from one line, in order
	cut     bool                   // the last line read had no newline
	qhead   int
}

type textIdentity struct {
	tgid int32
	comm string
}

func newTextReader(br *bufio.Reader, name string) *TextReader {
	return &TextReader{
		name:    name,
		br:      br,
		info:    TraceInfo{Format: FormatFtraceText},
		maxLine: MaxTextLine,
		comms:   map[string]string{},
		ident:   map[int32]textIdentity{},
	}
}

// Info implements Reader.
func (r *TextReader) Info() TraceInfo { return r.info }

// Stats implements Reader.
func (r *TextReader) Stats() ReadStats { return r.stats }

// Close implements Reader; the caller owns the underlying stream.
func (r *TextReader) Close() error { return nil }

// Next implements Reader.
func (r *TextReader) Next(ev *Event) error {
	for r.qhead >= len(r.queue) {
		r.queue, r.qhead = r.queue[:0], 0
		raw, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && r.stats.Events == 0 {
				return &FormatError{File: r.name, Line: max(r.line, 1), Err: fmt.Errorf("trace text holds %w", ErrEmpty)}
			}
			return err
		}
		if err := r.parse(raw); err != nil {
			return err
		}
	}
	*ev = r.queue[r.qhead]
	r.qhead++
	r.stats.Events++
	return nil
}

// MaxTextLine is the longest ftrace text line the reader accepts, in bytes.
// Real lines are a few hundred bytes (a comm is at most 16); the cap is far
// above that and far below what would hurt to hold in memory.
const MaxTextLine = 1 << 20

// readLine returns the next line without its newline. A final line without a
// newline is returned too; the caller reports it as truncated if it does not
// parse. A line longer than r.maxLine is an error naming the cap and the byte
// offset where the line starts, found without reading the rest of the line.
func (r *TextReader) readLine() ([]byte, error) {
	start := r.off
	line, err := r.br.ReadSlice('\n')
	r.off += int64(len(line))
	if errors.Is(err, bufio.ErrBufferFull) {
		long := append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(long) <= r.maxLine {
			line, err = r.br.ReadSlice('\n')
			r.off += int64(len(line))
			long = append(long, line...)
		}
		line = long
	}
	if len(line) > r.maxLine && (len(line) > r.maxLine+1 || line[len(line)-1] != '\n') {
		return nil, &FormatError{File: r.name, Line: r.line + 1, Err: fmt.Errorf("line at byte %d exceeds the %d-byte line limit: %w",
			start, r.maxLine, ErrCorrupt)}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", r.name, err)
	}
	if len(line) == 0 && err != nil {
		return nil, io.EOF
	}
	r.line++
	r.cut = line[len(line)-1] != '\n'
	line = bytes.TrimRight(line, "\r\n")
	return line, nil
}

func (r *TextReader) fail(sentinel error, format string, args ...any) error {
	return &FormatError{File: r.name, Line: r.line, Err: fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), sentinel)}
}

func (r *TextReader) intern(b []byte) string {
	if s, ok := r.comms[string(b)]; ok {
		return s
	}
	s := string(b)
	r.comms[s] = s
	return s
}

// parse decodes one line into r.queue.
func (r *TextReader) parse(raw []byte) error {
	line := bytes.TrimLeft(raw, " \t")
	if len(line) == 0 || line[0] == '#' {
		return nil
	}
	if cpu, n, ok := parseLostLine(line); ok {
		if r.stats.LostEvents == nil {
			r.stats.LostEvents = map[int32]int64{}
		}
		r.stats.LostEvents[cpu] += n
		return nil
	}
	if bytes.HasPrefix(line, []byte("TRACE:")) || bytes.HasPrefix(line, []byte("cpus=")) {
		return nil
	}
	h, ok := matchTextLine(raw)
	if !ok {
		if r.cut {
			return r.fail(ErrTruncated, "incomplete last line: %q", clip(raw))
		}
		return r.fail(ErrCorrupt, "not an ftrace event line: %q", clip(raw))
	}
	ts := h.ts
	cpu := h.cpu
	pid := h.pid
	if h.tgid != 0 || len(h.comm) > 0 {
		comm := ""
		if !bytes.Equal(h.comm, []byte("<...>")) && pid != 0 {
			comm = r.intern(h.comm)
		}
		id := textIdentity{tgid: h.tgid, comm: comm}
		prev, seen := r.ident[pid]
		if id.tgid == 0 {
			id.tgid = prev.tgid
		}
		if id.comm == "" {
			id.comm = prev.comm
		}
		if !seen || id != prev {
			r.ident[pid] = id
			if id.tgid != 0 || id.comm != "" {
				r.queue = append(r.queue, Event{TS: ts, Kind: KindThreadInfo, CPU: -1, Pid: -1,
					Tid: pid, Tgid: id.tgid, Comm: id.comm})
			}
		}
	}
	ev := Event{TS: ts, CPU: cpu, Pid: pid, IRQ: h.irq}
	args := h.args
	var err error
	switch string(h.event) {
	case "sched_switch":
		err = r.parseSwitch(args, &ev)
	case "sched_waking":
		ev.Kind = KindWaking
		err = r.parseWake(args, &ev)
	case "sched_wakeup":
		ev.Kind = KindWakeup
		err = r.parseWake(args, &ev)
	case "sched_wakeup_new":
		ev.Kind = KindWakeupNew
		err = r.parseWake(args, &ev)
	case "task_newtask":
		ev.Kind = KindNewTask
		err = r.parseNewTask(args, &ev)
	case "task_rename":
		ev.Kind = KindRename
		err = r.parseRename(args, &ev)
	case "sched_process_fork":
		ev.Kind = KindFork
		err = r.parseFork(args, &ev)
	case "sched_process_exit":
		ev.Kind = KindExit
		err = r.parseCommPidPrio(args, &ev)
	case "sched_process_free":
		ev.Kind = KindFree
		err = r.parseCommPidPrio(args, &ev)
	case "sched_blocked_reason":
		ev.Kind = KindBlockedReason
		err = r.parseBlocked(args, &ev)
	default:
		r.stats.skip(string(h.event))
		return nil
	}
	if err != nil {
		if r.cut {
			return r.fail(ErrTruncated, "%s: %v", h.event, err)
		}
		return r.fail(ErrCorrupt, "%s: %v", h.event, err)
	}
	r.queue = append(r.queue, ev)
	return nil
}

func clip(b []byte) []byte {
	if len(b) > 80 {
		return append(b[:77:77], "..."...)
	}
	return b
}

// textHeader is the part of a line before the event's arguments.
type textHeader struct {
	comm  []byte
	pid   int32
	tgid  int32 // 0 when absent or "-----"
	cpu   int32
	irq   IRQContext
	ts    int64
	event []byte
	args  []byte
}

// matchTextLine finds the leftmost place in line where "-PID [(TGID)] [CPU]
// [FLAGS] SECS.FRAC: EVENT:" matches; the comm is everything before it. This
// is the grammar trace_processor's systrace tokenizer accepts, so comms with
// spaces, dashes and digits ("kworker/u8:2-events", "Web Content") parse.
func matchTextLine(line []byte) (textHeader, bool) {
	for i := 0; i < len(line); i++ {
		if line[i] != '-' {
			continue
		}
		if h, ok := matchTextLineAt(line, i); ok {
			h.comm = bytes.TrimSpace(line[:i])
			return h, true
		}
	}
	return textHeader{}, false
}

func matchTextLineAt(line []byte, i int) (textHeader, bool) {
	var h textHeader
	j := i + 1
	pid, j, ok := scanUint(line, j)
	if !ok || pid > 1<<31-1 {
		return h, false
	}
	h.pid = int32(pid)
	k := skipSpace(line, j)
	if k == j {
		return h, false
	}
	j = k
	if j < len(line) && line[j] == '(' {
		j = skipSpace(line, j+1)
		if t, e, ok := scanUint(line, j); ok {
			h.tgid = int32(t)
			j = e
		} else {
			for j < len(line) && line[j] == '-' {
				j++
			}
		}
		if j >= len(line) || line[j] != ')' {
			return h, false
		}
		j++
		if j < len(line) && isSpace(line[j]) {
			j++
		}
	}
	if j >= len(line) || line[j] != '[' {
		return h, false
	}
	cpu, e, ok := scanUint(line, j+1)
	if !ok || e >= len(line) || line[e] != ']' || cpu > 1<<20 {
		return h, false
	}
	h.cpu = int32(cpu)
	j = skipSpace(line, e+1)
	// Optional irq flags: three of [a-zA-Z.] then one or two of [0-9a-f.].
	if f, ok := scanFlags(line, j); ok {
		if ts, ev, args, ok := scanTSEvent(line, skipSpace(line, f)); ok {
			h.irq = irqFromFlagChar(line[j+2])
			h.ts, h.event, h.args = ts, ev, args
			return h, true
		}
	}
	ts, ev, args, ok := scanTSEvent(line, j)
	if !ok {
		return h, false
	}
	h.ts, h.event, h.args = ts, ev, args
	return h, true
}

func scanFlags(line []byte, j int) (int, bool) {
	if j+4 > len(line) {
		return 0, false
	}
	for k := j; k < j+3; k++ {
		c := line[k]
		if !(c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			return 0, false
		}
	}
	isHexDot := func(c byte) bool { return c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') }
	if !isHexDot(line[j+3]) {
		return 0, false
	}
	end := j + 4
	if end < len(line) && isHexDot(line[end]) {
		end++
	}
	return end, true
}

// irqFromFlagChar decodes ftrace's third flag character.
func irqFromFlagChar(c byte) IRQContext {
	switch c {
	case 'h', 'H', 'z', 'Z':
		return IRQHard
	case 's':
		return IRQSoft
	}
	return IRQNone
}

// scanTSEvent reads "SECS.FRAC: EVENT:" and returns the timestamp in ns, the
// event name and the trimmed arguments.
func scanTSEvent(line []byte, j int) (int64, []byte, []byte, bool) {
	secs, e, ok := scanUint(line, j)
	if !ok || e >= len(line) || line[e] != '.' {
		return 0, nil, nil, false
	}
	fs := e + 1
	frac, fe, ok := scanUint(line, fs)
	if !ok || fe >= len(line) || line[fe] != ':' {
		return 0, nil, nil, false
	}
	digits := fe - fs
	for d := digits; d < 9; d++ {
		frac *= 10
	}
	for d := digits; d > 9; d-- {
		frac /= 10
	}
	if secs > 1<<33 {
		return 0, nil, nil, false
	}
	ts := int64(secs)*1e9 + int64(frac)
	j = fe + 1
	k := skipSpace(line, j)
	if k == j {
		return 0, nil, nil, false
	}
	ns := k
	for k < len(line) && !isSpace(line[k]) && line[k] != ':' {
		k++
	}
	if k == ns || k >= len(line) || line[k] != ':' {
		return 0, nil, nil, false
	}
	return ts, line[ns:k], bytes.TrimSpace(line[k+1:]), true
}

func scanUint(b []byte, j int) (uint64, int, bool) {
	start := j
	var v uint64
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		if j-start >= 19 {
			return 0, j, false
		}
		v = v*10 + uint64(b[j]-'0')
		j++
	}
	return v, j, j > start
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

func skipSpace(b []byte, j int) int {
	for j < len(b) && isSpace(b[j]) {
		j++
	}
	return j
}

// parseLostLine recognises "CPU:1 [LOST 123 EVENTS]".
func parseLostLine(line []byte) (int32, int64, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("CPU:"))
	if !ok {
		return 0, 0, false
	}
	cpu, e, ok := scanUint(rest, 0)
	if !ok {
		return 0, 0, false
	}
	rest, ok = bytes.CutPrefix(rest[e:], []byte(" [LOST "))
	if !ok {
		return 0, 0, false
	}
	n, e, ok := scanUint(rest, 0)
	if !ok || !bytes.HasPrefix(rest[e:], []byte(" EVENTS]")) {
		return 0, 0, false
	}
	return int32(cpu), int64(n), true
}

// looksLikeFtraceText reports whether a printable prefix of a stream reads as
// ftrace output: a "# tracer" header or a first non-comment line that parses.
func looksLikeFtraceText(b []byte) bool {
	if bytes.HasPrefix(b, []byte("# tracer")) || bytes.Contains(b, []byte("TRACE:\n")) {
		return true
	}
	for len(b) > 0 {
		line, rest, found := bytes.Cut(b, []byte("\n"))
		if !found && len(rest) == 0 && len(b) >= 4096 {
			return false // the first line does not fit the sniff window
		}
		b = rest
		t := bytes.TrimSpace(line)
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		if _, _, ok := parseLostLine(t); ok {
			return true
		}
		_, ok := matchTextLine(line)
		return ok
	}
	return false
}

// Argument parsing. ftrace prints "key=value" pairs separated by spaces, but
// comms may themselves contain spaces, so each comm is cut out between its key
// and the key that follows it.

// between returns the text after key and before the next occurrence of stop
// (searching from the right when last is set), and what follows stop.
func between(args []byte, key, stop string, last bool) ([]byte, []byte, error) {
	a, ok := bytes.CutPrefix(args, []byte(key))
	if !ok {
		i := bytes.Index(args, []byte(" "+key))
		if i < 0 {
			return nil, nil, fmt.Errorf("no %q", key)
		}
		a = args[i+1+len(key):]
	}
	var i int
	if last {
		i = bytes.LastIndex(a, []byte(stop))
	} else {
		i = bytes.Index(a, []byte(stop))
	}
	if i < 0 {
		return nil, nil, fmt.Errorf("no %q after %q", stop, key)
	}
	return a[:i], a[i+1:], nil
}

// intField reads "key=123" from a run of space-separated pairs.
func intField(args []byte, key string) (int64, error) {
	i := 0
	for {
		j := bytes.Index(args[i:], []byte(key+"="))
		if j < 0 {
			return 0, fmt.Errorf("no %s=", key)
		}
		j += i
		if j == 0 || args[j-1] == ' ' {
			v := args[j+len(key)+1:]
			if e := bytes.IndexByte(v, ' '); e >= 0 {
				v = v[:e]
			}
			return strconv.ParseInt(string(v), 10, 64)
		}
		i = j + 1
	}
}

func int32Field(args []byte, key string) (int32, error) {
	v, err := intField(args, key)
	if err != nil {
		return 0, err
	}
	if v < -1<<31 || v > 1<<31-1 {
		return 0, fmt.Errorf("%s=%d out of range", key, v)
	}
	return int32(v), nil
}

func (r *TextReader) parseSwitch(args []byte, ev *Event) error {
	ev.Kind = KindSwitch
	prevComm, rest, err := between(args, "prev_comm=", " prev_pid=", false)
	if err != nil {
		return err
	}
	arrow := bytes.Index(rest, []byte(" ==> "))
	if arrow < 0 {
		return errors.New("no \" ==> \"")
	}
	prev, next := rest[:arrow], rest[arrow+5:]
	if ev.PrevTid, err = int32Field(prev, "prev_pid"); err != nil {
		return err
	}
	if ev.PrevPrio, err = int32Field(prev, "prev_prio"); err != nil {
		return err
	}
	i := bytes.Index(prev, []byte("prev_state="))
	if i < 0 {
		return errors.New("no prev_state=")
	}
	state := prev[i+len("prev_state="):]
	if e := bytes.IndexByte(state, ' '); e >= 0 {
		state = state[:e]
	}
	if ev.PrevState, err = ParseTaskState(string(state)); err != nil {
		return err
	}
	nextComm, nrest, err := between(next, "next_comm=", " next_pid=", true)
	if err != nil {
		return err
	}
	if ev.Tid, err = int32Field(nrest, "next_pid"); err != nil {
		return err
	}
	if ev.Prio, err = int32Field(nrest, "next_prio"); err != nil {
		return err
	}
	ev.PrevComm, ev.Comm = r.intern(prevComm), r.intern(nextComm)
	return nil
}

func (r *TextReader) parseWake(args []byte, ev *Event) error {
	comm, rest, err := between(args, "comm=", " pid=", true)
	if err != nil {
		return err
	}
	if ev.Tid, err = int32Field(rest, "pid"); err != nil {
		return err
	}
	if ev.Prio, err = int32Field(rest, "prio"); err != nil {
		return err
	}
	if ev.TargetCPU, err = int32Field(rest, "target_cpu"); err != nil {
		return err
	}
	ev.Comm = r.intern(comm)
	return nil
}

func (r *TextReader) parseNewTask(args []byte, ev *Event) error {
	var err error
	if ev.Tid, err = int32Field(args, "pid"); err != nil {
		return err
	}
	comm, rest, err := between(args, "comm=", " clone_flags=", true)
	if err != nil {
		return err
	}
	flags := rest[len("clone_flags="):]
	if e := bytes.IndexByte(flags, ' '); e >= 0 {
		flags = flags[:e]
	}
	if ev.CloneFlags, err = strconv.ParseUint(string(flags), 16, 64); err != nil {
		return fmt.Errorf("clone_flags: %v", err)
	}
	ev.Comm = r.intern(comm)
	return nil
}

func (r *TextReader) parseRename(args []byte, ev *Event) error {
	var err error
	if ev.Tid, err = int32Field(args, "pid"); err != nil {
		return err
	}
	oldComm, rest, err := between(args, "oldcomm=", " newcomm=", true)
	if err != nil {
		return err
	}
	newComm := rest[len("newcomm="):]
	if i := bytes.LastIndex(newComm, []byte(" oom_score_adj=")); i >= 0 {
		newComm = newComm[:i]
	}
	ev.PrevComm, ev.Comm = r.intern(oldComm), r.intern(newComm)
	return nil
}

func (r *TextReader) parseFork(args []byte, ev *Event) error {
	parent, rest, err := between(args, "comm=", " pid=", false)
	if err != nil {
		return err
	}
	if ev.PrevTid, err = int32Field(rest, "pid"); err != nil {
		return err
	}
	child, crest, err := between(rest, "child_comm=", " child_pid=", true)
	if err != nil {
		return err
	}
	if ev.Tid, err = int32Field(crest, "child_pid"); err != nil {
		return err
	}
	ev.PrevComm, ev.Comm = r.intern(parent), r.intern(child)
	return nil
}

func (r *TextReader) parseCommPidPrio(args []byte, ev *Event) error {
	comm, rest, err := between(args, "comm=", " pid=", true)
	if err != nil {
		return err
	}
	if ev.Tid, err = int32Field(rest, "pid"); err != nil {
		return err
	}
	if ev.Prio, err = int32Field(rest, "prio"); err != nil {
		return err
	}
	ev.Comm = r.intern(comm)
	return nil
}

func (r *TextReader) parseBlocked(args []byte, ev *Event) error {
	var err error
	if ev.Tid, err = int32Field(args, "pid"); err != nil {
		return err
	}
	io, err := intField(args, "iowait")
	if err != nil {
		return err
	}
	ev.IOWait = io != 0
	return nil
}
