/*
 * cuda_driver.c - loads libcuda.so.1 with dlopen and the driver entry points with
 * cuGetProcAddress (cuda_driver.h). The library handle is kept open for the life of the
 * process: the CUDA runtime holds the same library, and the pointers must stay valid.
 */
#include "cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>

as_cu_api as_cu;

/* cuGetProcAddress as CUDA 12.0 and later export it (cuda.h maps the name to _v2). */
typedef CUresult (*get_proc_fn)(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *status);
typedef CUresult (*driver_version_fn)(int *version);

static int load_entry(get_proc_fn get, const char *name, void **slot, char *why, size_t wl)
{
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = get(name, slot, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    if (r == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS && *slot)
        return 0;
    snprintf(why, wl,
             "%s: no entry point %s for CUDA %d.%d (the driver is older than the "
             "toolkit this was built with)",
             AS_CU_LIBRARY, name, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
    return -1;
}

static int load_all(char *why, size_t wl)
{
    void *lib = dlopen(AS_CU_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, wl, "%s", e ? e : AS_CU_LIBRARY ": cannot be loaded");
        return -1;
    }
    get_proc_fn get = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
    if (!get) {
        driver_version_fn ver = (driver_version_fn)dlsym(lib, "cuDriverGetVersion");
        int v = 0;
        if (ver)
            ver(&v);
        snprintf(why, wl,
                 "%s: the driver (CUDA %d.%d) is older than CUDA 12.0 and has no "
                 "cuGetProcAddress_v2",
                 AS_CU_LIBRARY, v / 1000, v % 1000 / 10);
        return -1;
    }
#define AS_CU_LOAD(fn)                                                                             \
    if (load_entry(get, #fn, (void **)&as_cu.fn, why, wl))                                         \
        return -1;
    AS_CU_FUNCS(AS_CU_LOAD)
#undef AS_CU_LOAD
    return 0;
}

int as_cu_load(char *why, size_t why_len)
{
    static int done, result;
    static char first_why[512];
    if (!done) {
        result = load_all(first_why, sizeof first_why);
        done = 1;
    }
    if (result)
        snprintf(why, why_len, "%s", first_why);
    return result;
}
