//go:build ignore

// SPDX-License-Identifier: GPL-2.0
//
// temper's layered sched_ext scheduler. Every thread belongs to a layer:
// user space (scheduler/scx) puts the workload's threads into the task_layers
// map, one layer per thread group of the profile; everything else runs in
// the default layer, scheduled like the normal treatment. Layers by
// treatment:
//
//   exclusive  a DSQ of its own, consumed only by the primary CPU of each
//              core the layer owns. Nothing else is dispatched to an owned
//              core and its other hyperthreads stay idle, so the layer's
//              threads never share a core. Tasks that may run only on owned
//              CPUs (per-CPU kthreads) still run there, from their CPU's
//              local DSQ.
//   latency    a DSQ of its own, consumed before everything else on shared
//              CPUs, a short slice; with preempt, a waking thread preempts a
//              lower layer's task on its CPU.
//   normal     the shared DSQ, ordered by weighted virtual time (the default
//              layer too). A batch group is a normal layer with a long slice
//              (user space sets it): it keeps its weighted share, as
//              SCHED_BATCH keeps its fair share under CFS, rather than
//              waiting until no normal work is left.
//   yield      a DSQ of its own, consumed last.
//
// The tier (off unless the loader names a BestEffort cgroup): every task
// under that cgroup (a node's kubepods/besteffort) that the loader did not
// list is in the besteffort layer, found by cgroup ancestry on every
// enqueue, so a BestEffort task is caught from its first run. Its DSQ is
// consumed after every other; a task of any other layer queued on a shared
// CPU preempts a BestEffort task running on one (a kick), as a CFS task
// preempts an idle entity's. So BestEffort runs only on CPUs nothing else
// wants, except for the starvation guard's turns (below), which it keeps.
//
// Strict priority is bounded: a layer kept waiting for starve_ns is served
// next, so a busy latency layer cannot push normal work, nor normal work
// yield work, into the kernel's stall watchdog.
//
// CPU ceilings. While a sched_ext scheduler is attached the kernel does not
// enforce cpu.max (CFS bandwidth control charges fair-class runtime only),
// so this scheduler does: each limited cgroup the loader finds above the
// target's threads (a pod, a container) is a ceiling, a budget of quota
// runtime per period. Every run of a thread under it is charged to it
// (ops.stopping); a thread whose ceiling is spent waits in the ceiling's
// pen DSQ, which no CPU consumes, and goes back to where its layer puts it
// once a new period refills the budget. A runtime budget rather than a cap
// on how many CPUs the cgroup's threads may hold at once, because a CPU
// count cannot express 0.5 CPU (nor 1.5): a budget bounds the cgroup to
// its quota whatever its threads' layers allocate. Slices are cut to the
// budget left; what a run overshoots (the tick ends slices, 4 ms at HZ=250)
// is debt the next refill repays, so over many periods the cgroup uses at
// most its quota, as CFS bandwidth control does.
//
// Kfuncs whose names changed across kernels are declared weak under every
// name and chosen with ts_ksym_exists(); scheduler/scx resolves which names
// the loader can use before loading (see docs/scheduler.md).

#include "scheduler.h"

char LICENSE[] SEC("license") = "GPL";

// Set by the loader before load.
const volatile __u32 nr_cpus = 1;
const volatile __u32 nr_layers = 1;     // thread groups + the default layer
const volatile __u32 default_layer = 0; // nr_layers - 1
const volatile __u32 nr_dispatch = 0;
// The DSQs a shared CPU consumes, in order: latency layers, the normal DSQ,
// yield layers.
const volatile __u64 dispatch_order[TS_MAX_LAYERS + 1];
// A DSQ in dispatch_order that has waited this long since it was last
// served (or seen empty) is served first, so strict priority cannot starve
// a layer into the kernel's stall watchdog (which ejects the scheduler
// after 30 s of a runnable task not running).
const volatile __u64 starve_ns = 1000000000;
const volatile struct ts_layer layers[TS_MAX_LAYERS];
const volatile struct ts_cpu cpus[TS_MAX_CPUS];
// The tier: the BestEffort cgroup's id and level in the cpu controller's
// hierarchy, and the layer its tasks go to; besteffort_layer TS_NO_LAYER:
// no tier.
const volatile __u64 besteffort_cgid = 0;
const volatile __u32 besteffort_level = 0;
const volatile __u32 besteffort_layer = TS_NO_LAYER;

// Written by ops.exit, read by user space after the scheduler is gone.
__u32 exit_kind;
__s64 exit_code;
char exit_reason[128];
char exit_msg[1024];

__u64 vtime_now;
// When each DSQ of dispatch_order was last served or seen empty.
__u64 last_served[TS_MAX_LAYERS + 1];
// How many CPUs run a BestEffort task now: wakeups look for one to preempt
// only when some do.
__s64 besteffort_running;
// How many wakeups have kicked a CPU off a BestEffort task, for tests: the
// test VM's emulated CPUs cannot time what the kick saves (a wait for a
// BestEffort slice to end), but they can count that it happens.
__u64 besteffort_kicks;

// task_layers: tid → layer, maintained by user space. Absent: default layer.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} task_layers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TS_MAX_LAYERS);
	__type(key, __u32);
	__type(value, struct ts_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TS_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct ts_cpu_state);
} cpu_state SEC(".maps");

struct ts_mask {
	struct bpf_cpumask __ts_kptr *mask;
};

// masks[TS_MASK_SHARED]: the shared CPUs (cores no exclusive layer owns).
// masks[TS_MASK_BESTEFFORT]: the shared CPUs running a BestEffort task the
// starvation guard did not put there, which a wakeup may preempt; kept by
// ts_running and ts_stopping, so that a wakeup finds one without a scan of
// every CPU.
#define TS_MASK_SHARED 0
#define TS_MASK_BESTEFFORT 1
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct ts_mask);
} masks SEC(".maps");

// ceilings: the loader fills quota_ns and period_ns of the slots in use
// (also on Refresh, for cgroups first seen then); the scheduler keeps the
// budget. task_ceilings: tid → the ceilings it draws on, by user space.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TS_MAX_CEILINGS);
	__type(key, __u32);
	__type(value, struct ts_ceiling);
} ceilings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct ts_task_ceilings);
} task_ceilings SEC(".maps");

// The refill timer: it wakes idle CPUs to release penned threads when a
// period begins, since an idle CPU runs no ops.dispatch of its own.
struct ts_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ts_timer);
} refill_timer SEC(".maps");

// Set by the loader: how often the refill timer fires (the shortest period
// among the ceilings); 0: no ceilings, no timer.
const volatile __u64 ceiling_tick_ns = 0;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ts_task);
} task_ctx SEC(".maps");

// Kfuncs. Names that changed across kernels are all declared weak; the
// newest comes first in each family.
extern bool scx_bpf_dsq_insert___v2(struct task_struct *p, __u64 dsq_id, __u64 slice, __u64 enq_flags) __ksym __weak;
extern void scx_bpf_dsq_insert(struct task_struct *p, __u64 dsq_id, __u64 slice, __u64 enq_flags) __ksym __weak;
extern void scx_bpf_dispatch(struct task_struct *p, __u64 dsq_id, __u64 slice, __u64 enq_flags) __ksym __weak;
extern void scx_bpf_dsq_insert_vtime(struct task_struct *p, __u64 dsq_id, __u64 slice, __u64 vtime, __u64 enq_flags) __ksym __weak;
extern void scx_bpf_dispatch_vtime(struct task_struct *p, __u64 dsq_id, __u64 slice, __u64 vtime, __u64 enq_flags) __ksym __weak;
extern bool scx_bpf_dsq_move_to_local___v2(__u64 dsq_id, __u64 enq_flags) __ksym __weak;
extern bool scx_bpf_dsq_move_to_local(__u64 dsq_id) __ksym __weak;
extern bool scx_bpf_consume(__u64 dsq_id) __ksym __weak;
extern __s32 scx_bpf_select_cpu_and(struct task_struct *p, __s32 prev_cpu, __u64 wake_flags,
				    const struct cpumask *cpus_allowed, __u64 flags) __ksym __weak;
extern __s32 scx_bpf_select_cpu_dfl(struct task_struct *p, __s32 prev_cpu, __u64 wake_flags,
				    bool *is_idle) __ksym __weak;
extern bool scx_bpf_dsq_move(struct bpf_iter_scx_dsq *it, struct task_struct *p, __u64 dsq_id, __u64 enq_flags) __ksym __weak;
extern bool scx_bpf_dispatch_from_dsq(struct bpf_iter_scx_dsq *it, struct task_struct *p, __u64 dsq_id, __u64 enq_flags) __ksym __weak;
extern bool scx_bpf_dsq_move_vtime(struct bpf_iter_scx_dsq *it, struct task_struct *p, __u64 dsq_id, __u64 enq_flags) __ksym __weak;
extern bool scx_bpf_dispatch_vtime_from_dsq(struct bpf_iter_scx_dsq *it, struct task_struct *p, __u64 dsq_id, __u64 enq_flags) __ksym __weak;
extern void scx_bpf_dsq_move_set_slice(struct bpf_iter_scx_dsq *it, __u64 slice) __ksym __weak;
extern void scx_bpf_dispatch_from_dsq_set_slice(struct bpf_iter_scx_dsq *it, __u64 slice) __ksym __weak;
extern void scx_bpf_dsq_move_set_vtime(struct bpf_iter_scx_dsq *it, __u64 vtime) __ksym __weak;
extern void scx_bpf_dispatch_from_dsq_set_vtime(struct bpf_iter_scx_dsq *it, __u64 vtime) __ksym __weak;
extern int bpf_iter_scx_dsq_new(struct bpf_iter_scx_dsq *it, __u64 dsq_id, __u64 flags) __ksym;
extern struct task_struct *bpf_iter_scx_dsq_next(struct bpf_iter_scx_dsq *it) __ksym;
extern void bpf_iter_scx_dsq_destroy(struct bpf_iter_scx_dsq *it) __ksym;
extern __s32 scx_bpf_create_dsq(__u64 dsq_id, __s32 node) __ksym;
extern void scx_bpf_kick_cpu(__s32 cpu, __u64 flags) __ksym;
extern bool scx_bpf_test_and_clear_cpu_idle(__s32 cpu) __ksym;
extern __s32 scx_bpf_pick_idle_cpu(const struct cpumask *cpus_allowed, __u64 flags) __ksym;
extern __s32 scx_bpf_task_cpu(const struct task_struct *p) __ksym;
extern __s32 scx_bpf_dsq_nr_queued(__u64 dsq_id) __ksym;
extern struct bpf_cpumask *bpf_cpumask_create(void) __ksym;
extern void bpf_cpumask_release(struct bpf_cpumask *cpumask) __ksym;
extern void bpf_cpumask_set_cpu(__u32 cpu, struct bpf_cpumask *cpumask) __ksym;
extern void bpf_cpumask_clear_cpu(__u32 cpu, struct bpf_cpumask *cpumask) __ksym;
extern __u32 bpf_cpumask_any_and_distribute(const struct cpumask *src1, const struct cpumask *src2) __ksym;
extern bool bpf_cpumask_test_cpu(__u32 cpu, const struct cpumask *cpumask) __ksym;
extern bool bpf_cpumask_intersects(const struct cpumask *src1, const struct cpumask *src2) __ksym;
extern struct cgroup *scx_bpf_task_cgroup(struct task_struct *p) __ksym;
extern struct cgroup *bpf_cgroup_ancestor(struct cgroup *cgrp, int level) __ksym;
extern void bpf_cgroup_release(struct cgroup *cgrp) __ksym;

static __always_inline void insert(struct task_struct *p, __u64 dsq, __u64 slice, __u64 flags)
{
	if (ts_ksym_exists(scx_bpf_dsq_insert___v2))
		scx_bpf_dsq_insert___v2(p, dsq, slice, flags);
	else if (ts_ksym_exists(scx_bpf_dsq_insert))
		scx_bpf_dsq_insert(p, dsq, slice, flags);
	else
		scx_bpf_dispatch(p, dsq, slice, flags);
}

static __always_inline void insert_vtime(struct task_struct *p, __u64 dsq, __u64 slice,
					 __u64 vtime, __u64 flags)
{
	if (ts_ksym_exists(scx_bpf_dsq_insert_vtime))
		scx_bpf_dsq_insert_vtime(p, dsq, slice, vtime, flags);
	else
		scx_bpf_dispatch_vtime(p, dsq, slice, vtime, flags);
}

static __always_inline bool move_to_local(__u64 dsq)
{
	if (ts_ksym_exists(scx_bpf_dsq_move_to_local___v2))
		return scx_bpf_dsq_move_to_local___v2(dsq, 0);
	if (ts_ksym_exists(scx_bpf_dsq_move_to_local))
		return scx_bpf_dsq_move_to_local(dsq);
	return scx_bpf_consume(dsq);
}

// The moves out of a pen, by the kernel's names (6.13 renamed them).
static __always_inline bool move(struct bpf_iter_scx_dsq *it, struct task_struct *p, __u64 dsq, __u64 flags)
{
	if (ts_ksym_exists(scx_bpf_dsq_move))
		return scx_bpf_dsq_move(it, p, dsq, flags);
	return scx_bpf_dispatch_from_dsq(it, p, dsq, flags);
}

static __always_inline bool move_vtime(struct bpf_iter_scx_dsq *it, struct task_struct *p, __u64 dsq, __u64 flags)
{
	if (ts_ksym_exists(scx_bpf_dsq_move_vtime))
		return scx_bpf_dsq_move_vtime(it, p, dsq, flags);
	return scx_bpf_dispatch_vtime_from_dsq(it, p, dsq, flags);
}

static __always_inline void move_set_slice(struct bpf_iter_scx_dsq *it, __u64 slice)
{
	if (ts_ksym_exists(scx_bpf_dsq_move_set_slice))
		scx_bpf_dsq_move_set_slice(it, slice);
	else
		scx_bpf_dispatch_from_dsq_set_slice(it, slice);
}

static __always_inline void move_set_vtime(struct bpf_iter_scx_dsq *it, __u64 vtime)
{
	if (ts_ksym_exists(scx_bpf_dsq_move_set_vtime))
		scx_bpf_dsq_move_set_vtime(it, vtime);
	else
		scx_bpf_dispatch_from_dsq_set_vtime(it, vtime);
}

static __always_inline bool tier_on(void)
{
	return besteffort_layer < TS_MAX_LAYERS && besteffort_layer < nr_layers;
}

// in_besteffort reports whether p's cpu cgroup is the BestEffort cgroup or
// below it. scx_bpf_task_cgroup may be called only on the task an op was
// called for (the kernel holds its rq lock).
static __always_inline bool in_besteffort(struct task_struct *p)
{
	struct cgroup *cg, *anc;
	bool in = false;

	cg = scx_bpf_task_cgroup(p);
	if (!cg)
		return false;
	if (cg->level >= (int)besteffort_level) {
		anc = bpf_cgroup_ancestor(cg, besteffort_level);
		if (anc) {
			in = anc->kn->id == besteffort_cgid;
			bpf_cgroup_release(anc);
		}
	}
	bpf_cgroup_release(cg);
	return in;
}

// layer_of is p's layer: the loader's, else besteffort for a task under
// the BestEffort cgroup (with the tier on; only when op_task: p is the
// task the running op was called for), else the default layer.
static __always_inline __u32 layer_of(struct task_struct *p, bool op_task)
{
	__u32 tid = p->pid;
	__u32 *l = bpf_map_lookup_elem(&task_layers, &tid);

	if (l && *l < nr_layers && *l < TS_MAX_LAYERS)
		return *l;
	if (op_task && tier_on() && in_besteffort(p))
		return besteffort_layer;
	return default_layer < TS_MAX_LAYERS ? default_layer : 0;
}

static __always_inline __u32 treatment_of(__u32 layer)
{
	return layer < TS_MAX_LAYERS ? layers[layer].treatment : TS_NORMAL;
}

static __always_inline struct ts_stats *stats_of(__u32 layer)
{
	return bpf_map_lookup_elem(&stats, &layer);
}

static __always_inline void count_dispatch(__u32 layer)
{
	struct ts_stats *s = stats_of(layer);

	if (s)
		s->dispatches++;
}

static __always_inline __u64 slice_of(__u32 layer)
{
	__u64 s = layer < TS_MAX_LAYERS ? layers[layer].slice_ns : 0;

	return s ? s : SCX_SLICE_DFL;
}

static __always_inline struct bpf_cpumask *mask_of(__u32 which)
{
	struct ts_mask *m = bpf_map_lookup_elem(&masks, &which);

	return m ? m->mask : NULL;
}

static __always_inline const struct cpumask *shared_mask(void)
{
	return (const struct cpumask *)mask_of(TS_MASK_SHARED);
}

static __always_inline bool cpu_owned(__s32 cpu)
{
	return cpu >= 0 && cpu < TS_MAX_CPUS && cpus[cpu].owner != TS_NO_LAYER;
}

// exclusive_fits reports whether p may run on one of its exclusive layer's
// primary CPUs; a thread whose affinity excludes them all runs shared.
static __always_inline bool exclusive_fits(struct task_struct *p, __u32 layer)
{
	__u32 n;

	if (layer >= TS_MAX_LAYERS)
		return false;
	n = layers[layer].nr_cpus;
	for (__u32 i = 0; i < TS_MAX_LAYER_CPUS && i < n; i++)
		if (bpf_cpumask_test_cpu(layers[layer].cpus[i], p->cpus_ptr))
			return true;
	return false;
}

// needs_own_cpu reports whether p must be put straight on a CPU's local
// DSQ: a per-CPU kthread (ksoftirqd, a bound kworker), or a task that may
// run only on CPUs the plan took away (owned primaries, kept-idle
// siblings). An owned CPU consumes nothing but its layer's DSQ, so the
// latter would wait forever in a shared DSQ; the former in the vtime DSQ
// would queue behind every spinner on a saturated CPU, and a kthread
// preempted inside an RCU read-side section that waits there stalls RCU
// for the whole machine. Local DSQs run on every CPU whatever the plan.
static __always_inline bool needs_own_cpu(struct task_struct *p)
{
	const struct cpumask *shared;

	if ((p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1)
		return true;
	if (p->nr_cpus_allowed >= nr_cpus)
		return false;
	shared = shared_mask();
	return shared && !bpf_cpumask_intersects(shared, p->cpus_ptr);
}

// own_cpu is where needs_own_cpu's tasks go: the CPU the task is on (the
// kernel put it there, or select_cpu chose it), or -1 when p may not run
// there: SCX_DSQ_LOCAL_ON a CPU outside p's affinity is a runtime error.
// That happens only while an affinity change is in flight, and the
// kernel's move to an allowed CPU enqueues the task again.
static __always_inline __s32 own_cpu(struct task_struct *p)
{
	__s32 cpu = scx_bpf_task_cpu(p);

	if (cpu >= 0 && cpu < nr_cpus && bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
		return cpu;
	return -1;
}

// set_queued records whether p sits in the vtime DSQ, the one place tasks
// run in vtime order (see ts_running).
static __always_inline void set_queued(struct task_struct *p, __u32 queued)
{
	struct ts_task *tc = bpf_task_storage_get(&task_ctx, p, 0, 0);

	if (tc)
		tc->queued = queued;
}

// queue_vtime is the vtime p enters the vtime DSQ with: a thread that
// slept long gets at most one slice of credit over the threads that kept
// running, nor does it carry more than TS_MAX_LAG of debt: a low-weight
// task (nice 19 counts 100x its runtime) that ran long, or whose run the
// clock stretched (a VM whose host stalled it), would otherwise wait behind
// every busy task for up to minutes, and a kernel thread preempted inside
// an RCU read-side section that waits that long stalls RCU for the whole
// machine. It marks p queued (see ts_running).
static __always_inline __u64 queue_vtime(struct ts_task *tc)
{
	if ((__s64)(tc->vtime - (vtime_now - SCX_SLICE_DFL)) < 0)
		tc->vtime = vtime_now - SCX_SLICE_DFL;
	if ((__s64)(tc->vtime - (vtime_now + TS_MAX_LAG)) > 0)
		tc->vtime = vtime_now + TS_MAX_LAG;
	tc->queued = 1;
	return tc->vtime;
}

static __always_inline struct ts_ceiling *ceiling(__u32 idx)
{
	struct ts_ceiling *c = bpf_map_lookup_elem(&ceilings, &idx);

	return c && c->quota_ns && c->period_ns ? c : NULL;
}

// refill starts the periods that have begun since c's last one: each adds
// quota to the budget, which never holds more than one quota (unused
// runtime does not accumulate into a burst; cpu.max.burst is not read).
// Several CPUs may get here at once: the compare-and-swap on the period's
// start lets one of them refill.
static __always_inline void refill(struct ts_ceiling *c, __u64 now)
{
	__u64 start = c->period_start, n;
	__s64 b, nb;

	if (now - start < c->period_ns)
		return;
	n = (now - start) / c->period_ns;
	if (__sync_val_compare_and_swap(&c->period_start, start, start + n * c->period_ns) != start)
		return;
	if (n > 1000)
		n = 1000; // a long-idle cgroup: any debt is long repaid
	b = c->budget_ns;
	nb = b + (__s64)(n * c->quota_ns);
	if (nb > (__s64)c->quota_ns)
		nb = c->quota_ns;
	__sync_fetch_and_add(&c->budget_ns, nb - b);
}

// over_ceiling returns the first of p's ceilings that has no budget left
// in this period, or TS_NO_CEILING; it cuts *slice to the least budget left
// among the others.
static __always_inline __u32 over_ceiling(struct task_struct *p, __u64 *slice)
{
	__u32 tid = p->pid;
	struct ts_task_ceilings *tcs = bpf_map_lookup_elem(&task_ceilings, &tid);
	__u64 now;

	if (!tcs)
		return TS_NO_CEILING;
	now = bpf_ktime_get_ns();
	for (int i = 0; i < TS_MAX_TASK_CEILINGS; i++) {
		__u32 idx = tcs->idx[i];
		struct ts_ceiling *c;
		__s64 b;

		if (idx == TS_NO_CEILING)
			break;
		c = ceiling(idx);
		if (!c)
			continue;
		refill(c, now);
		b = c->budget_ns;
		if (b <= 0)
			return idx;
		if ((__u64)b < *slice)
			*slice = (__u64)b < TS_MIN_CEILING_SLICE ? TS_MIN_CEILING_SLICE : (__u64)b;
	}
	return TS_NO_CEILING;
}

// charge draws a run of p of ran ns from each of its ceilings.
static __always_inline void charge(struct task_struct *p, __u64 ran)
{
	__u32 tid = p->pid;
	struct ts_task_ceilings *tcs = bpf_map_lookup_elem(&task_ceilings, &tid);

	if (!tcs)
		return;
	for (int i = 0; i < TS_MAX_TASK_CEILINGS; i++) {
		struct ts_ceiling *c;

		if (tcs->idx[i] == TS_NO_CEILING)
			break;
		c = ceiling(tcs->idx[i]);
		if (!c)
			continue;
		__sync_fetch_and_add(&c->budget_ns, -(__s64)ran);
		__sync_fetch_and_add(&c->charged_ns, ran);
	}
}

// pen holds p, whose ceiling idx is spent, until a period refills it.
static __always_inline void pen(struct task_struct *p, __u32 idx, __u64 slice, __u64 enq_flags)
{
	struct ts_ceiling *c = ceiling(idx);

	if (c)
		__sync_fetch_and_add(&c->throttles, 1);
	insert(p, TS_PEN_DSQ_BASE + (idx & (TS_MAX_CEILINGS - 1)), slice, enq_flags & ~SCX_ENQ_LAST);
}

SEC("struct_ops/select_cpu")
__s32 ts_select_cpu(unsigned long long *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	__s32 prev_cpu = ctx[1];
	__u64 wake_flags = ctx[2];
	__u32 layer = layer_of(p, true);
	__u64 slice = slice_of(layer);
	const struct cpumask *shared;
	bool idle = false;
	__s32 cpu;

	// A thread over its ceiling is not put on a CPU here: enqueue pens it.
	if (over_ceiling(p, &slice) != TS_NO_CEILING)
		return prev_cpu;
	if (treatment_of(layer) == TS_EXCLUSIVE && exclusive_fits(p, layer)) {
		__u32 n = layers[layer & (TS_MAX_LAYERS - 1)].nr_cpus;

		for (__u32 i = 0; i < TS_MAX_LAYER_CPUS && i < n; i++) {
			cpu = layers[layer & (TS_MAX_LAYERS - 1)].cpus[i];
			if (bpf_cpumask_test_cpu(cpu, p->cpus_ptr) &&
			    scx_bpf_test_and_clear_cpu_idle(cpu)) {
				insert(p, SCX_DSQ_LOCAL, slice, 0);
				count_dispatch(layer);
				return cpu;
			}
		}
		if (cpu_owned(prev_cpu) && cpus[prev_cpu & (TS_MAX_CPUS - 1)].owner == layer)
			return prev_cpu;
		return layers[layer & (TS_MAX_LAYERS - 1)].cpus[0];
	}

	shared = shared_mask();
	if (!shared)
		return prev_cpu;
	if (ts_ksym_exists(scx_bpf_select_cpu_and)) {
		// Idle shared CPUs only, and the kernel's preferences among them
		// (prev_cpu, a whole idle core, the same LLC).
		cpu = scx_bpf_select_cpu_and(p, prev_cpu, wake_flags, shared, 0);
		if (cpu >= 0) {
			insert(p, SCX_DSQ_LOCAL, slice, 0);
			count_dispatch(layer);
			return cpu;
		}
		return prev_cpu;
	}
	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &idle);
	if (!cpu_owned(cpu)) {
		if (idle) {
			insert(p, SCX_DSQ_LOCAL, slice, 0);
			count_dispatch(layer);
		}
		return cpu;
	}
	// The kernel's choice is an owned CPU, which must stay to its layer:
	// give back the idle state we took and look among shared CPUs.
	if (idle)
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	cpu = scx_bpf_pick_idle_cpu(shared, 0);
	if (cpu >= 0 && bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
		insert(p, SCX_DSQ_LOCAL, slice, 0);
		count_dispatch(layer);
		return cpu;
	}
	if (cpu >= 0)
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	return prev_cpu;
}

// preempt_target returns a CPU where p may run that runs a lower layer's
// task now, or -1: p's last CPU first.
static __always_inline __s32 preempt_target(struct task_struct *p)
{
	__s32 cpu = scx_bpf_task_cpu(p);
	const struct cpumask *shared = shared_mask();
	struct ts_cpu_state *st;
	__u32 key, t;

	if (!shared || cpu < 0 || !bpf_cpumask_test_cpu(cpu, shared) ||
	    !bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
		return -1;
	key = cpu;
	st = bpf_map_lookup_elem(&cpu_state, &key);
	if (!st || !st->tid)
		return -1;
	t = treatment_of(st->layer);
	if (t == TS_NORMAL || t == TS_YIELD || t == TS_BESTEFFORT)
		return cpu;
	return -1;
}

// besteffort_preemptible reports whether cpu, where p may run, is a shared
// CPU running a BestEffort task the guard did not put there.
static __always_inline bool besteffort_preemptible(struct task_struct *p, __s32 cpu, const struct cpumask *shared)
{
	struct ts_cpu_state *st;
	__u32 key;

	if (cpu < 0 || cpu >= nr_cpus || !bpf_cpumask_test_cpu(cpu, shared) ||
	    !bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
		return false;
	key = cpu;
	st = bpf_map_lookup_elem(&cpu_state, &key);
	return st && st->tid && st->layer == besteffort_layer && !st->kept;
}

// preempt_besteffort makes room for p, just queued on the shared CPUs: a
// CPU running a BestEffort task is kicked (p's last CPU first, else one of
// masks[TS_MASK_BESTEFFORT] p may run on), and its dispatch then takes
// p's DSQ before the BestEffort one. As a CFS task preempts an idle entity
// on wakeup.
static __always_inline void preempt_besteffort(struct task_struct *p)
{
	const struct cpumask *shared, *be;
	__s32 cpu;

	if (!tier_on() || besteffort_running <= 0)
		return;
	shared = shared_mask();
	be = (const struct cpumask *)mask_of(TS_MASK_BESTEFFORT);
	if (!shared || !be)
		return;
	cpu = scx_bpf_task_cpu(p);
	if (!besteffort_preemptible(p, cpu, shared))
		cpu = bpf_cpumask_any_and_distribute(be, p->cpus_ptr);
	// The mask can be a moment behind a CPU's switch: the CPU's own
	// state decides.
	if (besteffort_preemptible(p, cpu, shared)) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
		__sync_fetch_and_add(&besteffort_kicks, 1);
	}
}

static __always_inline void kick_idle_primary(struct task_struct *p, __u32 layer)
{
	__u32 n = layers[layer & (TS_MAX_LAYERS - 1)].nr_cpus;
	__s32 cpu;

	for (__u32 i = 0; i < TS_MAX_LAYER_CPUS && i < n; i++) {
		cpu = layers[layer & (TS_MAX_LAYERS - 1)].cpus[i];
		if (bpf_cpumask_test_cpu(cpu, p->cpus_ptr) &&
		    scx_bpf_test_and_clear_cpu_idle(cpu)) {
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
			return;
		}
	}
}

SEC("struct_ops/enqueue")
void ts_enqueue(unsigned long long *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	__u64 enq_flags = ctx[1];
	__u32 layer = layer_of(p, true);
	__u32 t = treatment_of(layer);
	__u64 slice = slice_of(layer);
	struct ts_stats *s = stats_of(layer);
	struct ts_task *tc;
	__s32 cpu;

	__u32 over;

	if (s)
		s->enqueues++;
	set_queued(p, 0);
	over = over_ceiling(p, &slice);
	if (over != TS_NO_CEILING) {
		pen(p, over, slice, enq_flags);
		return;
	}
	// The last runnable task of a CPU whose slice ran out (SCX_OPS_ENQ_LAST:
	// without it the kernel would keep it running past its ceiling) runs on.
	if (enq_flags & SCX_ENQ_LAST) {
		insert(p, SCX_DSQ_LOCAL, slice, enq_flags);
		count_dispatch(layer);
		return;
	}
	// Before needs_own_cpu: an exclusive thread allowed on a primary and
	// its kept-idle sibling must wait for the primary.
	if (t == TS_EXCLUSIVE && exclusive_fits(p, layer)) {
		insert(p, TS_LAYER_DSQ_BASE + layer, slice, enq_flags);
		count_dispatch(layer);
		kick_idle_primary(p, layer);
		return;
	}
	if (needs_own_cpu(p)) {
		cpu = own_cpu(p);
		if (cpu >= 0) {
			insert(p, SCX_DSQ_LOCAL_ON | cpu, slice, enq_flags);
			count_dispatch(layer);
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
			return;
		}
	}
	switch (t) {
	case TS_LATENCY:
		if (layers[layer & (TS_MAX_LAYERS - 1)].preempt) {
			cpu = preempt_target(p);
			if (cpu >= 0) {
				insert(p, SCX_DSQ_LOCAL_ON | cpu, slice, enq_flags | SCX_ENQ_PREEMPT);
				count_dispatch(layer);
				return;
			}
		}
		insert(p, TS_LAYER_DSQ_BASE + layer, slice, enq_flags);
		preempt_besteffort(p);
		break;
	case TS_YIELD:
		insert(p, TS_LAYER_DSQ_BASE + layer, slice, enq_flags);
		preempt_besteffort(p);
		break;
	case TS_BESTEFFORT:
		insert(p, TS_LAYER_DSQ_BASE + layer, slice, enq_flags);
		break;
	default:
		// normal, the default layer, and exclusive threads that cannot
		// reach their cores.
		tc = bpf_task_storage_get(&task_ctx, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!tc)
			insert(p, TS_NORMAL_DSQ, slice, enq_flags);
		else
			insert_vtime(p, TS_NORMAL_DSQ, slice, queue_vtime(tc), enq_flags);
		preempt_besteffort(p);
		break;
	}
	count_dispatch(layer);
}

// kick_idle_shared wakes an idle shared CPU, if there is one, to consume
// what was just queued.
static __always_inline void kick_idle_shared(void)
{
	const struct cpumask *shared = shared_mask();
	__s32 cpu;

	if (!shared)
		return;
	cpu = scx_bpf_pick_idle_cpu(shared, 0);
	if (cpu >= 0)
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}

// unpen moves p, held in the pen being iterated, to where enqueue puts a
// thread of its layer, or to the pen of another ceiling of p that is
// still spent.
static __always_inline void unpen(struct bpf_iter_scx_dsq *it, struct task_struct *p, __u32 from)
{
	__u32 layer = layer_of(p, false), t = treatment_of(layer), over;
	__u64 slice = slice_of(layer);
	struct ts_task *tc;
	__s32 cpu;

	over = over_ceiling(p, &slice);
	if (over != TS_NO_CEILING) {
		if (over != from)
			move(it, p, TS_PEN_DSQ_BASE + (over & (TS_MAX_CEILINGS - 1)), 0);
		return;
	}
	move_set_slice(it, slice);
	if (t == TS_EXCLUSIVE && exclusive_fits(p, layer)) {
		if (move(it, p, TS_LAYER_DSQ_BASE + layer, 0)) {
			count_dispatch(layer);
			kick_idle_primary(p, layer);
		}
		return;
	}
	if (needs_own_cpu(p)) {
		cpu = own_cpu(p);
		if (cpu >= 0) {
			if (move(it, p, SCX_DSQ_LOCAL_ON | cpu, 0)) {
				count_dispatch(layer);
				scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
			}
			return;
		}
	}
	switch (t) {
	case TS_LATENCY:
	case TS_YIELD:
	case TS_BESTEFFORT:
		if (!move(it, p, TS_LAYER_DSQ_BASE + layer, 0))
			return;
		break;
	default:
		tc = bpf_task_storage_get(&task_ctx, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (tc) {
			move_set_vtime(it, queue_vtime(tc));
			if (!move_vtime(it, p, TS_NORMAL_DSQ, 0)) {
				tc->queued = 0;
				return;
			}
		} else if (!move(it, p, TS_NORMAL_DSQ, 0)) {
			return;
		}
		break;
	}
	count_dispatch(layer);
	kick_idle_shared();
}

// release moves the threads penned under ceilings that have budget again
// back to their layers.
static __always_inline void release(void)
{
	__u64 now;

	if (!ceiling_tick_ns)
		return;
	now = bpf_ktime_get_ns();
	for (__u32 i = 0; i < TS_MAX_CEILINGS; i++) {
		struct ts_ceiling *c = ceiling(i);
		struct bpf_iter_scx_dsq it;
		struct task_struct *p;

		if (!c || scx_bpf_dsq_nr_queued(TS_PEN_DSQ_BASE + i) <= 0)
			continue;
		refill(c, now);
		if (c->budget_ns <= 0)
			continue;
		bpf_iter_scx_dsq_new(&it, TS_PEN_DSQ_BASE + i, 0);
		while ((p = bpf_iter_scx_dsq_next(&it)))
			unpen(&it, p, i);
		bpf_iter_scx_dsq_destroy(&it);
	}
}

// ts_refill_tick runs every ceiling_tick_ns: when a period has refilled a
// ceiling whose threads wait, it wakes an idle CPU, whose ops.dispatch
// releases them (a busy CPU releases them at its next dispatch).
static int ts_refill_tick(void *map, __u32 *key, struct ts_timer *t)
{
	__u64 now = bpf_ktime_get_ns();
	bool waiting = false;

	for (__u32 i = 0; i < TS_MAX_CEILINGS; i++) {
		struct ts_ceiling *c = ceiling(i);

		if (!c || scx_bpf_dsq_nr_queued(TS_PEN_DSQ_BASE + i) <= 0)
			continue;
		refill(c, now);
		if (c->budget_ns > 0)
			waiting = true;
	}
	if (waiting) {
		for (__u32 cpu = 0; cpu < TS_MAX_CPUS && cpu < nr_cpus; cpu++) {
			if (cpus[cpu].owner == TS_NO_LAYER || cpus[cpu].primary)
				scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		}
	}
	bpf_timer_start(&t->timer, ceiling_tick_ns, 0);
	return 0;
}

// mark_guarded records that the starvation guard just moved a BestEffort
// task to cpu's local DSQ: ts_running keeps it from preemption.
static __always_inline void mark_guarded(__s32 cpu)
{
	__u32 key = cpu;
	struct ts_cpu_state *st = bpf_map_lookup_elem(&cpu_state, &key);

	if (st)
		st->guard = 1;
}

// prev_besteffort reports whether prev, the task cpu ran last (ts_running
// recorded its layer; ts_stopping has not run yet), is a BestEffort task.
static __always_inline bool prev_besteffort(__s32 cpu, struct task_struct *prev)
{
	__u32 key = cpu;
	struct ts_cpu_state *st = bpf_map_lookup_elem(&cpu_state, &key);

	return st && st->tid == prev->pid && st->layer == besteffort_layer;
}

SEC("struct_ops/dispatch")
void ts_dispatch(unsigned long long *ctx)
{
	__s32 cpu = ctx[0];
	struct task_struct *prev = (void *)ctx[1];
	__u32 c = cpu & (TS_MAX_CPUS - 1), owner, n = nr_dispatch;
	bool keep_prev;
	__u64 now;

	release();
	owner = cpus[c].owner;
	if (owner != TS_NO_LAYER) {
		// An owned core: its primary CPU runs the owner's threads, its
		// other hyperthreads nothing.
		if (cpus[c].primary)
			move_to_local(TS_LAYER_DSQ_BASE + owner);
		return;
	}
	now = bpf_ktime_get_ns();
	// Starved DSQs first (the first in the order never starves). The
	// BestEffort DSQ's guard comes the more often the more tasks wait in
	// it, so that each waits at most TS_BESTEFFORT_WAIT_NS; its turn is
	// kept from preemption (cpu_state.guard, then .kept in ts_running).
	for (__u32 i = 1; i < TS_MAX_LAYERS + 1 && i < n; i++) {
		__s32 queued = scx_bpf_dsq_nr_queued(dispatch_order[i]);
		__u64 starve = starve_ns;
		bool be = tier_on() && dispatch_order[i] == TS_LAYER_DSQ_BASE + besteffort_layer;

		if (queued <= 0) {
			last_served[i] = now;
			continue;
		}
		if (be && TS_BESTEFFORT_WAIT_NS / queued < starve)
			starve = TS_BESTEFFORT_WAIT_NS / queued;
		if (now - last_served[i] > starve && move_to_local(dispatch_order[i])) {
			last_served[i] = now;
			if (be)
				mark_guarded(cpu);
			return;
		}
	}
	// A task of another layer whose slice ran out and that could run on
	// comes before a BestEffort one: without this check its CPU would go
	// to the BestEffort DSQ (nothing else queued) and the task would have
	// to preempt its way back.
	keep_prev = tier_on() && prev && (prev->scx.flags & SCX_TASK_QUEUED) && !prev_besteffort(cpu, prev);
	for (__u32 i = 0; i < TS_MAX_LAYERS + 1 && i < n; i++) {
		if (keep_prev && dispatch_order[i] == TS_LAYER_DSQ_BASE + besteffort_layer)
			return;
		if (move_to_local(dispatch_order[i])) {
			last_served[i] = now;
			return;
		}
	}
}

static __always_inline bool exclusive_on(struct ts_cpu_state *st)
{
	return st && st->tid && treatment_of(st->layer) == TS_EXCLUSIVE;
}

// set_besteffort_cpu puts cpu in masks[TS_MASK_BESTEFFORT] (a shared CPU
// only: an owned core never runs BestEffort work, and is never kicked for
// it) or takes it out.
static __always_inline void set_besteffort_cpu(__u32 cpu, bool on)
{
	struct bpf_cpumask *be = mask_of(TS_MASK_BESTEFFORT);

	if (!be)
		return;
	if (on && !cpu_owned(cpu))
		bpf_cpumask_set_cpu(cpu, be);
	else if (!on)
		bpf_cpumask_clear_cpu(cpu, be);
}

SEC("struct_ops/running")
void ts_running(unsigned long long *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	__u32 cpu = bpf_get_smp_processor_id(), c = cpu & (TS_MAX_CPUS - 1);
	__u32 layer = layer_of(p, true);
	bool excl = treatment_of(layer) == TS_EXCLUSIVE;
	struct ts_cpu_state *st = bpf_map_lookup_elem(&cpu_state, &cpu), *sst;
	struct ts_task *tc;
	struct ts_stats *s;

	if (!st)
		return;
	st->tid = p->pid;
	st->layer = layer;
	st->started_ns = bpf_ktime_get_ns();
	st->kept = 0;
	if (tier_on() && layer == besteffort_layer) {
		st->kept = st->guard;
		__sync_fetch_and_add(&besteffort_running, 1);
		if (!st->kept)
			set_besteffort_cpu(cpu, true);
	}
	st->guard = 0;
	// vtime_now follows only tasks taken from the vtime DSQ, which leave
	// it in vtime order. A task that ran out of order (straight onto an
	// idle CPU, a local DSQ, a layer DSQ) may be far ahead, and
	// p->scx.dsq_vtime is not ours to trust: it outlives this scheduler
	// and keeps whatever the last one wrote. Either would move vtime_now
	// past the tasks still queued; every task waking after that would
	// then start behind them, and on a CPU saturated by tasks that never
	// sleep wait until they catch up (an RCU stall once: the stalled
	// kthread waited 21 s behind four spinners).
	tc = bpf_task_storage_get(&task_ctx, p, 0, 0);
	if (tc && tc->queued) {
		tc->queued = 0;
		if ((__s64)(tc->vtime - vtime_now) > 0)
			vtime_now = tc->vtime;
	}

	// SMT: an exclusive thread starting next to a busy sibling, or a task
	// starting next to an exclusive thread, is one count for that
	// exclusive layer.
	for (int i = 0; i < TS_MAX_SIBLINGS; i++) {
		__u32 sib = cpus[c].siblings[i];

		if (sib == TS_NO_CPU)
			break;
		sst = bpf_map_lookup_elem(&cpu_state, &sib);
		if (!sst || !sst->tid)
			continue;
		if (excl)
			s = stats_of(layer);
		else if (exclusive_on(sst))
			s = stats_of(sst->layer);
		else
			continue;
		if (s)
			s->sibling_busy++;
	}
}

SEC("struct_ops/stopping")
void ts_stopping(unsigned long long *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	bool runnable = ctx[1];
	__u32 cpu = bpf_get_smp_processor_id();
	struct ts_cpu_state *st = bpf_map_lookup_elem(&cpu_state, &cpu);
	__u32 layer, t, w;
	struct ts_stats *s;
	struct ts_task *tc;
	__u64 ran;

	if (!st || !st->tid)
		return;
	layer = st->layer;
	ran = bpf_ktime_get_ns() - st->started_ns;
	st->tid = 0;
	st->kept = 0;
	if (tier_on() && layer == besteffort_layer) {
		__sync_fetch_and_add(&besteffort_running, -1);
		set_besteffort_cpu(cpu, false);
	}
	s = stats_of(layer);
	if (s) {
		s->runtime_ns += ran;
		// Still runnable as it stops: it lost its CPU (a slice spent, a
		// preempting wakeup, a kick), as involuntary switches count on CFS.
		if (runnable)
			s->preemptions++;
	}
	charge(p, ran);
	t = treatment_of(layer);
	if (t != TS_NORMAL && t != TS_EXCLUSIVE)
		return;
	// Virtual time advances by runtime scaled by the inverse weight: the
	// task's own (nice) weight times its layer's, 100 being neutral.
	w = p->scx.weight;
	if (layer < TS_MAX_LAYERS && layers[layer].weight)
		w = w * layers[layer].weight / 100;
	if (!w)
		w = 1;
	tc = bpf_task_storage_get(&task_ctx, p, 0, 0);
	if (tc)
		tc->vtime += (ran < TS_MAX_LAG ? ran : TS_MAX_LAG) * 100 / w;
}

// install_mask stores mask in masks[which], taking over its reference.
static __always_inline __s32 install_mask(__u32 which, struct bpf_cpumask *mask)
{
	struct ts_mask *m = bpf_map_lookup_elem(&masks, &which);
	struct bpf_cpumask *old;

	if (!m) {
		bpf_cpumask_release(mask);
		return -2; // ENOENT
	}
	old = bpf_kptr_xchg(&m->mask, mask);
	if (old)
		bpf_cpumask_release(old);
	return 0;
}

SEC("struct_ops.s/init")
__s32 ts_init(void)
{
	struct bpf_cpumask *mask;
	__u32 zero = 0;
	__s32 err;

	for (__u32 l = 0; l < TS_MAX_LAYERS && l < nr_layers; l++) {
		err = scx_bpf_create_dsq(TS_LAYER_DSQ_BASE + l, -1);
		if (err)
			return err;
	}
	err = scx_bpf_create_dsq(TS_NORMAL_DSQ, -1);
	if (err)
		return err;
	if (ceiling_tick_ns) {
		struct ts_timer *t;

		for (__u32 i = 0; i < TS_MAX_CEILINGS; i++) {
			err = scx_bpf_create_dsq(TS_PEN_DSQ_BASE + i, -1);
			if (err)
				return err;
		}
		t = bpf_map_lookup_elem(&refill_timer, &zero);
		if (!t)
			return -2; // ENOENT
		err = bpf_timer_init(&t->timer, &refill_timer, CLOCK_MONOTONIC);
		if (err)
			return err;
		err = bpf_timer_set_callback(&t->timer, ts_refill_tick);
		if (err)
			return err;
		err = bpf_timer_start(&t->timer, ceiling_tick_ns, 0);
		if (err)
			return err;
	}

	mask = bpf_cpumask_create();
	if (!mask)
		return -12; // ENOMEM
	for (__u32 c = 0; c < TS_MAX_CPUS && c < nr_cpus; c++)
		if (cpus[c].owner == TS_NO_LAYER)
			bpf_cpumask_set_cpu(c, mask);
	err = install_mask(TS_MASK_SHARED, mask);
	if (err)
		return err;
	mask = bpf_cpumask_create(); // empty: no BestEffort task runs yet
	if (!mask)
		return -12; // ENOMEM
	return install_mask(TS_MASK_BESTEFFORT, mask);
}

SEC("struct_ops/exit")
void ts_exit(unsigned long long *ctx)
{
	struct scx_exit_info *ei = (void *)ctx[0];

	exit_kind = ei->kind;
	exit_code = ei->exit_code;
	bpf_probe_read_kernel_str(exit_reason, sizeof(exit_reason), ei->reason);
	bpf_probe_read_kernel_str(exit_msg, sizeof(exit_msg), ei->msg);
}

SEC(".struct_ops.link")
struct sched_ext_ops temper_ops = {
	.select_cpu = (void *)ts_select_cpu,
	.enqueue = (void *)ts_enqueue,
	.dispatch = (void *)ts_dispatch,
	.running = (void *)ts_running,
	.stopping = (void *)ts_stopping,
	.init = (void *)ts_init,
	.exit = (void *)ts_exit,
	.flags = SCX_OPS_ENQ_LAST,
	.name = "temper_layered",
};
