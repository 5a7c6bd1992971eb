/*
 * error.h - the one error space: every part of allocsim (traces, policies, devices, the
 * engine, reports) returns 0 or one of these negative codes, and as_strerror() words any
 * of them. A code says what kind of failure it was; the message that names the file,
 * offset or run travels next to it (as_trace_error, as_engine_errmsg, a why buffer).
 *
 * Results are not errors and are not here: a device refusing for lack of memory
 * (AS_DEV_OOM), a policy that cannot serve a request (AS_POLICY_OOM), the end of a trace
 * (AS_TRACE_EOF) are positive values of their own interfaces. Invariant: the codes are
 * distinct and negative, so a code means the same thing whichever part returned it, and
 * no caller tells parts apart by numeric range.
 *
 * Part of sim/base/: uses nothing else in the project.
 */
#ifndef AS_BASE_ERROR_H
#define AS_BASE_ERROR_H

#include <stddef.h>

enum {
    AS_OK = 0,
    AS_EINVAL = -1,   /* invalid argument or value: bad handle, knob, address, size, event */
    AS_ENOMEM = -2,   /* host memory ran out (or a reader's memory safety limit was hit) */
    AS_EIO = -3,      /* open, read, write or close failed (the message carries errno's) */
    AS_EFORMAT = -4,  /* input of no recognised format, or a bad header or version */
    AS_ECORRUPT = -5, /* malformed or truncated content */
    AS_EUSAGE = -6,   /* API misuse: unknown name, wrong order of calls, bad spec */
    AS_ECHECK = -7,   /* an invariant check found a violation */
    AS_EDEVICE = -8,  /* the device failed in a way other than running out of memory */
    AS_ENOSYS = -9,   /* the device cannot do this call (no virtual memory management) */
    AS_EPOLICY = -10, /* a policy returned an error (not an OOM) to the engine: a bug */
    AS_ELIMIT = -11,  /* a configured budget or limit was exceeded */
    AS_E_LAST = -11,  /* the lowest code, for tables and tests */
};

/* A short lower-case phrase for code (0 is "success"); "unknown error" for anything else. */
const char *as_strerror(int code);

/* A failed open, read, write or close (errnum: its errno, 0 = unknown) as a code of the
 * space: AS_ENOMEM for ENOMEM, else AS_EIO. why (unless NULL) gets "what: errno's words"
 * ("out of host memory" for AS_ENOMEM), for the caller to put after the file's name. */
int as_errno_error(int errnum, const char *what, char *why, size_t why_len);

#endif
