/* Netloom agent: MUNGE-authenticated datagrams (docs/agent-auth.md).
 *
 * A signer thread of its own asks munged for a credential whose payload is
 * "netloom1", a fresh random 32-byte session key and the job id, and asks
 * again every NETLOOM_MUNGE_REFRESH seconds (60) with a new key; each is
 * valid for 300 s (twice the refresh when that is longer). The helper
 * thread puts the current credential in every datagram and appends an
 * HMAC-SHA256 under the key of everything before it. The daemon has munged
 * decode each credential once (munged vouches for this process's uid) and
 * checks the HMAC of each datagram.
 *
 * libmunge and libcrypto are loaded with dlopen: both optional. Without
 * them, with NETLOOM_MUNGE=0, or while munged does not answer, datagrams go
 * unauthenticated as before (NETLOOM_DEBUG=1 says why, once).
 *
 * munge_encode is a round trip to munged that libmunge bounds only by its
 * own timeouts (2 s per attempt, up to 5 attempts); it runs on the signer
 * thread alone, so neither the application nor the helper ever waits for
 * it, and the final report does not join it. Nothing here knows MPI or
 * NCCL (auth.h): the MPI agent and the NCCL plugin both use it, passing the
 * job id and rank in at nl_auth_start. */

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

#include "auth.h"
#include "env.h"

#define KEY_LEN 32
#define MAC_LEN 32
#define MAGIC "netloom1"
/* munge.h's munge_opt_t (libmunge.so.2's ABI) */
#define MUNGE_OPT_TTL 4
#define MUNGE_OPT_SOCKET 8
#define MUNGE_OPT_UID_RESTRICTION 9
#define CRED_TTL 300 /* seconds, at least twice the refresh; the daemon forgets a session when it expires */

/* libmunge and libcrypto entry points, declared here so that building the
 * agent needs neither library's headers. */
typedef int (*munge_encode_fn)(char **cred, void *ctx, const void *buf, int len);
typedef void *(*munge_ctx_create_fn)(void);
typedef int (*munge_ctx_set_fn)(void *ctx, int opt, ...);
typedef void (*munge_ctx_destroy_fn)(void *ctx);
typedef const char *(*munge_strerror_fn)(int e);
typedef const void *(*evp_md_fn)(void);
typedef unsigned char *(*hmac_fn)(const void *md, const void *key, int key_len, const unsigned char *d, size_t n,
                                  unsigned char *out, unsigned int *out_len);

static struct {
	pthread_mutex_t lock; /* guards everything below it */
	int tried, on, quit, first_done;
	pthread_cond_t wake;  /* signer: quit; finalize: first credential */
	char *cred;           /* current credential (malloc'ed by libmunge), or NULL */
	size_t cred_len;
	uint8_t key[KEY_LEN];
	double refresh_s;
	char socket[1024];
	int debug;
	int restrict_uid; /* NETLOOM_MUNGE_UID given: only that uid may decode */
	uid_t decoder;
	char job_id[128]; /* the credentials' job id, from nl_auth_start */
	int rank;         /* for NETLOOM_DEBUG's messages */

	munge_encode_fn encode;
	munge_ctx_create_fn ctx_create;
	munge_ctx_set_fn ctx_set;
	munge_ctx_destroy_fn ctx_destroy;
	munge_strerror_fn strerror;
	evp_md_fn sha256;
	hmac_fn hmac;
} au = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void say(const char *why)
{
	if (au.debug)
		fprintf(stderr, "netloom: rank %d: datagrams unauthenticated: %s\n", au.rank, why);
}

static void *sym(void *lib, const char *name)
{
	return lib ? dlsym(lib, name) : NULL;
}

/* load finds libmunge and libcrypto. */
static int load(void)
{
	void *m = dlopen("libmunge.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!m) {
		say("libmunge.so.2 not found (Debian: libmunge2)");
		return -1;
	}
	au.encode = (munge_encode_fn)sym(m, "munge_encode");
	au.ctx_create = (munge_ctx_create_fn)sym(m, "munge_ctx_create");
	au.ctx_set = (munge_ctx_set_fn)sym(m, "munge_ctx_set");
	au.ctx_destroy = (munge_ctx_destroy_fn)sym(m, "munge_ctx_destroy");
	au.strerror = (munge_strerror_fn)sym(m, "munge_strerror");
	void *c = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
	if (!c)
		c = dlopen("libcrypto.so.1.1", RTLD_NOW | RTLD_LOCAL);
	if (!c) {
		say("libcrypto.so.3 (or .so.1.1) not found, needed for HMAC-SHA256");
		return -1;
	}
	au.sha256 = (evp_md_fn)sym(c, "EVP_sha256");
	au.hmac = (hmac_fn)sym(c, "HMAC");
	if (!au.encode || !au.ctx_create || !au.ctx_set || !au.ctx_destroy || !au.strerror || !au.sha256 || !au.hmac) {
		say("libmunge or libcrypto lacks a function the agent needs");
		return -1;
	}
	return 0;
}

/* encode_once asks munged for a credential with a new key; 0 when it gave one. */
static int encode_once(void)
{
	uint8_t payload[sizeof MAGIC - 1 + KEY_LEN + sizeof au.job_id];
	uint8_t *key = payload + sizeof MAGIC - 1;
	size_t jl = strnlen(au.job_id, sizeof au.job_id);
	memcpy(payload, MAGIC, sizeof MAGIC - 1);
	if (getrandom(key, KEY_LEN, 0) != KEY_LEN) {
		say("getrandom failed");
		return -1;
	}
	memcpy(key + KEY_LEN, au.job_id, jl);
	void *ctx = au.ctx_create();
	char *cred = NULL;
	int e = ctx ? 0 : 5; /* EMUNGE_NO_MEMORY */
	if (!e && *au.socket)
		e = au.ctx_set(ctx, MUNGE_OPT_SOCKET, au.socket);
	if (!e)
		e = au.ctx_set(ctx, MUNGE_OPT_TTL, au.refresh_s * 2 > CRED_TTL ? (int)(au.refresh_s * 2 + 1) : CRED_TTL);
	/* Anyone who can decode the credential learns the session key: with
	 * NETLOOM_MUNGE_UID only the daemon's uid can. */
	if (!e && au.restrict_uid)
		e = au.ctx_set(ctx, MUNGE_OPT_UID_RESTRICTION, au.decoder);
	if (!e)
		e = au.encode(&cred, ctx, payload, (int)(sizeof MAGIC - 1 + KEY_LEN + jl));
	if (ctx)
		au.ctx_destroy(ctx);
	if (e || !cred) {
		pthread_mutex_lock(&au.lock);
		int first = !au.first_done;
		pthread_mutex_unlock(&au.lock);
		if (first) {
			char why[1400];
			snprintf(why, sizeof why, "munge_encode%s%s: %s", *au.socket ? " at " : "", au.socket, au.strerror(e));
			say(why);
		}
		explicit_bzero(payload, sizeof payload);
		free(cred);
		return -1;
	}
	pthread_mutex_lock(&au.lock);
	free(au.cred);
	au.cred = cred;
	au.cred_len = strlen(cred);
	memcpy(au.key, key, KEY_LEN);
	pthread_mutex_unlock(&au.lock);
	explicit_bzero(payload, sizeof payload);
	return 0;
}

static void *signer(void *arg)
{
	(void)arg;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&au.lock);
	while (!au.quit) {
		pthread_mutex_unlock(&au.lock);
		int ok = encode_once() == 0;
		pthread_mutex_lock(&au.lock);
		au.first_done = 1;
		pthread_cond_broadcast(&au.wake);
		/* a failure is tried again sooner, munged may just have started */
		double s = ok ? au.refresh_s : (au.refresh_s < 10 ? au.refresh_s : 10);
		clock_gettime(CLOCK_MONOTONIC, &next);
		uint64_t ns = (uint64_t)(s * 1e9);
		next.tv_sec += (time_t)(ns / 1000000000u);
		next.tv_nsec += (long)(ns % 1000000000u);
		if (next.tv_nsec >= 1000000000) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000;
		}
		while (!au.quit && pthread_cond_timedwait(&au.wake, &au.lock, &next) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&au.lock);
	return NULL;
}

void nl_auth_start(const char *job_id, int rank)
{
	pthread_mutex_lock(&au.lock);
	int tried = au.tried;
	au.tried = 1;
	pthread_mutex_unlock(&au.lock);
	if (tried)
		return;
	snprintf(au.job_id, sizeof au.job_id, "%s", job_id ? job_id : "");
	au.rank = rank;
	au.debug = nl_env_debug();
	const char *v = getenv("NETLOOM_MUNGE");
	if (v && strcmp(v, "0") == 0) {
		say("NETLOOM_MUNGE=0");
		return;
	}
	v = getenv("NETLOOM_MUNGE_SOCKET");
	snprintf(au.socket, sizeof au.socket, "%s", v ? v : "");
	if ((v = getenv("NETLOOM_MUNGE_UID")) && *v) {
		char *end;
		unsigned long u = strtoul(v, &end, 10);
		if (*end || u > 0xfffffffful) {
			say("NETLOOM_MUNGE_UID is not a uid");
			return;
		}
		au.restrict_uid = 1;
		au.decoder = (uid_t)u;
	}
	au.refresh_s = 60;
	/* munged caps a credential's TTL at its --max-ttl (3600 s by default) */
	if ((v = getenv("NETLOOM_MUNGE_REFRESH")) && atof(v) >= 0.1 && atof(v) <= 1800)
		au.refresh_s = atof(v);
	if (load() != 0)
		return;
	nl_cond_monotonic(&au.wake);
	pthread_t t;
	if (nl_thread(&t, 1, signer) != 0) { /* detached, no signal meant for the application */
		say("no signer thread");
		return;
	}
	pthread_mutex_lock(&au.lock);
	au.on = 1;
	pthread_mutex_unlock(&au.lock);
}

void nl_auth_wait_first(int ms)
{
	pthread_mutex_lock(&au.lock);
	if (au.on && !au.first_done) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += (long)ms * 1000000;
		until.tv_sec += until.tv_nsec / 1000000000;
		until.tv_nsec %= 1000000000;
		while (!au.first_done && pthread_cond_timedwait(&au.wake, &au.lock, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&au.lock);
}

void nl_auth_stop(void)
{
	pthread_mutex_lock(&au.lock);
	au.quit = 1;
	if (au.on)
		pthread_cond_broadcast(&au.wake);
	pthread_mutex_unlock(&au.lock);
}

int nl_auth_get(char *cred, size_t cap, size_t *len, uint8_t key[NL_AUTH_KEY])
{
	int rc = -1;
	pthread_mutex_lock(&au.lock);
	if (au.cred && au.cred_len <= cap) {
		memcpy(cred, au.cred, au.cred_len);
		*len = au.cred_len;
		memcpy(key, au.key, KEY_LEN);
		rc = 0;
	}
	pthread_mutex_unlock(&au.lock);
	return rc;
}

size_t nl_auth_sign(uint8_t *buf, size_t len, const uint8_t key[NL_AUTH_KEY])
{
	unsigned int n = 0;
	buf[len] = 0xAA; /* field 21, length-delimited: (21 << 3) | 2 as a varint */
	buf[len + 1] = 0x01;
	buf[len + 2] = MAC_LEN;
	if (!au.hmac(au.sha256(), key, KEY_LEN, buf, len, buf + len + 3, &n) || n != MAC_LEN)
		return 0;
	return len + NL_AUTH_OVERHEAD;
}
