/*
 * error.c - the words for the one error space (error.h). The table is indexed by -code,
 * so every code has exactly one phrase; and the one translation of errno into the space.
 */
#include "error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const words[] = {
    [-AS_OK] = "success",
    [-AS_EINVAL] = "invalid argument or event",
    [-AS_ENOMEM] = "out of memory or limit exceeded",
    [-AS_EIO] = "I/O error",
    [-AS_EFORMAT] = "unrecognised format or bad header",
    [-AS_ECORRUPT] = "corrupt or truncated input",
    [-AS_EUSAGE] = "invalid use",
    [-AS_ECHECK] = "invariant check failed",
    [-AS_EDEVICE] = "device error",
    [-AS_ENOSYS] = "not supported by the device",
    [-AS_EPOLICY] = "policy error",
    [-AS_ELIMIT] = "limit exceeded",
};

const char *as_strerror(int code)
{
    if (code > 0 || code < AS_E_LAST || !words[-code])
        return "unknown error";
    return words[-code];
}

int as_errno_error(int errnum, const char *what, char *why, size_t why_len)
{
    int code = errnum == ENOMEM ? AS_ENOMEM : AS_EIO;
    if (why && why_len) {
        if (code == AS_ENOMEM)
            snprintf(why, why_len, "out of host memory");
        else
            snprintf(why, why_len, "%s: %s", what, strerror(errnum ? errnum : EIO));
    }
    return code;
}
