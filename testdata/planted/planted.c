/*
 * planted.c - the target of the planted-effect benchmark
 * (refine/planted): four named thread groups, two threads each, that sleep.
 * The benchmark (bench/main.go) never times these threads; it reads the
 * scheduling state the backend put them in from /proc, so the threads
 * only need to exist, keep their names and use no CPU that could disturb
 * the machine the harness shares.
 *
 * Build (warning-free):
 *     gcc -O2 -Wall -Wextra -pthread -o planted planted.c
 *
 * Threads (comm):
 *   planted      the main thread, which no group of planted.toml matches:
 *                its slice is the kernel's default, the benchmark's
 *                reference
 *   lat-0, lat-1 group "alpha"   (latency, slice_us): the planted parameter
 *   wgt-0, wgt-1 group "bravo"   (latency, weight → nice)
 *   bat-0, bat-1 group "charlie" (batch → SCHED_BATCH)
 *   yld-0, yld-1 group "delta"   (yield → SCHED_IDLE)
 *
 * stdout: "thread <tid> <name>" per thread, main first, then "ready" once
 * every thread has named itself. SIGTERM or SIGINT ends it (exit 0).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PER_GROUP 2

static const char *const prefixes[] = { "lat", "wgt", "bat", "yld" };
#define GROUPS (sizeof prefixes / sizeof prefixes[0])

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t named = PTHREAD_COND_INITIALIZER;
static unsigned registered;

struct slot {
	char name[16];
};

static void *sleeper(void *arg)
{
	struct slot *s = arg;
	pthread_setname_np(pthread_self(), s->name);
	pthread_mutex_lock(&mu);
	printf("thread %ld %s\n", (long)syscall(SYS_gettid), s->name);
	registered++;
	pthread_cond_signal(&named);
	pthread_mutex_unlock(&mu);
	for (;;) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
			;
	}
	return NULL;
}

int main(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	/* blocked before the first thread starts, so every thread inherits it
	 * and the signal goes to sigwait below */
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) {
		fprintf(stderr, "planted: sigmask\n");
		return 1;
	}
	prctl(PR_SET_NAME, "planted", 0, 0, 0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("thread %ld planted\n", (long)getpid());

	static struct slot slots[GROUPS * PER_GROUP];
	for (unsigned g = 0; g < GROUPS; g++) {
		for (unsigned i = 0; i < PER_GROUP; i++) {
			struct slot *s = &slots[g * PER_GROUP + i];
			snprintf(s->name, sizeof s->name, "%s-%u", prefixes[g], i);
			pthread_t t;
			int err = pthread_create(&t, NULL, sleeper, s);
			if (err != 0) {
				fprintf(stderr, "planted: pthread_create: %s\n", strerror(err));
				return 1;
			}
			pthread_detach(t);
		}
	}
	pthread_mutex_lock(&mu);
	while (registered < GROUPS * PER_GROUP)
		pthread_cond_wait(&named, &mu);
	printf("ready\n");
	pthread_mutex_unlock(&mu);

	int sig;
	while (sigwait(&set, &sig) != 0)
		;
	return 0;
}
