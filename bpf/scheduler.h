/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The layered sched_ext scheduler's configuration records (mirrored by hand
 * in scheduler/scx/config.go, whose tests compare both layouts through the
 * object's BTF) and the few kernel types it touches.
 *
 * No vmlinux.h: kernel structures are declared with the members we read and
 * preserve_access_index, so CO-RE relocates them to the running kernel's
 * layout. struct sched_ext_ops needs no such care: cilium/ebpf copies a
 * struct_ops value member by member, matched by name against the kernel's
 * own struct, so a partial declaration with the kernel's member names is
 * enough.
 */
#ifndef TS_SCHEDULER_H
#define TS_SCHEDULER_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <stdbool.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define TS_MAX_LAYERS 32      /* thread groups + the default layer */
#define TS_MAX_CPUS 1024
#define TS_MAX_LAYER_CPUS 64  /* cores one exclusive layer may own */
#define TS_MAX_SIBLINGS 3     /* other hyperthreads of a core (SMT4) */
#define TS_NO_CPU 0xffffffffu
#define TS_NO_LAYER 0xffffffffu
#define TS_MAX_CEILINGS 8      /* limited cgroups (pods, containers) one plan bounds */
#define TS_MAX_TASK_CEILINGS 4 /* limited cgroups one thread sits under, nearest first */
#define TS_NO_CEILING 0xffffffffu

/* DSQ ids: one per layer, and the shared vtime-ordered DSQ of the normal
 * and default layers. Custom ids must not set bit 63 (built-in DSQs). */
#define TS_LAYER_DSQ_BASE 0x1000ULL
#define TS_NORMAL_DSQ 0x2000ULL
/* One per ceiling: where the threads of a cgroup that used up its budget
 * wait for the next period. No CPU consumes it. */
#define TS_PEN_DSQ_BASE 0x3000ULL

/* The shortest slice a ceiling cuts a task's slice to, so that a nearly
 * spent budget does not cost a context switch per microsecond. */
#define TS_MIN_CEILING_SLICE 200000ULL

/* The longest a BestEffort task waits for a CPU under saturation: the
 * guard serves the BestEffort DSQ (FIFO) at least once every starve_ns,
 * and more often the more tasks it holds, one every
 * TS_BESTEFFORT_WAIT_NS / queued, a third of the kernel's 30 s watchdog. */
#define TS_BESTEFFORT_WAIT_NS 10000000000ULL

/* The most virtual time a task of the vtime DSQ may be ahead of the queue
 * (and be charged for one run): 10 default slices. */
#define TS_MAX_LAG 200000000ULL

enum ts_treatment {
	TS_EXCLUSIVE = 1,
	TS_LATENCY = 2,
	TS_NORMAL = 3,
	/* 4 is unused: a batch group is a normal layer with a long slice. */
	TS_YIELD = 5,
	TS_BESTEFFORT = 6, /* the tier: the BestEffort pods' layer, not a profile's */
};

/* One layer: a thread group of the profile, or the default layer. */
struct ts_layer {
	__u32 treatment; /* enum ts_treatment */
	__u32 weight;    /* 1..10000, 100 = as the kernel weighs the task */
	__u64 slice_ns;
	__u32 preempt;   /* latency layers: preempt lower layers on wakeup */
	__u32 nr_cpus;   /* exclusive layers: how many primary CPUs */
	__u32 cpus[TS_MAX_LAYER_CPUS]; /* the CPU of each owned core that runs the layer */
};

/* One CPU's place in the plan. */
struct ts_cpu {
	__u32 owner;   /* the exclusive layer owning this CPU's core, or TS_NO_LAYER */
	__u32 primary; /* owned: this CPU runs the owner's threads; 0: kept idle */
	__u32 siblings[TS_MAX_SIBLINGS]; /* TS_NO_CPU-terminated */
	__u32 pad;
};

/* What a CPU runs now, read by its SMT siblings (and by wakeups looking
 * for a BestEffort task to preempt). */
struct ts_cpu_state {
	__u32 tid;   /* 0: idle or a task outside sched_ext */
	__u32 layer;
	__u64 started_ns;
	__u32 guard; /* the starvation guard just served the BestEffort DSQ here */
	__u32 kept;  /* the BestEffort task running here is the guard's: not preempted */
};

/* Per-layer counters, one copy per CPU. */
struct ts_stats {
	__u64 runtime_ns;
	__u64 dispatches;   /* insertions into a DSQ */
	__u64 preemptions;  /* runs that ended with the task still runnable */
	__u64 sibling_busy; /* an exclusive thread and another task on one core */
	__u64 enqueues;
};

/* A CPU ceiling: a cgroup's cpu.max as a runtime budget per period, which
 * the runtime of every thread under that cgroup draws down (the loader
 * writes quota_ns and period_ns; the scheduler keeps the rest). */
struct ts_ceiling {
	__u64 quota_ns;     /* runtime per period; 0: the slot is unused */
	__u64 period_ns;
	__s64 budget_ns;    /* left in this period; negative: debt the next refill repays */
	__u64 period_start; /* bpf_ktime_get_ns() of the current period's start */
	__u64 throttles;    /* times a thread was held for want of budget */
	__u64 charged_ns;   /* runtime charged */
};

/* The ceilings a thread draws on, TS_NO_CEILING-terminated. */
struct ts_task_ceilings {
	__u32 idx[TS_MAX_TASK_CEILINGS];
};

struct ts_task {
	__u64 vtime;  /* normal and default layers: weighted runtime */
	__u32 queued; /* in the vtime DSQ: vtime_now follows it when it runs */
	__u32 pad;
};

/* ---- kernel types, CO-RE relocated ---- */

struct cpumask {
	unsigned long bits[1];
} __attribute__((preserve_access_index));

struct bpf_cpumask {
	struct cpumask cpumask;
} __attribute__((preserve_access_index));

struct sched_ext_entity {
	__u32 flags;
	__u32 weight;
	__u64 dsq_vtime;
	__u64 slice;
} __attribute__((preserve_access_index));

struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	int level;
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct task_struct {
	unsigned int flags;
	int nr_cpus_allowed;
	const struct cpumask *cpus_ptr;
	__s32 pid;
	__s32 tgid;
	struct sched_ext_entity scx;
} __attribute__((preserve_access_index));

/* A CO-RE field must have the kernel's kind: kind is an enum there. */
enum scx_exit_kind {
	SCX_EXIT_NONE = 0,
};

struct scx_exit_info {
	enum scx_exit_kind kind;
	__s64 exit_code;
	const char *reason;
	char *msg;
} __attribute__((preserve_access_index));

/* The kernel's open-coded DSQ iterator (opaque; 48 bytes since 6.12). */
struct bpf_iter_scx_dsq {
	__u64 __opaque[6];
} __attribute__((aligned(8)));

struct scx_init_task_args;
struct scx_exit_task_args;

/* The ops the scheduler implements, with the kernel's member names. */
struct sched_ext_ops {
	__s32 (*select_cpu)(struct task_struct *p, __s32 prev_cpu, __u64 wake_flags);
	void (*enqueue)(struct task_struct *p, __u64 enq_flags);
	void (*dispatch)(__s32 cpu, struct task_struct *prev);
	void (*running)(struct task_struct *p);
	void (*stopping)(struct task_struct *p, bool runnable);
	__s32 (*init)(void);
	void (*exit)(struct scx_exit_info *info);
	__u64 flags;
	__u32 timeout_ms;
	char name[128];
};

/* Constants of the sched_ext ABI (include/linux/sched/ext.h). */
#define SCX_DSQ_FLAG_BUILTIN (1ULL << 63)
#define SCX_DSQ_FLAG_LOCAL_ON (1ULL << 62)
#define SCX_DSQ_GLOBAL (SCX_DSQ_FLAG_BUILTIN | 1)
#define SCX_DSQ_LOCAL (SCX_DSQ_FLAG_BUILTIN | 2)
#define SCX_DSQ_LOCAL_ON (SCX_DSQ_FLAG_BUILTIN | SCX_DSQ_FLAG_LOCAL_ON)
#define SCX_ENQ_PREEMPT (1ULL << 32)
#define SCX_ENQ_LAST (1ULL << 41)
#define SCX_OPS_ENQ_LAST 2ULL
#define SCX_KICK_IDLE 1
#define SCX_KICK_PREEMPT 2
#define SCX_SLICE_DFL 20000000ULL
#define SCX_TASK_QUEUED 1 /* sched_ext_entity.flags: on the scheduler's rq, runnable */
#define PF_KTHREAD 0x00200000
#define CLOCK_MONOTONIC 1

/* A referenced kptr ("kptr" since 6.4; libbpf 1.1's __kptr_ref is the old tag). */
#define __ts_kptr __attribute__((btf_type_tag("kptr")))

/*
 * ts_ksym_exists is true when the loader resolved the weak kfunc sym: a
 * missing one reads as a NULL address, and the verifier prunes the branch
 * that would call it.
 */
#define ts_ksym_exists(sym) ({ \
	_Static_assert(!__builtin_constant_p(!!(sym)), #sym " must be declared __weak"); \
	!!(sym); \
})

#endif
