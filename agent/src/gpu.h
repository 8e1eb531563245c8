/* Netloom agent: the GPU probe. Where the memory of a buffer lives (host
 * pageable, host pinned, device, managed), asked of the CUDA driver
 * (cuPointerGetAttributes) only once the process has CUDA loaded and
 * initialized, found with dlopen(RTLD_NOLOAD): the agent never links
 * libcuda and never loads it. Answers are cached per page (a page has one
 * kind) until the next snapshot. Knows nothing of MPI. */
#ifndef NL_GPU_H
#define NL_GPU_H

#include <stdint.h>

enum nl_kind { NL_PAGEABLE, NL_PINNED, NL_DEVICE, NL_MANAGED, NL_NKIND };
#define NL_KIND_NONE 0xffu /* no buffer named, or the call not probed */

#define NL_GPU_CACHE 4096 /* pages remembered, direct-mapped */

#pragma GCC visibility push(hidden)
/* nl_gpu_on: nonzero once CUDA is loaded and initialized and the driver
 * answers (set once, by nl_gpu_poll) */
extern int nl_gpu_on;
extern uint64_t nl_gpu_cache[NL_GPU_CACHE];
extern unsigned nl_gpu_gen;
#pragma GCC visibility pop

/* nl_gpu_poll looks for an initialized CUDA driver in the process (MPI_Init
 * and the reporting thread; it takes the loader's lock, never on the hot
 * path) and returns nl_gpu_on. */
int nl_gpu_poll(void);
/* nl_gpu_age forgets the cached answers (reporting thread, each snapshot),
 * so that memory freed and mapped anew is asked again within an interval */
void nl_gpu_age(void);
/* why probing stopped or never started while CUDA is loaded ("" if not) */
const char *nl_gpu_error(void);
/* the driver's answer for p, uncached (a miss of nl_gpu_kind) */
unsigned nl_gpu_ask(const void *p);
/* driver calls made (misses), for the bench and the tests */
uint64_t nl_gpu_asked(void);

/* nl_gpu_kind: the kind of the memory at p, NL_KIND_NONE for NULL. A hit
 * is a hash, one relaxed load and a compare. An entry packs the page number
 * (bits 16..63), the cache generation (bits 2..15) and the kind (bits 0..1);
 * generation 0 is never current, so a zero entry never matches. */
static inline __attribute__((always_inline)) unsigned nl_gpu_kind(const void *p)
{
	if (!p)
		return NL_KIND_NONE;
	uint64_t page = (uint64_t)(uintptr_t)p >> 12;
	uint64_t want = page << 16 | (uint64_t)(__atomic_load_n(&nl_gpu_gen, __ATOMIC_RELAXED) & 0x3fffu) << 2;
	unsigned slot = (unsigned)((page * 0x9E3779B97F4A7C15ull) >> 52); /* NL_GPU_CACHE = 4096 */
	uint64_t e = __atomic_load_n(&nl_gpu_cache[slot], __ATOMIC_RELAXED);
	if (__builtin_expect((e & ~3ull) == want, 1))
		return (unsigned)(e & 3u);
	unsigned k = nl_gpu_ask(p);
	if (k < NL_NKIND)
		__atomic_store_n(&nl_gpu_cache[slot], want | k, __ATOMIC_RELAXED);
	return k < NL_NKIND ? k : NL_PAGEABLE;
}

#endif
