package observe

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	pb "temper.codes/temper-train/observe/perfettopb"
)

// readErr reads data to the end and returns the error that stopped it.
func readErr(data []byte) error {
	r, err := NewReader(bytes.NewReader(data), "in.trace")
	if err != nil {
		return err
	}
	var ev Event
	for {
		if err := r.Next(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func TestBadInputErrors(t *testing.T) {
	good := writeEvents(t, goldenInfo, goldenEvents())
	text := "# tracer: nop\n" +
		"          <idle>-0     (-------) [001] d..2.  1234.000001: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=worker next_pid=42 next_prio=120\n" +
		"          worker-42    (     40) [001] d..2.  1234.000500: sched_switch: prev_comm=worker prev_pid=42 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120\n"
	// A well-framed packet whose content is not a TracePacket.
	corrupt := append(append([]byte(nil), good...), 0x0a, 0x05, 0xff, 0xff, 0xff, 0xff, 0xff)
	cases := []struct {
		name     string
		data     []byte
		sentinel error
		where    string // the position the message must name
	}{
		{"empty", nil, ErrEmpty, "byte 0"},
		{"wrong format", []byte("%PDF-1.7\n\x00\x01binary stuff"), ErrUnknownFormat, "byte 0"},
		{"json", []byte(`{"traceEvents": []}`), ErrUnknownFormat, "byte 0"},
		{"truncated perfetto", good[:len(good)-7], ErrTruncated, "byte "},
		{"truncated perfetto header", good[:1], ErrTruncated, "byte 0"},
		{"corrupt perfetto", corrupt, ErrCorrupt, fmt.Sprintf("byte %d", len(good))},
		{"huge record length", []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, ErrCorrupt, "byte 0"},
		{"bad gzip", []byte{0x1f, 0x8b, 0x00}, ErrCorrupt, "byte 0"},
		{"truncated gzip", gz(good)[:60], ErrTruncated, "byte "},
		{"compact switch comm index beyond the intern table", compactTrace(t, 0, 5), ErrCorrupt, "byte 0"},
		{"compact waking comm index beyond the intern table", compactTrace(t, 5, 0), ErrCorrupt, "byte 0"},
		{"text with a garbage line", []byte(text + "hello world\n"), ErrCorrupt, "in.trace:4"},
		{"text with a bad state", []byte(strings.Replace(text, "prev_state=S", "prev_state=Q", 1)), ErrCorrupt, "in.trace:3"},
		{"text cut mid-line", []byte(text[:len(text)-40]), ErrTruncated, "in.trace:3"},
		{"text with only a header", []byte("# tracer: nop\n#\n"), ErrEmpty, "in.trace:2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := readErr(c.data)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
			if !strings.Contains(msg, "in.trace") || !strings.Contains(msg, c.where) {
				t.Errorf("error %q does not name the file and %q", msg, c.where)
			}
			if c.sentinel != nil && !errors.Is(err, c.sentinel) {
				t.Errorf("error %q is not %v", msg, c.sentinel)
			}
			t.Log(msg)
		})
	}
}

// compactTrace returns a trace of one compact_sched bundle with a one-entry
// intern table, one switch and one waking naming the given comm indexes.
func compactTrace(t *testing.T, swComm, wkComm uint32) []byte {
	ts := uint64(1000)
	pkt := &pb.TracePacket{Timestamp: &ts, Data: &pb.TracePacket_FtraceEvents{FtraceEvents: &pb.FtraceEventBundle{
		Cpu: proto.Uint32(0),
		CompactSched: &pb.FtraceEventBundle_CompactSched{
			InternTable:     [][]byte{[]byte("worker")},
			SwitchTimestamp: []uint64{1000}, SwitchPrevState: []int64{1}, SwitchNextPid: []int32{42},
			SwitchNextPrio: []int32{120}, SwitchNextCommIndex: []uint32{swComm},
			WakingTimestamp: []uint64{1001}, WakingPid: []int32{43}, WakingTargetCpu: []int32{0},
			WakingPrio: []int32{120}, WakingCommIndex: []uint32{wkComm},
		},
	}}}
	b, err := proto.Marshal(pkt)
	if err != nil {
		t.Fatal(err)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
}
