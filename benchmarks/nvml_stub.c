/* A stand-in libnvidia-ml for benchmarks/agent_bench.py --stub-nvml: the C functions the agent
 * reaches through the real pynvml (nvidia-ml-py), answering at once as an idle 8-GPU H100 SXM
 * box does (18 NVLinks each, no NVLink5 counters, no multi-node fabric). It measures what the
 * real path costs in Python (pynvml's wrappers, ctypes, the agent's code) with the driver's own
 * time taken out; it is no driver and checks nothing.
 *
 *     cc -shared -fPIC -O2 -o nvml_stub.so benchmarks/nvml_stub.c
 *
 * Layouts from nvml.h (NVML_API_VERSION 13): nvmlFieldValue_t, nvmlPciInfo_t, nvmlMemory_t,
 * nvmlUtilization_t, nvmlViolationTime_t. */
#include <stdio.h>
#include <string.h>

#define GPUS 8
#define LINKS 18
#define SUCCESS 0
#define NOT_SUPPORTED 3
#define TIMEOUT 10

typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    unsigned int valueType, nvmlReturn;
    union { double d; unsigned int ui; unsigned long ul; unsigned long long ull; } value;
} field_value;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_info;

static const unsigned int buses[GPUS] = {0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB};
static int event_set;

static unsigned int index_of(void *h) { return (unsigned int)((unsigned long)h - 1); }

int nvmlInitWithFlags(unsigned int flags) { (void)flags; return SUCCESS; }
int nvmlShutdown(void) { return SUCCESS; }
const char *nvmlErrorString(int result) { (void)result; return "stub"; }

int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    snprintf(version, length, "570.86.15");
    return SUCCESS;
}

int nvmlDeviceGetCount_v2(unsigned int *count) { *count = GPUS; return SUCCESS; }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **handle) {
    *handle = (void *)(unsigned long)(index + 1);
    return SUCCESS;
}

int nvmlDeviceGetUUID(void *h, char *uuid, unsigned int length) {
    snprintf(uuid, length, "GPU-5eb0a1c2-0000-4000-8000-%012u", index_of(h));
    return SUCCESS;
}

int nvmlDeviceGetName(void *h, char *name, unsigned int length) {
    (void)h;
    snprintf(name, length, "NVIDIA H100 80GB HBM3");
    return SUCCESS;
}

int nvmlDeviceGetMemoryInfo(void *h, unsigned long long *memory) {
    (void)h;
    memory[0] = 80ULL << 30; /* total, free, used */
    memory[1] = 80ULL << 30;
    memory[2] = 0;
    return SUCCESS;
}

int nvmlDeviceGetPciInfo_v3(void *h, pci_info *pci) {
    unsigned int bus = buses[index_of(h) % GPUS];
    memset(pci, 0, sizeof *pci);
    pci->bus = bus;
    pci->pciDeviceId = 0x233010DE;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", bus);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", bus);
    return SUCCESS;
}

int nvmlDeviceGetNumaNodeId(void *h, unsigned int *node) {
    *node = index_of(h) * 2 / GPUS;
    return SUCCESS;
}

int nvmlDeviceGetMinorNumber(void *h, unsigned int *minor) { *minor = index_of(h); return SUCCESS; }

static int zero_ull(unsigned long long *out) { *out = 0; return SUCCESS; }

int nvmlDeviceGetTotalEccErrors(void *h, int type, int counter, unsigned long long *count) {
    (void)h; (void)type; (void)counter;
    return zero_ull(count);
}

int nvmlDeviceGetRemappedRows(void *h, unsigned int *corr, unsigned int *unc, unsigned int *pending,
                              unsigned int *failure) {
    (void)h;
    *corr = *unc = *pending = *failure = 0;
    return SUCCESS;
}

int nvmlDeviceGetRetiredPagesPendingStatus(void *h, int *pending) {
    (void)h;
    *pending = 0;
    return SUCCESS;
}

int nvmlDeviceGetPcieReplayCounter(void *h, unsigned int *value) { (void)h; *value = 0; return SUCCESS; }
int nvmlDeviceGetCurrPcieLinkGeneration(void *h, unsigned int *gen) { (void)h; *gen = 5; return SUCCESS; }
int nvmlDeviceGetCurrPcieLinkWidth(void *h, unsigned int *width) { (void)h; *width = 16; return SUCCESS; }

int nvmlDeviceGetCurrentClocksEventReasons(void *h, unsigned long long *reasons) {
    (void)h;
    *reasons = 1; /* GPU idle */
    return SUCCESS;
}

int nvmlDeviceGetViolationStatus(void *h, int policy, unsigned long long *violation) {
    (void)h; (void)policy;
    violation[0] = violation[1] = 0; /* referenceTime, violationTime */
    return SUCCESS;
}

int nvmlDeviceGetGpuFabricInfoV(void *h, void *info) { (void)h; (void)info; return NOT_SUPPORTED; }

int nvmlDeviceGetTemperature(void *h, int sensor, unsigned int *temp) {
    (void)h; (void)sensor;
    *temp = 40;
    return SUCCESS;
}

int nvmlDeviceGetPowerUsage(void *h, unsigned int *milliwatts) { (void)h; *milliwatts = 350000; return SUCCESS; }

int nvmlDeviceGetUtilizationRates(void *h, unsigned int *rates) {
    (void)h;
    rates[0] = rates[1] = 0; /* gpu, memory */
    return SUCCESS;
}

/* The per-link calls, for an agent that reads links one call at a time. */
int nvmlDeviceGetNvLinkState(void *h, unsigned int link, unsigned int *active) {
    (void)h;
    if (link >= LINKS) return 2; /* invalid argument: past the last link */
    *active = 1;
    return SUCCESS;
}

int nvmlDeviceGetNvLinkErrorCounter(void *h, unsigned int link, int counter,
                                    unsigned long long *value) {
    (void)h; (void)counter;
    if (link >= LINKS) return 2;
    return zero_ull(value);
}

int nvmlDeviceGetFieldValues(void *h, int count, field_value *values) {
    (void)h;
    for (int i = 0; i < count; i++) {
        field_value *v = &values[i];
        v->nvmlReturn = SUCCESS;
        v->valueType = 1; /* unsigned int */
        switch (v->fieldId) {
        case 230: v->value.ui = 0; break;                            /* recovery action: none */
        case 91: v->value.ui = LINKS; break;                         /* link count */
        case 165:                                                     /* link state: active */
            if (v->scopeId < LINKS) v->value.ui = 1; else v->nvmlReturn = 2;
            break;
        case 38: case 45: case 52: case 59:                          /* error totals */
            v->valueType = 3; v->value.ull = 0; break;
        default: v->nvmlReturn = NOT_SUPPORTED;                       /* NVLink5: not an H100's */
        }
    }
    return SUCCESS;
}

int nvmlEventSetCreate(void **set) { *set = &event_set; return SUCCESS; }
int nvmlDeviceGetSupportedEventTypes(void *h, unsigned long long *types) { (void)h; *types = 0x8; return SUCCESS; }
int nvmlDeviceRegisterEvents(void *h, unsigned long long types, void *set) { (void)h; (void)types; (void)set; return SUCCESS; }
int nvmlEventSetWait_v2(void *set, void *data, unsigned int timeout) { (void)set; (void)data; (void)timeout; return TIMEOUT; }
int nvmlEventSetFree(void *set) { (void)set; return SUCCESS; }
