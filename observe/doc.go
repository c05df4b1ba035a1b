// Package observe owns temper-train's view of a kernel scheduling trace: the
// event model every stage reads, the trace file formats (Perfetto protobuf, read
// and written; ftrace text, read), and the reconstruction of thread states with
// the semantics of Perfetto's trace_processor.
//
// A trace is consumed as a stream. Open returns a Reader whose Next fills one
// Event at a time in timestamp order, so memory depends on the number of CPUs and
// threads, never on the length of the trace. Threads and Sched turn that stream
// into thread identities (with comm history) and state intervals: Running, R,
// R+, S, D and the rest, each with the waker that made it runnable.
//
// Errors name the file and the byte offset (protobuf) or line (text) where the
// input went wrong; see *FormatError.
//
// The package is portable: traces are read and written anywhere. Recording
// one on a live node with BPF is the Linux-only package observe/record.
package observe
