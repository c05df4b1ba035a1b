// Package bpf holds temper-train's BPF C programs and their bpf2go output.
//
// The generated Go files and the compiled .o objects are committed, so a
// plain `go build` needs no clang. `make generate` rebuilds them (clang-19
// and libbpf-dev from Debian bookworm).
//
//   - tracer.bpf.c: observe's scheduler-event tracer (loaded by observe.Record).
package bpf

//go:generate go tool bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package bpf Tracer tracer.bpf.c -- -I/usr/include/x86_64-linux-gnu
