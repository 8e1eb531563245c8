/* Netloom agent: the GPU probe (gpu.h). */

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"

/* The CUDA driver API's values used here (cuda.h, stable since CUDA 7). */
#define CU_SUCCESS 0
#define CU_ERROR_NOT_INITIALIZED 3
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define CU_MEMORYTYPE_HOST 1
#define CU_MEMORYTYPE_DEVICE 2
#define CU_MEMORYTYPE_UNIFIED 4

typedef int (*get_attributes_fn)(unsigned n, int *attrs, void **data, unsigned long long ptr);
typedef int (*ctx_current_fn)(void **ctx);

int nl_gpu_on;
uint64_t nl_gpu_cache[NL_GPU_CACHE];
unsigned nl_gpu_gen = 1;

static get_attributes_fn get_attributes;
static uint64_t asked;
static char error[160];

const char *nl_gpu_error(void)
{
	return error;
}

uint64_t nl_gpu_asked(void)
{
	return __atomic_load_n(&asked, __ATOMIC_RELAXED);
}

int nl_gpu_poll(void)
{
	if (__atomic_load_n(&nl_gpu_on, __ATOMIC_ACQUIRE) || *error)
		return __atomic_load_n(&nl_gpu_on, __ATOMIC_ACQUIRE);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (!h)
		return 0; /* CUDA not loaded: a CPU-only process, nothing to do */
	get_attributes_fn ga = (get_attributes_fn)dlsym(h, "cuPointerGetAttributes");
	ctx_current_fn cur = (ctx_current_fn)dlsym(h, "cuCtxGetCurrent");
	if (!ga || !cur) {
		snprintf(error, sizeof error, "libcuda.so.1 has no %s", ga ? "cuCtxGetCurrent" : "cuPointerGetAttributes");
		dlclose(h);
		return 0;
	}
	/* loaded is not initialized: before cuInit no CUDA memory exists
	 * (a library may load the driver without using it) */
	void *ctx = NULL;
	int rc = cur(&ctx);
	if (rc == CU_ERROR_NOT_INITIALIZED) {
		dlclose(h);
		return 0;
	}
	if (rc != CU_SUCCESS) {
		snprintf(error, sizeof error, "cuCtxGetCurrent: CUDA error %d", rc);
		dlclose(h);
		return 0;
	}
	get_attributes = ga; /* h stays open: the driver stays while we call it */
	__atomic_store_n(&nl_gpu_on, 1, __ATOMIC_RELEASE);
	return 1;
}

void nl_gpu_age(void)
{
	unsigned g = __atomic_load_n(&nl_gpu_gen, __ATOMIC_RELAXED) + 1;
	if ((g & 0x3fffu) == 0) /* generation 0 would match empty entries */
		g++;
	__atomic_store_n(&nl_gpu_gen, g, __ATOMIC_RELAXED);
}

unsigned nl_gpu_ask(const void *p)
{
	__atomic_fetch_add(&asked, 1, __ATOMIC_RELAXED);
	if (!get_attributes)
		return NL_NKIND;
	unsigned type = 0, managed = 0; /* zeroed: the driver writes a bool into managed */
	int attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
	void *data[2] = {&type, &managed};
	/* memory CUDA does not know is no error: the attributes stay zero */
	int rc = get_attributes(2, attrs, data, (unsigned long long)(uintptr_t)p);
	if (rc != CU_SUCCESS)
		return NL_NKIND; /* pageable, not remembered */
	if (managed)
		return NL_MANAGED;
	switch (type) {
	case CU_MEMORYTYPE_HOST:
		return NL_PINNED;
	case CU_MEMORYTYPE_DEVICE:
	case CU_MEMORYTYPE_UNIFIED:
		return NL_DEVICE;
	}
	return NL_PAGEABLE;
}
