/*
 * config.c — the table of WEFT_* environment variables (config.h).
 *
 * One line per variable: VAR(name, words, min, max, default, meaning). The
 * README's "Environment" table is these lines, in this order (the test
 * config_table prints it and compares); tests/CMakeLists.txt reads the
 * names from the VAR lines below to unset them around every test.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "config.h"

#define VAR(name, words, min, max, dflt, doc) { name, words, min, max, dflt, doc }
#define NUM NULL   /* a number in [min, max] */
#define ANY ""     /* any string (checked by its user) */

const struct weft__cfg_var weft__cfg_vars[WEFT__CFG_N] = {
    [WEFT__CFG_VCORES] =
    VAR("WEFT_VCORES", NUM, 0, 1 << 20, "all",
        "vcores to run (at most the CPUs in the affinity mask; 0 = all)"),
    [WEFT__CFG_STACK_SIZE] =
    VAR("WEFT_STACK_SIZE", NUM, 0, 1 << 30, "256 KiB",
        "default uthread stack, bytes (min 16 KiB, at most 1 GiB; 0 = the default)"),
    [WEFT__CFG_STACK_COPY] =
    VAR("WEFT_STACK_COPY", NUM, 0, 1, "0",
        "`1`: every spawn is a stack-copy uthread unless it asks for `WEFT_STACK_OWN` "
        "(see `<weft/weft.h>` for the rule that comes with it)"),
    [WEFT__CFG_SCHED] =
    VAR("WEFT_SCHED", ANY, 0, 0, "`ws`",
        "scheduler name: `ws`, `fifo`, `prio`, or one registered with `weft_sched_register`"),
    [WEFT__CFG_PRIO_AGING_MS] =
    VAR("WEFT_PRIO_AGING_MS", NUM, 0, 3600000, "0",
        "`prio`: a uthread waiting this long at the head of its level runs at the most "
        "urgent one (0 = never)"),
    [WEFT__CFG_BOARD] =
    VAR("WEFT_BOARD", ANY, 0, 0, "unset",
        "attach to the priority board of this name at `weft_init`"),
    [WEFT__CFG_PREEMPT_US] =
    VAR("WEFT_PREEMPT_US", NUM, 0, 10000000, "0",
        "preemption period in µs (10..10000000, less is taken as 10; 0 = cooperative)"),
    [WEFT__CFG_PREEMPT_TICKER] =
    VAR("WEFT_PREEMPT_TICKER", NUM, 0, 1, "0",
        "`1`: one ticker thread instead of a tick timer per vcore"),
    [WEFT__CFG_PREEMPT_SIGNALS] =
    VAR("WEFT_PREEMPT_SIGNALS", NUM, 0, 1, "1",
        "`0`: the clock sends no signals; only yield-pass code is preempted"),
    [WEFT__CFG_NOTIF_SIGNAL] =
    VAR("WEFT_NOTIF_SIGNAL", NUM, 1, 64, "SIGRTMAX-2",
        "the notification signal (a real-time signal number, SIGRTMIN..SIGRTMAX)"),
    [WEFT__CFG_SPIN_NS] =
    VAR("WEFT_SPIN_NS", NUM, 0, 1000000000, "50000",
        "how long an idle vcore spins before parking, ns"),
    [WEFT__CFG_MUTEX_SPIN] =
    VAR("WEFT_MUTEX_SPIN", NUM, 0, 1000000, "100",
        "spin iterations of a contended mutex before parking (0 = none)"),
    [WEFT__CFG_MAX_GUARDED_STACKS] =
    VAR("WEFT_MAX_GUARDED_STACKS", NUM, 0, 1000000000, "vm.max_map_count / 4",
        "guarded stacks before falling back to canary stacks"),
    [WEFT__CFG_POLLER] =
    VAR("WEFT_POLLER", "epoll|uring|io_uring", 0, 0, "`epoll`",
        "`epoll` or `uring` (io_uring; falls back to epoll, saying so, if refused)"),
    [WEFT__CFG_OFFLOAD_THREADS] =
    VAR("WEFT_OFFLOAD_THREADS", NUM, 1, 4096, "64",
        "most helper threads of the offload pool (fixed at its first use)"),
    [WEFT__CFG_TLS] =
    VAR("WEFT_TLS", "shared|uthread", 0, 0, "`shared`; `uthread` under libweft-pthread",
        "`shared` (the vcore's TLS) or `uthread` (each uthread its own)"),
    [WEFT__CFG_TLS_ARCH_PRCTL] =
    VAR("WEFT_TLS_ARCH_PRCTL", NUM, 0, 1, "0",
        "`1`: load the thread pointer with `arch_prctl` even where `wrfsbase` works "
        "(for the benchmark)"),
};

#define STR_MAX 128

/* The values: written by weft__cfg_load (weft_init, before its vcores
 * start), read by anyone after; the numbers relaxed-atomic, since a mutex
 * may be contended by outside threads during a weft_init. */
static _Atomic long long num[WEFT__CFG_N];
static _Atomic bool isset[WEFT__CFG_N];
static char str[WEFT__CFG_N][STR_MAX];

/* one_of(): word is one of words ('|'-separated). */
static bool one_of(const char *word, const char *words)
{
    size_t n = strlen(word);
    for (const char *w = words; *w;) {
        const char *bar = strchr(w, '|');
        size_t len = bar ? (size_t)(bar - w) : strlen(w);
        if (len == n && strncmp(w, word, n) == 0)
            return true;
        if (!bar)
            break;
        w = bar + 1;
    }
    return false;
}

static bool parse(const struct weft__cfg_var *v, const char *s, long long *out)
{
    if (v->words) {
        if (strlen(s) >= STR_MAX) {
            fprintf(stderr, "weft: ignoring %s=%.32s... (at most %d bytes)\n", v->name, s,
                    STR_MAX - 1);
            return false;
        }
        if (*v->words && !one_of(s, v->words)) {
            fprintf(stderr, "weft: ignoring %s=%s (one of: ", v->name, s);
            for (const char *w = v->words; *w; w++) {
                if (*w == '|')
                    fputs(", ", stderr);
                else
                    fputc(*w, stderr);
            }
            fputs(")\n", stderr);
            return false;
        }
        return true;
    }
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || end == s || x < v->min || x > v->max) {
        fprintf(stderr, "weft: ignoring %s=%s (an integer %lld..%lld)\n", v->name, s, v->min,
                v->max);
        return false;
    }
    *out = x;
    return true;
}

void weft__cfg_load(void)
{
    int saved = errno; /* weft calls leave errno alone */
    for (int i = 0; i < WEFT__CFG_N; i++) {
        const struct weft__cfg_var *v = &weft__cfg_vars[i];
        const char *s = getenv(v->name);
        long long x = 0;
        bool ok = s && *s && parse(v, s, &x);
        if (ok && v->words)
            strcpy(str[i], s);
        atomic_store_explicit(&num[i], x, memory_order_relaxed);
        atomic_store_explicit(&isset[i], ok, memory_order_release);
    }
    errno = saved;
}

long long weft__cfg_num(enum weft__cfg id, long long dflt)
{
    if (!atomic_load_explicit(&isset[id], memory_order_acquire))
        return dflt;
    return atomic_load_explicit(&num[id], memory_order_relaxed);
}

const char *weft__cfg_str(enum weft__cfg id)
{
    return atomic_load_explicit(&isset[id], memory_order_acquire) ? str[id] : NULL;
}

int weft_config_get(const char *name, long long *out)
{
    int i = name ? weft__cfg_find(name) : -1;
    if (i < 0 || weft__cfg_vars[i].words || !out)
        return EINVAL;
    if (!atomic_load_explicit(&isset[i], memory_order_acquire))
        return ENOENT;
    *out = atomic_load_explicit(&num[i], memory_order_relaxed);
    return 0;
}

int weft__cfg_find(const char *name)
{
    for (int i = 0; i < WEFT__CFG_N; i++)
        if (strcmp(weft__cfg_vars[i].name, name) == 0)
            return i;
    return -1;
}
