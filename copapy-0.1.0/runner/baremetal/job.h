/* The job and result formats of the bare-metal harness (README.md has the full description).
 * All integers are little-endian u32. The host side is src/copapy/runtime/qemu_backend.py. */
#ifndef CP_BAREMETAL_JOB_H
#define CP_BAREMETAL_JOB_H

#include <stdint.h>

#define CP_JOB_MAGIC "CPJB"
#define CP_RESULT_MAGIC "CPRS"
#define CP_JOB_VERSION 1u

/* Job records: {type, size, payload[size]}; result records: {type, status, size, payload}. */
enum cp_job_record {
    CP_REC_END = 0,    /* job: stop here; result: the job finished */
    CP_REC_LOAD = 1,   /* job: image bytes; result ok: base, code_size, data_offset, data_size,
                        * task_count; result failed: detail, message */
    CP_REC_WRITE = 2,  /* job: offset, bytes into the data region */
    CP_REC_RUN = 3,    /* job: task index */
    CP_REC_DUMP = 4,   /* result: the whole data region */
    CP_REC_ERROR = 14, /* result only: the job file is malformed; message */
    CP_REC_FAULT = 15  /* result only: the CPU faulted; cp_fault_report */
};

/* Statuses of WRITE/RUN/DUMP besides the cp_status codes that LOAD and RUN report. */
enum cp_job_status {
    CP_JOB_NO_PROGRAM = 64, /* no program is loaded (none yet, or the last LOAD failed) */
    CP_JOB_RANGE = 65       /* a WRITE outside the data region */
};

/* qemu's exit status (SYS_EXIT_EXTENDED) */
enum cp_job_exit {
    CP_EXIT_OK = 0,
    CP_EXIT_BAD_JOB = 2,
    CP_EXIT_FAULT = 3,
    CP_EXIT_NO_RESULT = 4
};

/* Payload of a FAULT record, in this order. */
typedef struct cp_fault_report {
    uint32_t exception; /* IPSR: 3 HardFault, 4 MemManage, 5 BusFault, 6 UsageFault, ... */
    uint32_t pc;        /* stacked PC (0xFFFFFFFF if the frame was unusable) */
    uint32_t lr;        /* stacked LR */
    uint32_t xpsr;      /* stacked xPSR */
    uint32_t exc_return;
    uint32_t cfsr;
    uint32_t hfsr;
    uint32_t mmfar;
    uint32_t bfar;
    uint32_t sfsr;      /* SecureFault status (ARMv8-M), 0 on ARMv7-M */
    uint32_t record;    /* index of the job record that was executing */
    uint32_t base;      /* region base of the loaded program, 0 if none */
} cp_fault_report;

#endif /* CP_BAREMETAL_JOB_H */
