//go:build ignore

// SPDX-License-Identifier: GPL-2.0
//
// The observe tracer: scheduler events of a target set of thread groups,
// streamed to user space through one BPF ring buffer.
//
// Every program body is written once and compiled twice, as tp_btf (BTF-typed
// tracepoint, cheapest) and as raw_tp (for kernels without usable BTF); user
// space loads one of the two sets. Arguments are read with CO-RE probe reads
// so the same body verifies in both program types.
//
// Every sched_switch is emitted: a CPU's switches must chain (each prev is
// the previous next) for trace_processor and our own state model, and what
// else ran on the target's CPUs is part of the picture. Wakings and task
// events are filtered here, not in user space: one is emitted only when a
// target thread is on either side of it (waking or woken, parent or child).
//
// With filter_switches (observe --filter-switches) switches are filtered the
// same way; then, on SMT machines, a CPU whose sibling runs a target thread
// also reports its own switches, so analyze can tell what shared the core.

#include "tracer.h"

char LICENSE[] SEC("license") = "GPL";

// Set by the loader before load.
const volatile bool prev_state_arg = true; // sched_switch passes prev_state (5.18+)
const volatile bool follow_forks = true;   // new processes of a target are targets
const volatile bool trace_all = false;     // no filter: every event (tests, debugging)
const volatile bool filter_switches = false; // only switches involving targets
const volatile __u64 thread_size = 16384;  // kernel task stack size (THREAD_SIZE)

// Never read: they only put the record layouts into BTF so bpf2go emits the
// matching Go types.
const volatile struct tt_event tt_event_layout;
const volatile enum tt_kind tt_kind_layout;
const volatile enum tt_irq tt_irq_layout;

// targets is a bitmap of the thread-group ids being traced: bit tgid%64 of
// word tgid/64. An array lookup is inlined by the verifier and costs a
// fraction of a hash lookup, and this check runs twice per context switch.
// User space seeds it and refreshes it for cgroup targets; the fork handler
// adds children.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TT_MAX_PID / 64);
	__type(key, __u32);
	__type(value, __u64);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); // resized by the loader
} events SEC(".maps");

// counters[CPU]: events emitted and events dropped because the ring was full.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tt_counters);
} counters SEC(".maps");

// cpus[CPU]: SMT siblings (filled by the loader) and what the CPU runs now.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TT_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct tt_cpu);
} cpus SEC(".maps");

// The preempt count says whether we run in interrupt context. On x86 it is
// a per-CPU variable, reachable from BPF only as a typed ksym, which neither
// cilium/ebpf nor kernels without KALLSYMS_ALL resolve. Per-CPU variables of
// one CPU keep their link-time distances, though, and this CPU's runqueue is
// reachable from the current task: the loader reads both variables' offsets
// from the kernel's BTF and passes the distance (0: unknown). arm64 keeps the
// count in thread_info.
const volatile __s64 preempt_count_from_rq = 0;

#define TT_SOFTIRQ_OFFSET 0x100   /* serving a softirq */
#define TT_HARDIRQ_MASK 0x000f0000
#define TT_NMI_MASK 0x00f00000

// preempt_count reads the current CPU's preempt count into *pc and reports
// whether it could. (Bit 31 is x86's inverted need-resched flag, so the
// count is not a sign-safe int.)
static __always_inline bool preempt_count(struct task_struct *cur, __u32 *pc)
{
	struct rq *rq;

	if (bpf_core_field_exists(cur->thread_info.preempt_count)) {
		*pc = BPF_CORE_READ(cur, thread_info.preempt_count);
		return true;
	}
	if (!preempt_count_from_rq || !bpf_core_field_exists(cur->se.cfs_rq))
		return false;
	rq = BPF_CORE_READ(cur, se.cfs_rq, rq);
	// Our runqueue runs us; anything else means the pointer chain is not
	// what we think it is.
	if (!rq || BPF_CORE_READ(rq, curr) != cur)
		return false;
	return bpf_probe_read_kernel(pc, sizeof(*pc), (void *)rq + preempt_count_from_rq) == 0;
}

// sp_scratch turns a stack address into a plain number: the verifier keeps
// pointer types through the BPF stack, not through map memory.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sp_scratch SEC(".maps");

// irq_context classifies the context we run in: TT_IRQ_NONE, TT_IRQ_SOFT
// (serving a softirq), TT_IRQ_HARD (hard interrupt or NMI) or TT_IRQ_ANY
// (an interrupt of unknown kind).
static __always_inline __u8 irq_context(void)
{
	struct task_struct *cur = (void *)bpf_get_current_task();
	__u32 pc;

	if (preempt_count(cur, &pc)) {
		if (pc & (TT_HARDIRQ_MASK | TT_NMI_MASK))
			return TT_IRQ_HARD;
		if (pc & TT_SOFTIRQ_OFFSET)
			return TT_IRQ_SOFT;
		return TT_IRQ_NONE;
	}

	// Without the count: interrupts (and the softirqs run on their way
	// out) execute on the CPU's IRQ stack, outside the task's stack.
	__u64 base = (__u64)BPF_CORE_READ(cur, stack);
	__u32 zero = 0;
	__u64 *slot = bpf_map_lookup_elem(&sp_scratch, &zero);
	__u64 sp;

	if (!slot || !base)
		return TT_IRQ_NONE;
	*(volatile __u64 *)slot = (__u64)&base;
	sp = *(volatile __u64 *)slot;
	return sp - base >= thread_size ? TT_IRQ_ANY : TT_IRQ_NONE;
}

static __always_inline bool is_target(__u32 tgid)
{
	if (trace_all)
		return true;
	__u32 w = tgid / 64;
	__u64 *word;

	if (tgid == 0)
		return false;
	word = bpf_map_lookup_elem(&targets, &w);
	return word && (*word & (1ULL << (tgid % 64)));
}

// reserve takes a zeroed ring buffer slot stamped with the time, kind and
// CPU, counting the event as emitted or lost.
static __always_inline struct tt_event *reserve(__u8 kind)
{
	__u32 zero = 0;
	struct tt_counters *c = bpf_map_lookup_elem(&counters, &zero);
	struct tt_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (c) {
		if (e)
			c->emitted++;
		else
			c->lost++;
	}
	if (e) {
		__builtin_memset(e, 0, sizeof(*e));
		e->ts = bpf_ktime_get_boot_ns();
		e->kind = kind;
		e->cpu = bpf_get_smp_processor_id();
	}
	return e;
}

// The reader polls on a short timer rather than being woken: a wakeup per
// event costs more than the event itself.
static __always_inline void submit(struct tt_event *e)
{
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

static __always_inline __u32 task_cpu(struct task_struct *p)
{
	if (bpf_core_field_exists(p->cpu))
		return BPF_CORE_READ(p, cpu);
	return BPF_CORE_READ(p, thread_info.cpu);
}

static __always_inline unsigned int task_state(struct task_struct *p)
{
	struct task_struct___pre514 *old = (void *)p;

	if (bpf_core_field_exists(p->__state))
		return BPF_CORE_READ(p, __state);
	return (unsigned int)BPF_CORE_READ(old, state);
}

// report_state turns the kernel's raw task state into the task-report bits
// the sched_switch tracepoint prints (TASK_REPORT_MAX for a preemption).
static __always_inline __u16 report_state(bool preempt, unsigned int st, unsigned int exit_state)
{
	unsigned int s;

	if (preempt)
		return 0x100;
	s = (st | exit_state) & 0x7f;
	if ((st & TT_TASK_IDLE) == TT_TASK_IDLE)
		s = 0x80;
	if (st & TT_TASK_RTLOCK_WAIT)
		s = 0x2;
	// keep the highest bit, as the kernel's fls() does
	for (int b = 7; b >= 0; b--)
		if (s & (1u << b))
			return 1u << b;
	return 0;
}

static __always_inline void fill_task(struct task_struct *p, __s32 *tid, __s32 *tgid,
				      __s32 *prio, char *comm)
{
	*tid = BPF_CORE_READ(p, pid);
	*tgid = BPF_CORE_READ(p, tgid);
	*prio = BPF_CORE_READ(p, prio);
	bpf_probe_read_kernel_str(comm, TT_COMM_LEN, &p->comm);
}

// smt_update records what cpu now runs and reports whether this switch must
// be emitted because an SMT sibling runs (or ran since our last switch) a
// target thread.
static __always_inline bool smt_update(__u32 cpu, bool next_target)
{
	struct tt_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);
	bool dirty, sibling_target = false;

	if (!c)
		return false;
	dirty = c->dirty;
	c->running_target = next_target;
	for (int i = 0; i < TT_MAX_SIBLINGS; i++) {
		__u32 s = c->siblings[i];
		struct tt_cpu *sc;

		if (s == TT_NO_CPU)
			break;
		sc = bpf_map_lookup_elem(&cpus, &s);
		if (!sc)
			break;
		if (next_target)
			sc->dirty = 1;
		if (sc->running_target)
			sibling_target = true;
	}
	c->dirty = sibling_target;
	return dirty;
}

static __always_inline int on_switch(__u64 *ctx)
{
	bool preempt = (bool)ctx[0];
	struct task_struct *prev = (void *)ctx[1], *next = (void *)ctx[2];
	unsigned int st;
	struct tt_event *e;

	if (filter_switches) {
		bool pt = is_target(BPF_CORE_READ(prev, tgid));
		bool nt = is_target(BPF_CORE_READ(next, tgid));
		bool smt = smt_update(bpf_get_smp_processor_id(), nt);

		if (!pt && !nt && !smt)
			return 0;
	}
	e = reserve(TT_SWITCH);
	if (!e)
		return 0;
	st = prev_state_arg ? (unsigned int)ctx[3] : task_state(prev);
	e->prev_state = report_state(preempt, st, BPF_CORE_READ(prev, exit_state));
	fill_task(prev, &e->pid, &e->prev_tgid, &e->prev_prio, e->prev_comm);
	fill_task(next, &e->tid, &e->tgid, &e->prio, e->comm);
	submit(e);
	return 0;
}

// on_wake handles sched_waking and sched_wakeup_new: the current task (or
// the task an interrupt landed on) makes p runnable.
static __always_inline int on_wake(__u64 *ctx, __u8 kind)
{
	struct task_struct *p = (void *)ctx[0];
	__u64 cur = bpf_get_current_pid_tgid();
	struct tt_event *e;

	if (!is_target(BPF_CORE_READ(p, tgid)) && !is_target(cur >> 32))
		return 0;
	e = reserve(kind);
	if (!e)
		return 0;
	e->pid = (__u32)cur;
	e->prev_tgid = cur >> 32;
	bpf_get_current_comm(e->prev_comm, TT_COMM_LEN);
	fill_task(p, &e->tid, &e->tgid, &e->prio, e->comm);
	e->target_cpu = task_cpu(p);
	e->irq = irq_context();
	submit(e);
	return 0;
}

static __always_inline int on_fork(__u64 *ctx)
{
	struct task_struct *parent = (void *)ctx[0], *child = (void *)ctx[1];
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	struct tt_event *e;
	__u32 w = ctgid / 64;
	__u64 *word;

	if (!is_target(ptgid) && !is_target(ctgid))
		return 0;
	if (follow_forks && ctgid != ptgid && !trace_all) {
		word = bpf_map_lookup_elem(&targets, &w);
		if (word)
			__sync_fetch_and_or(word, 1ULL << (ctgid % 64));
	}
	e = reserve(TT_FORK);
	if (!e)
		return 0;
	fill_task(parent, &e->pid, &e->prev_tgid, &e->prev_prio, e->prev_comm);
	fill_task(child, &e->tid, &e->tgid, &e->prio, e->comm);
	submit(e);
	return 0;
}

static __always_inline int on_exit(__u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	struct tt_event *e;

	if (!is_target(BPF_CORE_READ(p, tgid)))
		return 0;
	e = reserve(TT_EXIT);
	if (!e)
		return 0;
	fill_task(p, &e->tid, &e->tgid, &e->prio, e->comm);
	e->pid = e->tid;
	e->prev_tgid = e->tgid;
	submit(e);
	return 0;
}

static __always_inline int on_rename(__u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	const char *comm = (const char *)ctx[1];
	struct tt_event *e;

	if (!is_target(BPF_CORE_READ(p, tgid)))
		return 0;
	e = reserve(TT_RENAME);
	if (!e)
		return 0;
	fill_task(p, &e->tid, &e->tgid, &e->prio, e->prev_comm);
	bpf_probe_read_kernel_str(e->comm, TT_COMM_LEN, comm);
	e->pid = e->tid;
	e->prev_tgid = e->tgid;
	submit(e);
	return 0;
}

#define BOTH(tp, body)                                                  \
	SEC("tp_btf/" #tp) int btf_##tp(__u64 *ctx) { return body; }   \
	SEC("raw_tp/" #tp) int raw_##tp(__u64 *ctx) { return body; }

BOTH(sched_switch, on_switch(ctx))
BOTH(sched_waking, on_wake(ctx, TT_WAKING))
BOTH(sched_wakeup_new, on_wake(ctx, TT_WAKEUP_NEW))
BOTH(sched_process_fork, on_fork(ctx))
BOTH(sched_process_exit, on_exit(ctx))
BOTH(task_rename, on_rename(ctx))
