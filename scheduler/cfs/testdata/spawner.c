/* spawner: a process that creates threads on demand, for tests of how a
 * scheduler backend treats threads that appear after it was applied.
 *
 * The main thread names itself sp-main, prints "ready", then takes signals
 * with sigwait: each SIGUSR1 creates a thread that prints "thread <tid>"
 * at once (still carrying its creator's name, as a new thread does), then
 * after --rename-ms renames itself sp-late-<n> and prints
 * "renamed <tid> sp-late-<n>", then sleeps until SIGTERM or SIGINT, when the
 * process exits 0. Output is line-buffered on stdout.
 *
 * Build: gcc -O2 -Wall -pthread -o spawner spawner.c
 * Usage: spawner [--rename-ms N]   (default 300)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long rename_ms = 300;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *fmt, long a, int b) {
	pthread_mutex_lock(&out_mu);
	printf(fmt, a, b);
	fflush(stdout);
	pthread_mutex_unlock(&out_mu);
}

static void *late(void *arg) {
	int n = (int)(long)arg;
	long tid = syscall(SYS_gettid);
	say("thread %ld %d\n", tid, n);
	struct timespec ts = {rename_ms / 1000, (rename_ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0) {
	}
	char name[16];
	snprintf(name, sizeof name, "sp-late-%d", n);
	pthread_setname_np(pthread_self(), name);
	say("renamed %ld %d\n", tid, n);
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--rename-ms") == 0)
		rename_ms = atol(argv[2]);
	else if (argc != 1) {
		fprintf(stderr, "usage: spawner [--rename-ms N]\n");
		return 2;
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* inherited by every thread */
	pthread_setname_np(pthread_self(), "sp-main");
	say("ready %ld %d\n", (long)getpid(), 0);
	for (int n = 0;; n++) {
		int sig;
		if (sigwait(&set, &sig) != 0)
			return 1;
		if (sig != SIGUSR1)
			return 0;
		pthread_t t;
		if (pthread_create(&t, NULL, late, (void *)(long)n) != 0) {
			perror("pthread_create");
			return 1;
		}
		pthread_detach(t);
	}
}
