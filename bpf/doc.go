// Package bpf holds temper-train's BPF C programs and their bpf2go output.
//
// The generated Go files and the compiled .o objects are committed, so a
// plain `go build` needs no clang. `make generate` rebuilds them (clang-19
// and libbpf-dev from Debian bookworm).
//
//   - tracer.bpf.c: observe's scheduler-event tracer (loaded by observe/record's Run).
//   - scheduler.bpf.c: the layered sched_ext scheduler (loaded by
//     scheduler/scx). Built with -no-global-types: bpf2go cannot write Go
//     for struct sched_ext_ops' function pointers, so scheduler/scx mirrors
//     the few records it exchanges by hand and its tests compare them with
//     the object's BTF. It needs no vmlinux.h: scheduler.h declares the
//     kernel types it touches for CO-RE, and a partial struct sched_ext_ops
//     (cilium/ebpf fills the kernel's struct_ops value member by member,
//     matched by name), so `make generate` needs no kernel either.
package bpf

//go:generate go tool bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package bpf Tracer tracer.bpf.c -- -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror -mcpu=v3" -no-global-types -target bpfel -go-package bpf Scheduler scheduler.bpf.c -- -I/usr/include/x86_64-linux-gnu
