/*
 * inmap.c - a plain regular file mapped read-only, for the instream's direct window: the
 * decoders read the page cache in place instead of the copy read(2) makes into a buffer
 * (7-11 % of the shared snapshots' import CPU, mostly the copy window's first faults;
 * sim/README.md, Snapshot import).
 *
 * Invariant: a mapped page is always readable. A file cut shorter while mapped would make
 * its pages past the new end fault (SIGBUS); the guard maps zero pages over them instead
 * and marks the map cut, and the instream then fails with its own message. Only a window
 * of the file is mapped (IM_WINDOW bytes, or the peek asked for), moved on as the stream
 * is read, so neither address space nor resident memory follows the file's size.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "inmap.h"

#define IM_SLOTS 64           /* files mapped at once; past that, read(2) is used */
#define IM_WINDOW (2u << 20)  /* bytes of the file mapped at a time, at least */

struct as_inmap {
    int fd;
    uint64_t size;    /* the file's, when it was opened */
    const uint8_t *p; /* the window: file bytes [off, off + mlen) mapped, or NULL */
    uint64_t off;
    size_t mlen;
    int slot;
};

/* What the guard reads: each map's window and its cut flag. A slot is claimed with a
 * compare-and-swap of used, so threads opening files at once never share one. */
typedef struct im_slot {
    atomic_int used;
    _Atomic uintptr_t lo, hi;
    volatile sig_atomic_t cut;
} im_slot;

static im_slot slots[IM_SLOTS];
static struct sigaction prev_bus;
static size_t page;
static atomic_int guard_state; /* 0 none, 1 being installed, 2 installed, -1 failed */

/* SIGBUS: zero pages from the faulting one to the window's end, when the fault is in a
 * window of ours (the access then reads 0 and the map is marked cut); else what was
 * installed before (by default the process dies, as it would have). Nothing but plain
 * loads and stores and two system calls (mmap, sigaction). */
static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < IM_SLOTS; i++) {
        uintptr_t lo = atomic_load_explicit(&slots[i].lo, memory_order_acquire);
        uintptr_t hi = atomic_load_explicit(&slots[i].hi, memory_order_acquire);
        if (!lo || a < lo || a >= hi)
            continue;
        uintptr_t pg = a & ~(uintptr_t)(page - 1);
        if (mmap((void *)pg, hi - pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                 0) == MAP_FAILED)
            break;
        slots[i].cut = 1;
        return;
    }
    if (prev_bus.sa_flags & SA_SIGINFO) {
        prev_bus.sa_sigaction(sig, si, uc);
    } else if (prev_bus.sa_handler != SIG_DFL && prev_bus.sa_handler != SIG_IGN) {
        prev_bus.sa_handler(sig);
    } else {
        /* The fault repeats on return and takes the default action. */
        static const struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigaction(SIGBUS, &dfl, NULL);
    }
}

/* Installs the guard once; 0, or -1 (then nothing is mapped). */
static int guard(void)
{
    int st = atomic_load(&guard_state), zero = 0;
    if (st == 0 && atomic_compare_exchange_strong(&guard_state, &zero, 1)) {
        long ps = sysconf(_SC_PAGESIZE);
        page = ps > 0 ? (size_t)ps : 4096;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        atomic_store(&guard_state, sigaction(SIGBUS, &sa, &prev_bus) == 0 ? 2 : -1);
    }
    while ((st = atomic_load(&guard_state)) == 1)
        ; /* another thread is installing it: a few system calls */
    return st == 2 ? 0 : -1;
}

static int claim(void)
{
    for (int i = 0; i < IM_SLOTS; i++) {
        int none = 0;
        if (atomic_compare_exchange_strong(&slots[i].used, &none, 1)) {
            slots[i].cut = 0;
            return i;
        }
    }
    return -1;
}

/* The window unmapped; the guard first forgets its range (this thread alone reads it). */
static void unmap(as_inmap *m)
{
    if (!m->p)
        return;
    im_slot *s = &slots[m->slot];
    atomic_store_explicit(&s->hi, 0, memory_order_release);
    atomic_store_explicit(&s->lo, 0, memory_order_release);
    munmap((void *)(uintptr_t)m->p, m->mlen);
    m->p = NULL;
}

int as_inmap_open(int fd, uint64_t size, as_inmap **out)
{
    *out = NULL;
    if (size == 0 || guard() < 0)
        return -1;
    as_inmap *m = calloc(1, sizeof *m);
    if (!m)
        return -1;
    m->fd = fd;
    m->size = size;
    if ((m->slot = claim()) < 0) {
        free(m);
        return -1;
    }
    *out = m;
    return 0;
}

int as_inmap_view(as_inmap *m, uint64_t off, size_t need, const uint8_t **data, size_t *avail)
{
    if (off >= m->size) {
        *data = NULL;
        *avail = 0;
        return 0;
    }
    uint64_t rest = m->size - off;
    if (need > rest)
        need = (size_t)rest;
    if (!m->p || off < m->off || off + need > m->off + m->mlen) {
        uint64_t at = off & ~(uint64_t)(page - 1);
        uint64_t len = (off - at) + (need > IM_WINDOW ? need : IM_WINDOW);
        if (len > m->size - at)
            len = m->size - at;
        unmap(m);
        void *p = mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, m->fd, (off_t)at);
        if (p == MAP_FAILED)
            return -1;
        m->p = p;
        m->off = at;
        m->mlen = (size_t)len;
        im_slot *s = &slots[m->slot];
        atomic_store_explicit(&s->lo, (uintptr_t)p, memory_order_release);
        atomic_store_explicit(&s->hi, (uintptr_t)p + ((m->mlen + page - 1) & ~(page - 1)),
                              memory_order_release);
    }
    *data = m->p + (off - m->off);
    *avail = (size_t)(m->off + m->mlen - off);
    return 0;
}

int as_inmap_cut(const as_inmap *m)
{
    return slots[m->slot].cut != 0;
}

void as_inmap_close(as_inmap *m)
{
    if (!m)
        return;
    unmap(m);
    atomic_store_explicit(&slots[m->slot].used, 0, memory_order_release);
    free(m);
}
