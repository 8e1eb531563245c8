/* Netloom agents: MUNGE credentials and the HMAC of each datagram (auth.c).
 * Shared by the MPI agent and the NCCL plugin: knows nothing of MPI or
 * NCCL. Called from the reporting thread and the final report only, never
 * from the application's calls. */
#ifndef NL_AUTH_H
#define NL_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define NL_AUTH_KEY 32
#define NL_AUTH_OVERHEAD 35   /* the mac field: tag (2), length (1), HMAC-SHA256 (32) */
#define NL_AUTH_CRED_MAX 4096 /* the daemon's limit */

/* nl_auth_start starts the signer thread, once (later calls do nothing);
 * a no-op without MUNGE. job_id goes into every credential's payload, rank
 * only into NETLOOM_DEBUG's messages. */
void nl_auth_start(const char *job_id, int rank);
void nl_auth_wait_first(int ms); /* waits at most ms for the signer's first answer */
void nl_auth_stop(void);         /* tells the signer to end (never waits for it) */
/* nl_auth_get copies the current credential and its key; 0: there is one */
int nl_auth_get(char *cred, size_t cap, size_t *len, uint8_t key[NL_AUTH_KEY]);
/* nl_auth_sign appends the mac field to buf (NL_AUTH_OVERHEAD bytes of room
 * after len); returns the new length, 0 on failure */
size_t nl_auth_sign(uint8_t *buf, size_t len, const uint8_t key[NL_AUTH_KEY]);

#endif
