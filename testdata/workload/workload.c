/*
 * workload.c - a small multi-threaded test workload with a known, behaviour-
 * driven thread structure.  Tests trace it with tracefs/BPF and check thread
 * names, per-thread context-switch counts, the waker -> wakee graph and a
 * thread classifier against it.  Plain C11 + POSIX threads, no dependencies.
 *
 * Build (must stay warning-free, both with and without -static):
 *     gcc -O2 -Wall -Wextra -pthread -static -o workload workload.c
 *
 * Threads and what they model (every thread names itself before "ready"):
 *
 *   wl-main          main thread (renamed with prctl).  Blocks SIGTERM/SIGINT
 *                    everywhere, waits for them with sigtimedwait() (or for
 *                    --duration to elapse), then shuts everything down.
 *   wl-acceptor      connection-server accept loop: produces one "request"
 *                    per tick at a fixed rate (clock_nanosleep TIMER_ABSTIME),
 *                    queues it and pthread_cond_signal()s ONE idle worker.
 *                    => acceptor is the waker of the workers.
 *   wl-worker-<i>    request-handling pool, latency critical: woken often,
 *                    runs ~30 us of CPU per request, hands a log record to
 *                    the logger and goes back to waiting.
 *   wl-logger        WAL writer: drains log records, formats them, write()s
 *                    them in batches of LOG_BATCH (8) records to a temp file
 *                    and hands each written batch to the syncer.
 *   wl-syncer        WAL fsync thread: fdatasync() per hand-off (group commit:
 *                    one fdatasync covers all batches handed over since the
 *                    previous one), so it sleeps in D state on disk I/O.
 *                    Chain: worker -> logger -> syncer.
 *   wl-compute-<i>   fork/join CPU pool like an inference intra-op pool: each
 *                    round every member burns ~2 ms of arithmetic, meets the
 *                    others at a pthread_barrier, then all sleep ~3 ms
 *                    (=> ~40% duty per member, machine not saturated).
 *   wl-timer         housekeeping tick: wakes every 100 ms, does a few us of
 *                    work (reads counters, small checksum).
 *   wl-idle-<i>      blocked on a condvar that is only signalled at shutdown,
 *                    i.e. threads that never run during a measurement window.
 *
 * --stats FILE: the workers record each request's latency (from the acceptor
 * queueing it to the worker finishing it) in a log-linear histogram, and
 * wl-timer rewrites FILE (temp file + rename) every tick with the cumulative
 * counts: a "time_ns <CLOCK_MONOTONIC>" line, a "requests <n>" line, then "<bucket> <count>" lines for the
 * non-empty buckets.  Bucket b holds latencies in [lo(b), lo(b+1)) ns with
 * lo(b) = b for b < 8 and lo(b) = 2^(b/8 + 2) * (1 + (b%8)/8) above: eight
 * buckets per octave, so a percentile read from two snapshots' difference is
 * within 12.5% (scripts/demo-bench.sh reads it; that is how the demo's
 * benchmark measures this workload from outside).
 *
 * stdout protocol (nothing else is written to stdout):
 *     thread <tid> <name>        one per thread, wl-main first
 *     ready                      all threads exist, are named and running
 *     done requests=<n> batches=<n> syncs=<n> compute_iters=<n>
 * Errors and warnings go to stderr.  Exit 0 on normal end, 2 on usage error,
 * 1 on runtime failure.
 *
 * Design notes:
 *  - CPU work uses an iteration count calibrated at startup against
 *    CLOCK_THREAD_CPUTIME_ID, so busy loops do no syscalls.  Results go to an
 *    atomic sink so the compiler cannot drop the loops.
 *  - SIGSTOP/SIGCONT safe: every sleep loops on EINTR, the periodic threads
 *    skip missed ticks instead of bursting to catch up after a stop.
 *  - SIGTERM/SIGINT are blocked right at startup; one arriving in the few
 *    instructions before that (i.e. long before "ready") kills the process
 *    with the default action.  Tests should signal only after "ready".
 *  - --duration counts wall-clock (CLOCK_MONOTONIC) time, including time
 *    spent stopped.
 *  - compute_iters counts pool rounds (barrier passes), not per-thread loops.
 *  - requests counts requests completed by workers.  Requests still queued at
 *    shutdown are abandoned; records already handed to the logger are written
 *    and synced before exit.
 *  - The log file wraps back to offset 0 after LOG_WRAP_BYTES so long runs
 *    use bounded disk space.  Note: on tmpfs fdatasync() is a no-op; point
 *    --dir at a real block-device filesystem to get D-state waits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ---- tunables ----------------------------------------------------------- */
#define NSEC_PER_SEC     1000000000ull
#define NSEC_PER_MSEC    1000000ull
#define NSEC_PER_USEC    1000ull

#define WORKER_WORK_US   30      /* CPU per request                        */
#define COMPUTE_WORK_US  2000    /* CPU per compute-pool round per member  */
#define COMPUTE_SLEEP_NS (3 * NSEC_PER_MSEC)   /* pool sleep after barrier */
#define TIMER_PERIOD_NS  (100 * NSEC_PER_MSEC)
#define TIMER_WORK_US    5
#define RESYNC_NS        (10 * NSEC_PER_MSEC)  /* max lag before skipping ticks */

#define REQ_CAP          4096    /* request queue capacity (drops if full) */
#define LOG_CAP          8192    /* log record queue capacity              */
#define LOG_BATCH        8       /* records per write()/hand-off to syncer */
#define LOG_LINE_MAX     128
#define LOG_WRAP_BYTES   (64u << 20)

#define MAX_THREADS_PER_ROLE 256
#define NAME_MAX_LEN     16      /* incl. NUL, kernel TASK_COMM_LEN */

/* ---- configuration ------------------------------------------------------ */
struct config {
	double duration;         /* seconds, 0 = until signal */
	long rate;               /* requests per second */
	int workers;
	int compute;
	int idle;
	const char *dir;
	const char *stats;       /* latency histogram file, NULL = none */
};
static struct config cfg = { 0.0, 1000, 4, 2, 2, "/tmp", NULL };

/* ---- global state ------------------------------------------------------- */
static atomic_int g_stop;                  /* set by main at shutdown */
static atomic_ullong g_sink;               /* keeps busy loops alive */

static atomic_ullong n_requests, n_req_dropped, n_log_dropped;
static atomic_ullong n_batches, n_syncs, n_compute_rounds;

static uint64_t iters_worker, iters_compute, iters_timer;   /* calibrated */

/* request latency histogram (--stats): 8 log-linear buckets per octave */
#define LAT_SUB_BITS     3
#define LAT_BUCKETS      (64 << LAT_SUB_BITS)
static atomic_ullong lat_hist[LAT_BUCKETS];

static int lat_bucket(uint64_t ns)
{
	if (ns < (1u << LAT_SUB_BITS))
		return (int)ns;
	int msb = 63 - __builtin_clzll(ns);
	int sub = (int)((ns >> (msb - LAT_SUB_BITS)) & ((1u << LAT_SUB_BITS) - 1));
	return ((msb - LAT_SUB_BITS + 1) << LAT_SUB_BITS) + sub;
}

static uint64_t now_ns(clockid_t clk);

static void write_stats(void)
{
	char tmp[4096 + 8];
	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", cfg.stats) >= sizeof tmp)
		return;
	FILE *f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "time_ns %llu\n", (unsigned long long)now_ns(CLOCK_MONOTONIC));
	fprintf(f, "requests %llu\n", (unsigned long long)atomic_load(&n_requests));
	for (int b = 0; b < LAT_BUCKETS; b++) {
		unsigned long long c = atomic_load_explicit(&lat_hist[b], memory_order_relaxed);
		if (c)
			fprintf(f, "%d %llu\n", b, c);
	}
	if (fclose(f) == 0)
		rename(tmp, cfg.stats);
	else
		unlink(tmp);
}

/* start-up: registration + go gate */
static pthread_mutex_t reg_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cond = PTHREAD_COND_INITIALIZER;
static int registered;
static pthread_mutex_t gate_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;

/* acceptor -> workers */
struct request { uint64_t id; uint64_t t_enq; };
static struct {
	pthread_mutex_t mtx;
	pthread_cond_t cond;
	struct request ring[REQ_CAP];
	uint64_t head, tail;             /* count = tail - head */
} reqq = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {{0, 0}}, 0, 0 };

/* workers -> logger */
struct logrec { uint64_t req_id, latency_ns, sum; int worker; };
static struct {
	pthread_mutex_t mtx;
	pthread_cond_t cond;
	struct logrec ring[LOG_CAP];
	uint64_t head, tail;
	int stop;                        /* set by main after workers joined */
} logq = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {{0, 0, 0, 0}}, 0, 0, 0 };

/* logger -> syncer */
static struct {
	pthread_mutex_t mtx;
	pthread_cond_t cond;
	uint64_t pending;                /* batches written but not yet synced */
	int stop;                        /* set by main after logger joined */
} syncq = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

/* idle threads */
static pthread_mutex_t idle_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;

/* compute pool */
static pthread_barrier_t pool_barrier;
/* (round << 1) | stop: the stop decision for the most recent round, made
 * by whichever member passes the barrier first, so all members agree. */
static _Atomic uint64_t pool_decision;

/* log file */
static int log_fd = -1;
static char log_path[4096];
static uint64_t log_off;

/* thread table */
enum role { R_ACCEPTOR, R_WORKER, R_LOGGER, R_SYNCER, R_COMPUTE, R_TIMER, R_IDLE };
struct thr {
	pthread_t th;
	enum role role;
	int idx;
	char name[NAME_MAX_LEN];
	pid_t tid;                       /* written by the thread itself */
};
static struct thr *thr_tab;
static int thr_count;

/* ---- helpers ------------------------------------------------------------ */
static void die(const char *fmt, ...)
{
	va_list ap;
	fputs("workload: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (log_path[0])
		unlink(log_path);
	exit(1);
}

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Sleep until an absolute CLOCK_MONOTONIC time; robust to EINTR/stops. */
static void sleep_until(uint64_t abs_ns)
{
	struct timespec ts = { (time_t)(abs_ns / NSEC_PER_SEC), (long)(abs_ns % NSEC_PER_SEC) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static void sink(uint64_t v)
{
	atomic_fetch_add_explicit(&g_sink, v, memory_order_relaxed);
}

/* The unit of CPU work: an xorshift chain the compiler cannot fold. */
static uint64_t spin(uint64_t iters, uint64_t seed)
{
	uint64_t x = seed | 1, acc = 0;
	for (uint64_t i = 0; i < iters; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		acc += x * 0x9E3779B97F4A7C15ull;
	}
	return acc ^ x;
}

/* Measure spin() iterations per microsecond of thread CPU time (best of 5). */
static void calibrate(void)
{
	uint64_t n = 1000, t;
	for (;;) {                       /* find a run length of >= 4 ms */
		t = now_ns(CLOCK_THREAD_CPUTIME_ID);
		sink(spin(n, n));
		t = now_ns(CLOCK_THREAD_CPUTIME_ID) - t;
		if (t >= 4 * NSEC_PER_MSEC || n >= (1ull << 40))
			break;
		n *= 2;
	}
	double best = 0.0;
	for (int rep = 0; rep < 5; rep++) {
		t = now_ns(CLOCK_THREAD_CPUTIME_ID);
		sink(spin(n, (uint64_t)rep + 7));
		t = now_ns(CLOCK_THREAD_CPUTIME_ID) - t;
		if (t == 0)
			t = 1;
		double per_us = (double)n * 1000.0 / (double)t;
		if (per_us > best)
			best = per_us;
	}
	iters_worker = (uint64_t)(best * WORKER_WORK_US) + 1;
	iters_compute = (uint64_t)(best * COMPUTE_WORK_US) + 1;
	iters_timer = (uint64_t)(best * TIMER_WORK_US) + 1;
}

/* First thing every thread does: name itself, record its tid, register. */
static void thread_start(struct thr *t)
{
	int err = pthread_setname_np(pthread_self(), t->name);
	if (err)
		fprintf(stderr, "workload: pthread_setname_np(%s): %s\n", t->name, strerror(err));
	t->tid = my_tid();
	pthread_mutex_lock(&reg_mtx);
	registered++;
	pthread_cond_signal(&reg_cond);
	pthread_mutex_unlock(&reg_mtx);
}

/* Active threads do no work until main has seen everybody registered. */
static void wait_gate(void)
{
	pthread_mutex_lock(&gate_mtx);
	while (!gate_open)
		pthread_cond_wait(&gate_cond, &gate_mtx);
	pthread_mutex_unlock(&gate_mtx);
}

static int stopping(void)
{
	return atomic_load_explicit(&g_stop, memory_order_acquire);
}

/* ---- wl-acceptor -------------------------------------------------------- */
static void *acceptor_main(void *arg)
{
	struct thr *t = arg;
	thread_start(t);
	wait_gate();

	const uint64_t period = NSEC_PER_SEC / (uint64_t)cfg.rate;
	uint64_t next = now_ns(CLOCK_MONOTONIC) + period, id = 0;
	while (!stopping()) {
		sleep_until(next);
		if (stopping())
			break;
		uint64_t now = now_ns(CLOCK_MONOTONIC);

		pthread_mutex_lock(&reqq.mtx);
		if (reqq.tail - reqq.head < REQ_CAP) {
			struct request *r = &reqq.ring[reqq.tail % REQ_CAP];
			r->id = id++;
			r->t_enq = now;
			reqq.tail++;
		} else {
			atomic_fetch_add(&n_req_dropped, 1);
		}
		pthread_mutex_unlock(&reqq.mtx);
		pthread_cond_signal(&reqq.cond);         /* wake ONE idle worker */

		next += period;
		if (now > next + RESYNC_NS)      /* stopped/starved: skip missed ticks */
			next = now + period;
	}
	return NULL;
}

/* ---- wl-worker-<i> ------------------------------------------------------ */
static void *worker_main(void *arg)
{
	struct thr *t = arg;
	thread_start(t);
	wait_gate();

	for (;;) {
		pthread_mutex_lock(&reqq.mtx);
		while (reqq.tail == reqq.head && !stopping())
			pthread_cond_wait(&reqq.cond, &reqq.mtx);
		if (stopping()) {
			pthread_mutex_unlock(&reqq.mtx);
			break;
		}
		struct request r = reqq.ring[reqq.head % REQ_CAP];
		reqq.head++;
		pthread_mutex_unlock(&reqq.mtx);

		uint64_t sum = spin(iters_worker, r.id);   /* ~30 us of CPU */
		uint64_t lat = now_ns(CLOCK_MONOTONIC) - r.t_enq;
		atomic_fetch_add_explicit(&lat_hist[lat_bucket(lat)], 1, memory_order_relaxed);
		atomic_fetch_add(&n_requests, 1);

		pthread_mutex_lock(&logq.mtx);
		if (logq.tail - logq.head < LOG_CAP) {
			struct logrec *l = &logq.ring[logq.tail % LOG_CAP];
			l->req_id = r.id;
			l->latency_ns = lat;
			l->sum = sum;
			l->worker = t->idx;
			logq.tail++;
		} else {
			atomic_fetch_add(&n_log_dropped, 1);
		}
		pthread_mutex_unlock(&logq.mtx);
		pthread_cond_signal(&logq.cond);         /* worker -> logger */
	}
	return NULL;
}

/* ---- wl-logger ---------------------------------------------------------- */
static void write_all(const char *buf, size_t len)
{
	static int warned;
	if (log_off + len > LOG_WRAP_BYTES) {    /* bound disk usage */
		if (lseek(log_fd, 0, SEEK_SET) == 0)
			log_off = 0;
	}
	while (len > 0) {
		ssize_t n = write(log_fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (!warned++)
				fprintf(stderr, "workload: write: %s\n", strerror(errno));
			return;
		}
		buf += n;
		len -= (size_t)n;
		log_off += (uint64_t)n;
	}
}

static void flush_batch(char *buf, size_t *len, int *nrec)
{
	write_all(buf, *len);
	*len = 0;
	*nrec = 0;
	atomic_fetch_add(&n_batches, 1);

	pthread_mutex_lock(&syncq.mtx);
	syncq.pending++;
	pthread_mutex_unlock(&syncq.mtx);
	pthread_cond_signal(&syncq.cond);        /* logger -> syncer */
}

static void *logger_main(void *arg)
{
	struct thr *t = arg;
	thread_start(t);
	wait_gate();

	static char buf[LOG_BATCH * LOG_LINE_MAX];
	struct logrec local[64];
	size_t len = 0;
	int nrec = 0;

	for (;;) {
		pthread_mutex_lock(&logq.mtx);
		while (logq.tail == logq.head && !logq.stop)
			pthread_cond_wait(&logq.cond, &logq.mtx);
		int n = 0;
		while (logq.head != logq.tail && n < (int)(sizeof local / sizeof local[0]))
			local[n++] = logq.ring[logq.head++ % LOG_CAP];
		int done = logq.stop && logq.head == logq.tail;
		pthread_mutex_unlock(&logq.mtx);

		for (int i = 0; i < n; i++) {
			int w = snprintf(buf + len, LOG_LINE_MAX,
			                 "req=%" PRIu64 " worker=%d lat_ns=%" PRIu64 " sum=%016" PRIx64 "\n",
			                 local[i].req_id, local[i].worker,
			                 local[i].latency_ns, local[i].sum);
			if (w > 0)
				len += (size_t)(w < LOG_LINE_MAX ? w : LOG_LINE_MAX - 1);
			if (++nrec >= LOG_BATCH)
				flush_batch(buf, &len, &nrec);
		}
		if (done) {
			if (nrec > 0)
				flush_batch(buf, &len, &nrec);
			break;
		}
	}
	return NULL;
}

/* ---- wl-syncer ---------------------------------------------------------- */
static void *syncer_main(void *arg)
{
	struct thr *t = arg;
	thread_start(t);
	wait_gate();

	int warned = 0;
	for (;;) {
		pthread_mutex_lock(&syncq.mtx);
		while (syncq.pending == 0 && !syncq.stop)
			pthread_cond_wait(&syncq.cond, &syncq.mtx);
		if (syncq.pending == 0) {        /* stop requested, nothing left */
			pthread_mutex_unlock(&syncq.mtx);
			break;
		}
		syncq.pending = 0;               /* group commit */
		pthread_mutex_unlock(&syncq.mtx);

		if (fdatasync(log_fd) != 0 && !warned++)
			fprintf(stderr, "workload: fdatasync: %s\n", strerror(errno));
		atomic_fetch_add(&n_syncs, 1);
	}
	return NULL;
}

/* ---- wl-compute-<i> ----------------------------------------------------- */
/* Agree on "stop after this round": the first member past the barrier of
 * round r samples g_stop and publishes it; the others adopt that value.  No
 * member can reach round r+1's decision before all have made round r's,
 * because they all must pass the next barrier first. */
static int pool_decide(uint64_t round)
{
	uint64_t cur = atomic_load(&pool_decision);
	if ((cur >> 1) != round) {
		uint64_t want = (round << 1) | (stopping() ? 1u : 0u);
		if (atomic_compare_exchange_strong(&pool_decision, &cur, want)) {
			atomic_fetch_add(&n_compute_rounds, 1);
			return (int)(want & 1);
		}
		/* lost the race: cur now holds the winner's decision */
	}
	return (int)(cur & 1);
}

static void *compute_main(void *arg)
{
	struct thr *t = arg;
	thread_start(t);
	wait_gate();

	uint64_t round = 0, acc = (uint64_t)t->idx;
	for (;;) {
		acc += spin(iters_compute, acc + round);    /* ~2 ms of CPU */
		pthread_barrier_wait(&pool_barrier);        /* join */
		if (pool_decide(++round))
			break;
		sleep_until(now_ns(CLOCK_MONOTONIC) + COMPUTE_SLEEP_NS);
	}
	sink(acc);
	return NULL;
}

/* ---- wl-timer ----------------------------------------------------------- */
static void *timer_main(void *arg)
{
	struct thr *t = arg;
	thread_start(t);
	wait_gate();

	uint64_t next = now_ns(CLOCK_MONOTONIC) + TIMER_PERIOD_NS, last_req = 0;
	while (!stopping()) {
		sleep_until(next);
		next += TIMER_PERIOD_NS;
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		if (now > next)                  /* after a stop: don't burst */
			next = now + TIMER_PERIOD_NS;
		/* housekeeping: look at the counters, a few us of arithmetic */
		uint64_t req = atomic_load(&n_requests);
		sink(spin(iters_timer, req - last_req));
		last_req = req;
		if (cfg.stats)
			write_stats();
	}
	return NULL;
}

/* ---- wl-idle-<i> -------------------------------------------------------- */
static void *idle_main(void *arg)
{
	struct thr *t = arg;
	/* Register while holding idle_mtx: once main can take idle_mtx after
	 * everyone registered, every idle thread is inside pthread_cond_wait. */
	pthread_mutex_lock(&idle_mtx);
	thread_start(t);
	while (!stopping())
		pthread_cond_wait(&idle_cond, &idle_mtx);
	pthread_mutex_unlock(&idle_mtx);
	return NULL;
}

/* ---- command line ------------------------------------------------------- */
static void usage(FILE *f)
{
	fprintf(f,
	        "usage: workload [--duration SEC] [--rate N] [--workers N] [--compute N]\n"
	        "                [--idle N] [--dir DIR] [--stats FILE]\n"
	        "  --duration SEC  run time in seconds, fractions allowed; 0 = until\n"
	        "                  SIGTERM/SIGINT (default 0)\n"
	        "  --rate N        requests per second, 1..100000 (default 1000)\n"
	        "  --workers N     worker threads, 1..%d (default 4)\n"
	        "  --compute N     compute pool threads, 0..%d (default 2)\n"
	        "  --idle N        idle threads, 0..%d (default 2)\n"
	        "  --dir DIR       directory for the temporary log file (default /tmp);\n"
	        "                  must not be tmpfs if fdatasync should block\n"
	        "  --stats FILE    keep a request latency histogram in FILE, rewritten\n"
	        "                  every 100 ms (scripts/demo-bench.sh reads it)\n",
	        MAX_THREADS_PER_ROLE, MAX_THREADS_PER_ROLE, MAX_THREADS_PER_ROLE);
}

static void usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("workload: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage(stderr);
	exit(2);
}

static long parse_long(const char *opt, const char *s, long min, long max)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno == ERANGE)
		usage_error("%s: '%s' is not an integer", opt, s);
	if (v < min || v > max)
		usage_error("%s: %ld out of range %ld..%ld", opt, v, min, max);
	return v;
}

static double parse_duration(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (*s == '\0' || *end != '\0' || errno == ERANGE)
		usage_error("--duration: '%s' is not a number", s);
	if (!(v >= 0.0 && v <= 1e7))     /* also rejects NaN */
		usage_error("--duration: %s out of range 0..10000000", s);
	return v;
}

static void parse_args(int argc, char **argv)
{
	static const char *const opts[] = {
		"--duration", "--rate", "--workers", "--compute", "--idle", "--dir",
		"--stats",
	};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		}
		int which = -1;
		const char *val = NULL;
		for (int k = 0; k < (int)(sizeof opts / sizeof opts[0]); k++) {
			size_t n = strlen(opts[k]);
			if (strncmp(a, opts[k], n) == 0 && (a[n] == '\0' || a[n] == '=')) {
				which = k;
				if (a[n] == '=')
					val = a + n + 1;
				break;
			}
		}
		if (which < 0)
			usage_error("unknown argument '%s'", a);
		if (!val) {
			if (i + 1 >= argc)
				usage_error("%s needs a value", opts[which]);
			val = argv[++i];
		}
		switch (which) {
		case 0: cfg.duration = parse_duration(val); break;
		case 1: cfg.rate = parse_long("--rate", val, 1, 100000); break;
		case 2: cfg.workers = (int)parse_long("--workers", val, 1, MAX_THREADS_PER_ROLE); break;
		case 3: cfg.compute = (int)parse_long("--compute", val, 0, MAX_THREADS_PER_ROLE); break;
		case 4: cfg.idle = (int)parse_long("--idle", val, 0, MAX_THREADS_PER_ROLE); break;
		case 5:
			if (val[0] == '\0')
				usage_error("--dir: empty path");
			struct stat st;
			if (stat(val, &st) != 0)
				usage_error("--dir: '%s': %s", val, strerror(errno));
			if (!S_ISDIR(st.st_mode))
				usage_error("--dir: '%s' is not a directory", val);
			cfg.dir = val;
			break;
		case 6:
			if (val[0] == '\0' || strlen(val) > 4096)
				usage_error("--stats: empty or too long path");
			cfg.stats = val;
			break;
		}
	}
}

/* ---- main --------------------------------------------------------------- */
static void add_thread(enum role role, int idx, const char *fmt)
{
	struct thr *t = &thr_tab[thr_count++];
	char tmp[64];
	int n = snprintf(tmp, sizeof tmp, fmt, idx);
	if (n < 0 || n >= NAME_MAX_LEN)              /* kernel comm is 15 chars */
		die("thread name '%s' too long", tmp);
	t->role = role;
	t->idx = idx;
	memcpy(t->name, tmp, (size_t)n + 1);
}

static void *(*const role_fn[])(void *) = {
	[R_ACCEPTOR] = acceptor_main, [R_WORKER] = worker_main,
	[R_LOGGER] = logger_main,     [R_SYNCER] = syncer_main,
	[R_COMPUTE] = compute_main,   [R_TIMER] = timer_main,
	[R_IDLE] = idle_main,
};

static void broadcast(pthread_mutex_t *m, pthread_cond_t *c)
{
	pthread_mutex_lock(m);
	pthread_cond_broadcast(c);
	pthread_mutex_unlock(m);
}

static void join_role(enum role role)
{
	for (int i = 0; i < thr_count; i++)
		if (thr_tab[i].role == role)
			pthread_join(thr_tab[i].th, NULL);
}

/* Wait for SIGTERM/SIGINT (already blocked) or the end of --duration. */
static void wait_for_end(const sigset_t *set)
{
	uint64_t deadline = 0;
	if (cfg.duration > 0)
		deadline = now_ns(CLOCK_MONOTONIC) + (uint64_t)(cfg.duration * (double)NSEC_PER_SEC);
	for (;;) {
		int r;
		if (deadline) {
			uint64_t now = now_ns(CLOCK_MONOTONIC);
			if (now >= deadline)
				return;
			uint64_t left = deadline - now;
			struct timespec ts = { (time_t)(left / NSEC_PER_SEC), (long)(left % NSEC_PER_SEC) };
			r = sigtimedwait(set, NULL, &ts);
		} else {
			r = sigtimedwait(set, NULL, NULL);
		}
		if (r > 0)
			return;                  /* SIGTERM or SIGINT */
		/* EAGAIN: timeout (re-checked above); EINTR: e.g. SIGSTOP/SIGCONT */
	}
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	prctl(PR_SET_NAME, "wl-main", 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);

	/* Block the shutdown signals before any thread exists, so every thread
	 * inherits the mask and only main receives them (via sigtimedwait). */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	calibrate();

	if ((size_t)snprintf(log_path, sizeof log_path, "%s/wl-log-XXXXXX", cfg.dir) >= sizeof log_path)
		usage_error("--dir: path too long");
	log_fd = mkstemp(log_path);
	if (log_fd < 0) {
		int e = errno;
		log_path[0] = '\0';
		die("cannot create log file in '%s': %s", cfg.dir, strerror(e));
	}

	if (cfg.compute > 0) {
		int err = pthread_barrier_init(&pool_barrier, NULL, (unsigned)cfg.compute);
		if (err)
			die("pthread_barrier_init: %s", strerror(err));
	}

	int total = 4 + cfg.workers + cfg.compute + cfg.idle;
	thr_tab = calloc((size_t)total, sizeof *thr_tab);
	if (!thr_tab)
		die("out of memory");
	add_thread(R_ACCEPTOR, 0, "wl-acceptor");
	for (int i = 0; i < cfg.workers; i++)
		add_thread(R_WORKER, i, "wl-worker-%d");
	add_thread(R_LOGGER, 0, "wl-logger");
	add_thread(R_SYNCER, 0, "wl-syncer");
	for (int i = 0; i < cfg.compute; i++)
		add_thread(R_COMPUTE, i, "wl-compute-%d");
	add_thread(R_TIMER, 0, "wl-timer");
	for (int i = 0; i < cfg.idle; i++)
		add_thread(R_IDLE, i, "wl-idle-%d");

	for (int i = 0; i < thr_count; i++) {
		int err = pthread_create(&thr_tab[i].th, NULL, role_fn[thr_tab[i].role], &thr_tab[i]);
		if (err)
			die("pthread_create(%s): %s", thr_tab[i].name, strerror(err));
	}

	/* Wait until every thread has named itself and recorded its tid. */
	pthread_mutex_lock(&reg_mtx);
	while (registered < thr_count)
		pthread_cond_wait(&reg_cond, &reg_mtx);
	pthread_mutex_unlock(&reg_mtx);
	/* Idle threads registered holding idle_mtx: taking it proves they are
	 * all blocked in pthread_cond_wait now. */
	pthread_mutex_lock(&idle_mtx);
	pthread_mutex_unlock(&idle_mtx);

	/* Start the active threads, then announce. */
	pthread_mutex_lock(&gate_mtx);
	gate_open = 1;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_mtx);

	printf("thread %d wl-main\n", (int)my_tid());
	for (int i = 0; i < thr_count; i++)
		printf("thread %d %s\n", (int)thr_tab[i].tid, thr_tab[i].name);
	printf("ready\n");
	fflush(stdout);

	wait_for_end(&set);

	/* Stage 1: everything but the logging chain.  Flag first, then
	 * broadcast under each mutex, so no waiter can miss the wakeup. */
	atomic_store_explicit(&g_stop, 1, memory_order_release);
	broadcast(&reqq.mtx, &reqq.cond);
	broadcast(&idle_mtx, &idle_cond);
	broadcast(&logq.mtx, &logq.cond);
	broadcast(&syncq.mtx, &syncq.cond);
	join_role(R_ACCEPTOR);
	join_role(R_WORKER);
	join_role(R_COMPUTE);            /* they notice at the next barrier */
	join_role(R_TIMER);
	join_role(R_IDLE);

	/* Stage 2: logger writes what the workers handed over, then exits. */
	pthread_mutex_lock(&logq.mtx);
	logq.stop = 1;
	pthread_cond_broadcast(&logq.cond);
	pthread_mutex_unlock(&logq.mtx);
	join_role(R_LOGGER);

	/* Stage 3: syncer syncs the last batches, then exits. */
	pthread_mutex_lock(&syncq.mtx);
	syncq.stop = 1;
	pthread_cond_broadcast(&syncq.cond);
	pthread_mutex_unlock(&syncq.mtx);
	join_role(R_SYNCER);

	close(log_fd);
	unlink(log_path);
	if (cfg.compute > 0)
		pthread_barrier_destroy(&pool_barrier);

	printf("done requests=%llu batches=%llu syncs=%llu compute_iters=%llu\n",
	       (unsigned long long)atomic_load(&n_requests),
	       (unsigned long long)atomic_load(&n_batches),
	       (unsigned long long)atomic_load(&n_syncs),
	       (unsigned long long)atomic_load(&n_compute_rounds));
	fflush(stdout);
	free(thr_tab);
	return 0;
}
