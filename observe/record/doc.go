//go:build linux

// Package record traces a workload's scheduling events with BPF and writes
// them as a Perfetto trace that package observe reads.
//
// Run loads bpf/tracer.bpf.c (bpf2go's output in package bpf), attaches it to
// the scheduler tracepoints and drains its ring buffer into an
// observe.PerfettoWriter until a bound is reached or the context ends:
//
//	res, err := record.Run(ctx, f, record.Options{Tgids: []int{pid}, Duration: 5 * time.Second})
//
// tracer.go is the kernel side (privilege and feature checks, load, attach);
// record.go the user-space side (the read loop, ring buffer record to
// observe.Event, bounds, target set). The package is Linux-only; the trace
// model and formats stay portable in observe.
package record
