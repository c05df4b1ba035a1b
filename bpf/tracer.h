/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Types shared by the tracer's BPF side and its Go loader (bpf2go turns the
 * structs into Go types), and the few kernel structures it reads, declared
 * with preserve_access_index so CO-RE relocates them to the running kernel's
 * layout. No full vmlinux.h: the tracer needs five fields.
 */
#ifndef TT_TRACER_H
#define TT_TRACER_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <stdbool.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define TT_COMM_LEN 16
#define TT_MAX_PID (1 << 22) /* PID_MAX_LIMIT on 64-bit kernels */
#define TT_MAX_CPUS 4096
#define TT_MAX_SIBLINGS 7
#define TT_NO_CPU 0xffffffffu

#define TT_TASK_IDLE 0x402        /* TASK_UNINTERRUPTIBLE | TASK_NOLOAD */
#define TT_TASK_RTLOCK_WAIT 0x1000

enum tt_kind {
	TT_SWITCH = 1,
	TT_WAKING = 2,
	TT_WAKEUP_NEW = 3,
	TT_FORK = 4,
	TT_EXIT = 5,
	TT_RENAME = 6,
};

enum tt_irq {
	TT_IRQ_NONE = 0,
	TT_IRQ_SOFT = 1,
	TT_IRQ_HARD = 2,
	TT_IRQ_ANY = 3, /* an interrupt, hard or soft: not known which */
};

/*
 * One event. pid/prev_* describe the current task (the outgoing task of a
 * switch, the waker, the parent, the renamed task's old comm); tid/tgid/
 * prio/comm the task the event is about.
 */
struct tt_event {
	__u64 ts; /* bpf_ktime_get_boot_ns: CLOCK_BOOTTIME, as Perfetto expects */
	__u8 kind;
	__u8 irq; /* wakings: enum tt_irq, the context the waking fired in */
	__u16 cpu;
	__u16 prev_state; /* task-report bits, 0x100 = preempted */
	__u16 pad1;
	__s32 pid;
	__s32 prev_tgid;
	__s32 prev_prio;
	__s32 tid;
	__s32 tgid;
	__s32 prio;
	__s32 target_cpu;
	char comm[TT_COMM_LEN];
	char prev_comm[TT_COMM_LEN];
};

struct tt_counters {
	__u64 emitted;
	__u64 lost;
};

struct tt_cpu {
	__u32 siblings[TT_MAX_SIBLINGS]; /* other hyperthreads of the core, TT_NO_CPU-terminated */
	__u8 running_target;
	__u8 dirty;
	__u16 pad;
};

struct thread_info {
	__u32 cpu;
	int preempt_count; /* arm64 and others; not on x86 */
} __attribute__((preserve_access_index));

struct task_struct;

struct rq {
	struct task_struct *curr;
} __attribute__((preserve_access_index));

struct cfs_rq {
	struct rq *rq;
} __attribute__((preserve_access_index));

struct sched_entity {
	struct cfs_rq *cfs_rq;
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_info thread_info;
	unsigned int __state;
	int prio;
	unsigned int cpu;
	int exit_state;
	__s32 pid;
	__s32 tgid;
	char comm[TT_COMM_LEN];
	void *stack;
	struct sched_entity se;
} __attribute__((preserve_access_index));

struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

#endif
