/* bench/agent/gpu.sh: preloaded before the benchmark, makes it a CUDA
 * process (the driver loaded and a context current on the main thread)
 * without touching its buffers, which stay host memory: what the agent's
 * buffer probe costs a CUDA job's host buffers. Loads libcuda.so.1 with
 * dlopen, so it builds without CUDA. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void cuda_ctx(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		fprintf(stderr, "cuda_ctx: no libcuda.so.1: %s\n", dlerror());
		exit(3);
	}
	int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
	int (*retain)(void **, int) = (int (*)(void **, int))dlsym(h, "cuDevicePrimaryCtxRetain");
	int (*set)(void *) = (int (*)(void *))dlsym(h, "cuCtxSetCurrent");
	void *ctx = NULL;
	int rc;
	if (!init || !retain || !set || (rc = init(0)) != 0 || (rc = retain(&ctx, 0)) != 0 || (rc = set(ctx)) != 0) {
		fprintf(stderr, "cuda_ctx: CUDA did not start\n");
		exit(3);
	}
}
