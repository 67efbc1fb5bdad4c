/*
 * stack.c — uthread stacks: mapping, guard pages, canaries, the caches, and
 * the overflow report.
 *
 * A stack is one anonymous mapping, committed lazily by the kernel:
 *
 *     map                stack_lo                               top of mapping
 *     | guard (PROT_NONE) | usable stack ...  grows down <- | struct weft_uthread |
 *
 * The guard is a quarter of the stack, between a page and 64 KiB (64 KiB on
 * aarch64: guard_for).
 *
 * The uthread struct lives at the top (shifted by a per-stack cache colour),
 * so a spawn costs one mapping (or none, from a cache) and touches one or two
 * pages. A guarded stack costs the
 * kernel two VMAs; vm.max_map_count bounds them (65530 by default). weft
 * keeps guarded stacks to half of that budget (or WEFT_MAX_GUARDED_STACKS);
 * past it, it says so once and maps stacks without a guard page, with a
 * canary at the bottom that is checked at every 16th switch out of the
 * uthread and when it is freed (weft__stack_leave says why not at every one).
 *
 * Freed uthreads of the default stack size go to the vcore's cache (LIFO,
 * warm), then to a global cache, then back to the kernel. A cached shell keeps
 * state FREE until reused, which is how a second weft_join() is caught.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define VCORE_CACHE_MAX  64
#define GLOBAL_CACHE_MAX 1024
#define GUARD_MAX        (64 * 1024) /* the largest PROT_NONE guard below a stack */
/* The canary of an unguarded stack: its lowest CANARY_WORDS words, zero.
 * Nothing writes them (a fresh mapping reads as zero without a page being
 * committed: the canary costs no memory), and only a stack that overflowed
 * reaches them, which is reported before the stack can go back to a cache. */
#define CANARY_WORDS     8
#define CANARY_EVERY     16  /* a uthread's switches out per read of its canary */
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
#define MIN_STACK (64 * 1024)   /* instrumented frames are several times larger */
#else
#define MIN_STACK (16 * 1024)
#endif

size_t weft__page_size = 4096;

static struct {
    uint32_t lock;                 /* spinlock: list, n */
    struct weft_uthread *list;
    int n;
} global_cache;

static long guard_budget;          /* guarded stacks allowed; fixed after init */
static _Atomic long guarded_live;  /* guarded stacks mapped (cached ones too) */
static _Atomic bool budget_warned;
static struct sigaction old_segv;
static bool segv_installed;

size_t weft__stack_default(void)
{
    return weft__rt.stack_size;
}

size_t weft__stack_round(size_t size)
{
    if (size < MIN_STACK)
        size = MIN_STACK;
    return (size + weft__page_size - 1) & ~(weft__page_size - 1);
}

/* ---- overflow reporting (async-signal-safe) ---------------------------------- */

static char *fmt_u(char *p, unsigned long long v)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10));
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *fmt_s(char *p, const char *s)
{
    while (*s)
        *p++ = *s++;
    return p;
}

static _Noreturn void overflow_report(struct weft_uthread *t, const char *how)
{
    char buf[160], *p = buf;
    p = fmt_s(p, "weft: uthread ");
    p = fmt_u(p, t->id);
    p = fmt_s(p, " (");
    p = fmt_s(p, t->name[0] ? t->name : "unnamed");
    p = fmt_s(p, ") overflowed its ");
    p = fmt_u(p, t->asked_size / 1024);
    p = fmt_s(p, " KiB stack");
    p = fmt_s(p, how);
    *p++ = '\n';
    if (syscall(SYS_write, 2, buf, (size_t)(p - buf)) < 0) {
        /* nothing else to try */
    }
    signal(SIGABRT, SIG_DFL);
    abort();
}

/* interrupted_sp() is the stack pointer of the context the signal
 * interrupted, or 0 where we cannot read it. */
static uintptr_t interrupted_sp(void *uc)
{
#if defined(__x86_64__)
    return (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    return (uintptr_t)((ucontext_t *)uc)->uc_mcontext.sp;
#else
    (void)uc;
    return 0;
#endif
}

/* frame_room() bounds the room a signal frame takes on a stack (the kernel's
 * own estimate, which counts the FPU state, plus alignment and slack). */
static uintptr_t frame_room;

/* signal_frame_overflow(): the kernel could not push a signal frame (a
 * notification landing on a nearly full stack) and forced a SIGSEGV with
 * no address; the interrupted stack pointer is within a frame of t's
 * stack's bottom, or below it. */
static bool signal_frame_overflow(struct weft_uthread *t, siginfo_t *si, void *uc)
{
    if (si->si_code != SI_KERNEL || si->si_addr != NULL)
        return false;
    uintptr_t sp = interrupted_sp(uc), lo = (uintptr_t)t->stack_lo;
    uintptr_t floor = t->guarded ? (uintptr_t)t->map : lo - GUARD_MAX;
    return sp && sp >= floor && sp < lo + frame_room;
}

/* canary_overflow(): an unguarded stack has nothing below it to fault in,
 * so a deep recursion writes into whatever lies below and faults wherever:
 * the interrupted stack pointer below the stack's bottom names it (within
 * 16 guards' worth; or at any depth when the fault is a stack access within
 * a frame of that stack pointer: a recursion that went on through memory
 * mapped below, another thread's stack, say, until it met a hole), or,
 * when what lies below faults at once, a stack pointer at the bottom (a call
 * or push that would store just below it faulted before moving sp) or an
 * access just below the bottom made from a stack pointer near it. */
static bool canary_overflow(struct weft_uthread *t, siginfo_t *si, void *uc)
{
    uintptr_t sp = interrupted_sp(uc), lo = (uintptr_t)t->stack_lo;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (!sp)
        return false;
    if (sp <= lo)
        return lo - sp <= (uintptr_t)16 * GUARD_MAX ||
               (a + frame_room >= sp && a <= sp + frame_room);
    return a < lo && lo - a <= GUARD_MAX && sp - lo < frame_room;
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
    struct weft__vcore *vc = weft__vc();
    char *addr = si->si_addr;
    if (vc) {
        struct weft_uthread *t = vc->current;
        if (!t)
            t = vc->handoff_to; /* a blocking callback on the next one's stack */
        if (t && t->copy && t->rs && addr >= t->map && addr < t->stack_lo)
            overflow_report(t, " (the run stack of stack-copy uthreads)");
        if (t && t->guarded && addr >= t->map && addr < t->stack_lo)
            overflow_report(t, "");
        if (t && signal_frame_overflow(t, si, uc))
            overflow_report(t, " (a signal frame did not fit below the stack pointer)");
        if (t && !t->guarded && !t->copy && canary_overflow(t, si, uc))
            overflow_report(t, " (it had no guard page: memory below it may be corrupt)");
        if (!t && addr >= vc->stack_lo - weft__page_size && addr < vc->stack_lo) {
            static const char msg[] = "weft: vcore context overflowed its stack\n";
            if (syscall(SYS_write, 2, msg, sizeof msg - 1) < 0) {
            }
            signal(SIGABRT, SIG_DFL);
            abort();
        }
    }
    /* Not ours: hand it to whoever had SIGSEGV before, with its mask. */
    if (old_segv.sa_handler == SIG_DFL || old_segv.sa_handler == SIG_IGN) {
        signal(SIGSEGV, SIG_DFL); /* re-executing the access kills us as usual */
        return;
    }
    sigset_t saved;
    weft__sys.pthread_sigmask(SIG_BLOCK, &old_segv.sa_mask, &saved);
    if (old_segv.sa_flags & SA_SIGINFO)
        old_segv.sa_sigaction(sig, si, uc);
    else
        old_segv.sa_handler(sig);
    weft__sys.pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

static void canary_check(struct weft_uthread *t)
{
    const uint64_t *c = (const uint64_t *)(void *)t->stack_lo;
    uint64_t any = 0;
    for (int i = 0; i < CANARY_WORDS; i++)
        any |= c[i];
    if (any)
        overflow_report(t, " (canary overwritten; memory below it may be corrupt)");
}

void weft__stack_leave(struct weft__vcore *vc, struct weft_uthread *t)
{
    if (t->copy) {
        weft__sc_leave(vc, t);
        return;
    }
    /* The canary lies a stack's size below the lines a switch touches (the
     * struct's first line, the saved registers), in another page: reading
     * it, and stack_lo from the struct's fifth line, cost two misses and a
     * TLB walk a switch (~190 ns in a VM, ring N=8 with 10^4 canary stacks
     * on one vcore: 2.0 -> 1.4 M msg/s). So it is read at every
     * CANARY_EVERY-th switch out of the uthread, and before its stack is
     * freed (weft__uthread_free): an overflow is reported within
     * CANARY_EVERY switches instead of at the next one. */
    if ((++t->canary_tick % CANARY_EVERY) == 0)
        canary_check(t);
}

/* ---- setup ---------------------------------------------------------------------- */

static long read_max_map_count(void)
{
    long v = 65530;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = 65530;
        fclose(f);
    }
    return v;
}

int weft__stack_init(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    if (ps > 0)
        weft__page_size = (size_t)ps;
    long long v = weft__cfg_num(WEFT__CFG_MAX_GUARDED_STACKS, -1);
    guard_budget = v >= 0 ? v : read_max_map_count() / 4; /* 2 VMAs each, half the budget */
    atomic_store_explicit(&budget_warned, false, memory_order_seq_cst);
    unsigned long minsig = getauxval(AT_MINSIGSTKSZ);
    frame_room = (minsig > 2048 ? minsig : 2048) + 4096;
    if (!segv_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = segv_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSEGV, &sa, &old_segv) == 0)
            segv_installed = true;
    }
    return 0;
}

static void unmap(struct weft_uthread *t)
{
    bool guarded = t->guarded;
    if (munmap(t->map, t->map_size) == 0 && guarded)
        atomic_fetch_sub_explicit(&guarded_live, 1, memory_order_seq_cst);
}

static void unmap_list(struct weft_uthread *t)
{
    while (t) {
        struct weft_uthread *next = t->cache_next;
        unmap(t);
        t = next;
    }
}

void weft__stack_fini(void)
{
    weft__spin_lock(&global_cache.lock);
    struct weft_uthread *l = global_cache.list;
    global_cache.list = NULL;
    global_cache.n = 0;
    weft__spin_unlock(&global_cache.lock);
    unmap_list(l);
}

void weft__stack_forked(void)
{
    /* The cached stacks stay mapped (a thread may have been moving one). */
    global_cache.lock = 0;
    global_cache.list = NULL;
    global_cache.n = 0;
}

int weft__stack_vcore_init(struct weft__vcore *vc)
{
    vc->stacks.list = NULL;
    vc->stacks.n = 0;
    return 0;
}

void weft__stack_vcore_fini(struct weft__vcore *vc)
{
    unmap_list(vc->stacks.list);
    vc->stacks.list = NULL;
    vc->stacks.n = 0;
}

/* ---- allocation ------------------------------------------------------------------ */

static bool take_guard(void)
{
    if (atomic_fetch_add_explicit(&guarded_live, 1, memory_order_seq_cst) < guard_budget)
        return true;
    atomic_fetch_sub_explicit(&guarded_live, 1, memory_order_seq_cst);
    if (!atomic_exchange_explicit(&budget_warned, true, memory_order_seq_cst))
        fprintf(stderr,
                "weft: %ld guarded uthread stacks reached weft's share of vm.max_map_count; "
                "new stacks get no guard page and are checked with a canary\n",
                guard_budget);
    return false;
}

/* guard_for() sizes the PROT_NONE guard below a stack of size bytes with
 * the stack: a quarter of it, between a page and 64 KiB, so small stacks do
 * not pay 64 KiB of address space each (16 KiB stacks: 4 KiB guards). Code
 * built with -fstack-clash-protection touches every page of a large frame
 * in order, so a page-sized guard catches it on x86-64; aarch64 compilers
 * probe assuming a 64 KiB guard, so that is what aarch64 gets. */
static size_t guard_for(size_t size)
{
#if defined(__aarch64__)
    size_t g = GUARD_MAX;
#else
    size_t g = size / 4 < GUARD_MAX ? size / 4 : GUARD_MAX;
#endif
    g = (g + weft__page_size - 1) & ~(weft__page_size - 1);
    return g > weft__page_size ? g : weft__page_size;
}

static struct weft_uthread *map_new(size_t size)
{
    bool guarded = take_guard();
    size_t guard = guard_for(size);
    size_t map_size = size + (guarded ? guard : 0);
    char *m = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) {
        if (guarded)
            atomic_fetch_sub_explicit(&guarded_live, 1, memory_order_seq_cst);
        return NULL;
    }
    if (guarded && mprotect(m, guard, PROT_NONE) != 0) {
        atomic_fetch_sub_explicit(&guarded_live, 1, memory_order_seq_cst); /* out of mappings: live without the guard */
        guarded = false;
    }
    char *lo = m + (guarded ? guard : 0);
    size_t hdr = (sizeof(struct weft_uthread) + WEFT__CACHELINE - 1) & ~(size_t)(WEFT__CACHELINE - 1);
    /* Cache colouring: stacks are mapped at page-aligned (often 2 MiB-
     * aligned) addresses, so the struct and the hottest stack lines of every
     * uthread would fall into the same cache sets. Shift each by a different
     * number of lines, at most half a page, so that the struct and the
     * frames of a uthread parked at a shallow depth share one page. */
    static _Atomic unsigned colour;
    size_t shift = (atomic_fetch_add_explicit(&colour, 1, memory_order_relaxed) % 31) * WEFT__CACHELINE;
    struct weft_uthread *t = (struct weft_uthread *)(void *)(m + map_size - hdr - shift);
    memset(t, 0, sizeof *t);
    t->map = m;
    t->map_size = map_size;
    t->stack_lo = lo;
    t->stack_size = (size_t)((char *)t - lo);
    t->asked_size = size;
    t->guarded = guarded;
    return t;
}

/* CACHE_BATCH shells move between a vcore's cache and the global one at a
 * time: a vcore that spawns what another one runs to its end (stealing
 * spreads a batch of spawns) takes the global lock once per batch. */
#define CACHE_BATCH 32

/* shell_prefetch() asks for the lines of cached shell t that a spawn
 * writes (the struct but its stack fields, and the initial frame below it)
 * one spawn ahead: a shell whose last uthread ran on another vcore (a
 * spawner whose children are stolen) has them there, and the spawn would
 * otherwise wait for each in turn. */
static inline void shell_prefetch(struct weft_uthread *t)
{
    char *p = (char *)t;
    __builtin_prefetch(p - WEFT__CACHELINE, 1);
    for (size_t o = 0; o < offsetof(struct weft_uthread, map); o += WEFT__CACHELINE)
        __builtin_prefetch(p + o, 1);
    __builtin_prefetch(&t->name, 1);
}

struct weft_uthread *weft__uthread_alloc(size_t size)
{
    struct weft_uthread *t = NULL;
    if (size == weft__rt.stack_size) {
        struct weft__vcore *vc = weft__vc();
        if (vc && !vc->stacks.list) { /* refill from the global cache */
            weft__spin_lock(&global_cache.lock);
            while (global_cache.list && vc->stacks.n < CACHE_BATCH) {
                struct weft_uthread *c = global_cache.list;
                global_cache.list = c->cache_next;
                global_cache.n--;
                c->cache_next = vc->stacks.list;
                vc->stacks.list = c;
                vc->stacks.n++;
            }
            weft__spin_unlock(&global_cache.lock);
        }
        if (vc && vc->stacks.list) {
            t = vc->stacks.list;
            vc->stacks.list = t->cache_next;
            vc->stacks.n--;
            if (vc->stacks.list)
                shell_prefetch(vc->stacks.list);
        } else if (!vc) {
            weft__spin_lock(&global_cache.lock);
            t = global_cache.list;
            if (t) {
                global_cache.list = t->cache_next;
                global_cache.n--;
            }
            weft__spin_unlock(&global_cache.lock);
        }
    }
    if (!t)
        return map_new(size);
    t->cache_next = NULL;
    return t;
}

/* stack_free() is weft__uthread_free() of a uthread with a stack of its
 * own: to this vcore's cache, the global one, or the kernel. */
static WEFT__NOINLINE void stack_free(struct weft_uthread *t)
{
    bool running = atomic_load_explicit(&weft__rt.state, memory_order_relaxed) == WEFT__RUNNING_RT;
    if (running && t->asked_size == weft__rt.stack_size) {
        struct weft__vcore *vc = weft__vc();
        if (vc && vc->stacks.n == VCORE_CACHE_MAX) { /* full: a batch to the global cache */
            weft__spin_lock(&global_cache.lock);
            while (vc->stacks.n > VCORE_CACHE_MAX - CACHE_BATCH &&
                   global_cache.n < GLOBAL_CACHE_MAX) {
                struct weft_uthread *c = vc->stacks.list;
                vc->stacks.list = c->cache_next;
                vc->stacks.n--;
                c->cache_next = global_cache.list;
                global_cache.list = c;
                global_cache.n++;
            }
            weft__spin_unlock(&global_cache.lock);
        }
        if (vc && vc->stacks.n < VCORE_CACHE_MAX) {
            t->cache_next = vc->stacks.list;
            vc->stacks.list = t;
            vc->stacks.n++;
            return;
        }
        if (!vc) {
            weft__spin_lock(&global_cache.lock);
            bool kept = global_cache.n < GLOBAL_CACHE_MAX;
            if (kept) {
                t->cache_next = global_cache.list;
                global_cache.list = t;
                global_cache.n++;
            }
            weft__spin_unlock(&global_cache.lock);
            if (kept)
                return;
        }
    }
    unmap(t);
}

void weft__uthread_free(struct weft_uthread *t)
{
    atomic_store_explicit(&t->state, WEFT__FREE, memory_order_relaxed);
    if (t->copy) {
        weft__sc_uthread_free(weft__vc(), t);
        return;
    }
    if (!t->guarded)
        canary_check(t); /* its last switches out may not have read it */
    stack_free(t);
}
