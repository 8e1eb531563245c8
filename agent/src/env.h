/* Netloom agents (the MPI agent and the NCCL plugin): settings read from the
 * environment, the job's id, clocks, deadlines and the agents' own threads. MPI-free; start-up and reporting
 * threads only. */
#ifndef NL_ENV_H
#define NL_ENV_H

#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* nl_env_copy copies $a, else $b (when b), else "" into dst. */
static inline void nl_env_copy(char *dst, size_t n, const char *a, const char *b)
{
	const char *v = getenv(a);
	if ((!v || !*v) && b)
		v = getenv(b);
	snprintf(dst, n, "%s", v && *v ? v : "");
}

/* nl_env_double reads a number > 0, else def. */
static inline double nl_env_double(const char *name, double def)
{
	const char *v = getenv(name);
	char *end;
	if (!v || !*v)
		return def;
	double d = strtod(v, &end);
	return end != v && d > 0 ? d : def;
}

/* nl_env_count reads a count >= 0 (0 is a valid setting, unlike for
 * nl_env_double) up to 2^30, else def. */
static inline int nl_env_count(const char *name, int def)
{
	const char *v = getenv(name);
	char *end;
	if (!v || !*v)
		return def;
	long n = strtol(v, &end, 10);
	return end != v && !*end && n >= 0 && n <= 1 << 30 ? (int)n : def;
}

/* nl_env_debug: NETLOOM_DEBUG is set and not "0" (messages on stderr, each
 * said once). */
static inline int nl_env_debug(void)
{
	const char *v = getenv("NETLOOM_DEBUG");
	return v && *v && strcmp(v, "0") != 0;
}

/* nl_job_id_finish ends a job id: when none was found, one made from the
 * host and the parent process (the ranks one launcher starts on a host
 * share it); then every character that cannot be in a folder's name
 * replaced by '_' (it names the profile's folder). */
static inline void nl_job_id_finish(char *out, size_t n)
{
	if (!*out) {
		char host[64];
		gethostname(host, sizeof host);
		host[sizeof host - 1] = 0;
		host[strcspn(host, ".")] = 0;
		snprintf(out, n, "%s-%d", host, (int)getppid());
	}
	for (char *p = out; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == '_'))
			*p = '_';
}

/* nl_node_program_user fills the node's name (NETLOOM_NODE, else
 * SLURMD_NODENAME, else host), the program's (the last part of
 * /proc/self/exe) and the user's. */
static inline void nl_node_program_user(char *node, size_t nn, const char *host, char *program, size_t pn, char *user, size_t un)
{
	nl_env_copy(node, nn, "NETLOOM_NODE", "SLURMD_NODENAME");
	if (!*node)
		snprintf(node, nn, "%s", host);
	char exe[256];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[len > 0 ? len : 0] = 0;
	const char *base = strrchr(exe, '/');
	snprintf(program, pn, "%s", base ? base + 1 : exe);
	struct passwd *pw = getpwuid(getuid());
	snprintf(user, un, "%s", pw ? pw->pw_name : "");
}

/* nl_mono_ns and nl_unix_ns: CLOCK_MONOTONIC and CLOCK_REALTIME in ns. */
static inline uint64_t nl_mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline int64_t nl_unix_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* nl_cond_monotonic initializes c for deadlines on CLOCK_MONOTONIC. */
static inline void nl_cond_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

/* nl_thread starts fn on a thread of the agent's, which takes no signal
 * meant for the application (all blocked), detached or not; 0 on success,
 * as pthread_create. */
static inline int nl_thread(pthread_t *t, int detached, void *(*fn)(void *))
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	if (detached)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(t, &attr, fn, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return rc;
}

/* nl_timespec_add adds ns to t. */
static inline void nl_timespec_add(struct timespec *t, uint64_t ns)
{
	t->tv_sec += (time_t)(ns / 1000000000u);
	t->tv_nsec += (long)(ns % 1000000000u);
	if (t->tv_nsec >= 1000000000) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000;
	}
}

#endif
