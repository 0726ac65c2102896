/* fq_cuda.c - see fq_cuda.h. */
#define _POSIX_C_SOURCE 200809L
#include "cuda/fq_cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

typedef int (*get_count_fn)(int *);
typedef int (*register_fn)(void *, size_t, unsigned int);
typedef int (*unregister_fn)(void *);
typedef const char *(*error_string_fn)(int);

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static void *lib;
static get_count_fn p_get_count;
static register_fn p_register;
static unregister_fn p_unregister;
static error_string_fn p_error_string;
static _Atomic int64_t n_registered, n_unregistered;

static const char *cuda_err(int rc)
{
    const char *s = p_error_string ? p_error_string(rc) : NULL;
    return s ? s : "unknown CUDA error";
}

int fq_cuda_load(const char *const *candidates, int n, fq_err *err)
{
    if (pthread_mutex_lock(&load_mu) != 0)
        return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    if (lib) {
        (void)pthread_mutex_unlock(&load_mu);
        return FQ_OK;
    }
    char tried[FQ_ERR_MSG_LEN] = "";
    size_t used = 0;
    int rc = FQ_E_UNSUPPORTED;
    for (int i = 0; i < n; i++) {
        void *h = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            int w = snprintf(tried + used, sizeof tried - used, "%s%s", used ? "; " : "", why ? why : candidates[i]);
            if (w > 0 && (size_t)w < sizeof tried - used)
                used += (size_t)w;
            continue;
        }
        get_count_fn gc = (get_count_fn)(uintptr_t)dlsym(h, "cudaGetDeviceCount");
        register_fn rg = (register_fn)(uintptr_t)dlsym(h, "cudaHostRegister");
        unregister_fn ur = (unregister_fn)(uintptr_t)dlsym(h, "cudaHostUnregister");
        if (!gc || !rg || !ur) {
            int w = snprintf(tried + used, sizeof tried - used, "%s%s: missing CUDA runtime symbols",
                             used ? "; " : "", candidates[i]);
            if (w > 0 && (size_t)w < sizeof tried - used)
                used += (size_t)w;
            (void)dlclose(h);
            continue;
        }
        lib = h;
        p_get_count = gc;
        p_register = rg;
        p_unregister = ur;
        p_error_string = (error_string_fn)(uintptr_t)dlsym(h, "cudaGetErrorString");
        rc = FQ_OK;
        break;
    }
    (void)pthread_mutex_unlock(&load_mu);
    if (rc != FQ_OK)
        return fq_set_err(err, rc, "no CUDA runtime could be loaded (%s)", used ? tried : "no candidates");
    return FQ_OK;
}

int fq_cuda_device_count(fq_err *err)
{
    if (!p_get_count)
        return fq_set_err(err, FQ_E_UNSUPPORTED, "CUDA runtime not loaded"), -1;
    int n = 0;
    int rc = p_get_count(&n);
    if (rc == 100) /* cudaErrorNoDevice */
        return 0;
    if (rc == 35) { /* cudaErrorInsufficientDriver: no NVIDIA driver loaded, or one older than the runtime */
        fq_set_err(err, FQ_E_UNSUPPORTED, "no CUDA device (no NVIDIA driver this CUDA runtime can use: "
                   "cudaGetDeviceCount returned %d)", rc);
        return -1;
    }
    if (rc != 0) {
        fq_set_err(err, FQ_E_UNSUPPORTED, "cudaGetDeviceCount failed: %s (%d)", cuda_err(rc), rc);
        return -1;
    }
    return n;
}

int fq_cuda_register(void *ptr, size_t bytes, fq_err *err)
{
    if (!p_register)
        return fq_set_err(err, FQ_E_UNSUPPORTED, "CUDA runtime not loaded");
    int rc = p_register(ptr, bytes, 0u /* cudaHostRegisterDefault */);
    if (rc != 0)
        return fq_set_err(err, FQ_E_SYS, "cudaHostRegister(%zu bytes) failed: %s (%d)", bytes, cuda_err(rc), rc);
    atomic_fetch_add(&n_registered, 1);
    return FQ_OK;
}

void fq_cuda_unregister_hook(void *ctx, void *arena, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    if (p_unregister && arena) {
        (void)p_unregister(arena);
        atomic_fetch_add(&n_unregistered, 1);
    }
}

void fq_cuda_counts(int64_t *registered, int64_t *unregistered)
{
    if (registered)
        *registered = atomic_load(&n_registered);
    if (unregistered)
        *unregistered = atomic_load(&n_unregistered);
}
