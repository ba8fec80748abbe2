/* A stand-in for the NVIDIA driver's libnvidia-ml.so.1, for tests on machines without a GPU: the real
 * pynvml binding loads it (CDLL("libnvidia-ml.so.1"), found through LD_LIBRARY_PATH) and gets its answers.
 *
 * FAKE_NVML_MINORS: the GPUs, in NVML's index order, as the minor numbers of their device files ("3,1,2,0":
 * index 0 is /dev/nvidia3); unset, nvmlInit fails as it does where the driver is not loaded. GPU i's UUID is
 * "GPU-fake-<i>". FAKE_NVML_LOG: a file each nvmlInit appends its process id to, one a line.
 * Only the few functions trainyard calls are here; pynvml looks each one up by name when it is first called. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SUCCESS 0
#define UNINITIALIZED 1
#define INVALID_ARGUMENT 2
#define NOT_FOUND 6
#define DRIVER_NOT_LOADED 9
#define MAX_GPUS 64

static unsigned minors[MAX_GPUS];
static int count = -1; /* -1: not initialised */

int nvmlInitWithFlags(unsigned flags) {
    (void)flags;
    const char *log = getenv("FAKE_NVML_LOG");
    if (log) {
        FILE *f = fopen(log, "a");
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
    }
    const char *spec = getenv("FAKE_NVML_MINORS");
    if (!spec)
        return DRIVER_NOT_LOADED;
    count = 0;
    for (const char *p = spec; *p && count < MAX_GPUS;) {
        char *end;
        minors[count++] = (unsigned)strtoul(p, &end, 10);
        p = *end == ',' ? end + 1 : end + strlen(end);
    }
    return SUCCESS;
}

int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

int nvmlShutdown(void) {
    count = -1;
    return SUCCESS;
}

const char *nvmlErrorString(int result) {
    switch (result) {
    case SUCCESS: return "Success";
    case UNINITIALIZED: return "Uninitialized";
    case INVALID_ARGUMENT: return "Invalid Argument";
    case NOT_FOUND: return "Not Found";
    case DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

/* a device handle is its index + 1: never NULL */
static int index_of(void *device) {
    long i = (long)device - 1;
    return count >= 0 && i >= 0 && i < count ? (int)i : -1;
}

int nvmlDeviceGetCount_v2(unsigned *n) {
    if (count < 0)
        return UNINITIALIZED;
    *n = (unsigned)count;
    return SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **device) {
    if (count < 0)
        return UNINITIALIZED;
    if (i >= (unsigned)count)
        return INVALID_ARGUMENT;
    *device = (void *)(long)(i + 1);
    return SUCCESS;
}

int nvmlDeviceGetHandleByUUID(const char *uuid, void **device) {
    if (count < 0)
        return UNINITIALIZED;
    char want[32];
    for (int i = 0; i < count; i++) {
        snprintf(want, sizeof want, "GPU-fake-%d", i);
        if (strcmp(uuid, want) == 0) {
            *device = (void *)(long)(i + 1);
            return SUCCESS;
        }
    }
    return NOT_FOUND;
}

int nvmlDeviceGetMinorNumber(void *device, unsigned *minor) {
    int i = index_of(device);
    if (i < 0)
        return INVALID_ARGUMENT;
    *minor = minors[i];
    return SUCCESS;
}

int nvmlDeviceGetUUID(void *device, char *uuid, unsigned length) {
    int i = index_of(device);
    if (i < 0)
        return INVALID_ARGUMENT;
    snprintf(uuid, length, "GPU-fake-%d", i);
    return SUCCESS;
}

int nvmlDeviceGetName(void *device, char *name, unsigned length) {
    if (index_of(device) < 0)
        return INVALID_ARGUMENT;
    snprintf(name, length, "NVIDIA H100 80GB HBM3");
    return SUCCESS;
}
