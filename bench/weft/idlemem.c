/*
 * idlemem.c — memory per idle uthread: T uthreads each blocked in
 * weft_park(); resident-set growth per uthread and creation time per
 * uthread (method and output: bench/common/idlemem.h, bench/README.md
 * "Memory per idle thread").
 *
 *   weft_idlemem --threads T            (vcores: WEFT_VCORES; the section runs 1)
 *
 * impl=weft with ordinary uthreads, impl=weft-stackcopy when stack copying is
 * the process default (WEFT_STACK_COPY=1 in the environment): the name comes
 * from the runtime's counters, not from the environment. When main reads
 * them, every uthread's stack must have been copied out (weft_stats'
 * stack_copies >= T - vcores: a uthread counts its arrival before it parks,
 * so up to one per vcore may not have switched out yet: stack-copy) or none
 * at all (ordinary); anything between is a FAIL. The stack-copy line also
 * carries stack_copies and copy_bytes_per_thread (the bytes those copies
 * held, / T).
 *
 * Uthreads get the default attributes (weft_spawn(.., NULL, ..): the runtime's
 * default stack, 256 KiB unless WEFT_STACK_SIZE says otherwise, mapped
 * lazily with a guard page below it while vm.max_map_count leaves room, past
 * that a canary). A spawner uthread creates all T, so that creating them and
 * running them up to their park happen on the vcores, as they would in a
 * program written for weft; each uthread counts its arrival and parks, the
 * last to arrive records the time and tells main (a kernel thread outside
 * the runtime, waiting on a weft_wg_t). Main reads the resident set, sets
 * the release flag and weft_unpark()s every uthread; each one, woken, counts
 * its run in its own slot and returns its index + 1, which main checks when
 * it joins it.
 *
 * Exit: 0 measured, 1 FAIL, 2 bad command line, 75 a spawn failed (LIMIT).
 */
#include "idlemem.h"

#include <stdatomic.h>
#include <unistd.h>
#include <weft/event.h>
#include <weft/sched.h>
#include <weft/weft.h>
#include <weft/sync.h>

static struct {
    size_t threads;
    weft_t *h;                     /* the uthreads, for unpark and join */
    uint32_t *ran;                 /* ran[i]: times uthread i went past its park */
    atomic_size_t arrived;         /* uthreads that reached their park */
    atomic_int released;           /* set by main before it unparks anyone */
    _Atomic uint64_t t_first, t_last;
    weft_wg_t all_arrived;         /* 1 until the last uthread arrives */
} g;

static void *idle_thread(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    if (atomic_fetch_add_explicit(&g.arrived, 1, memory_order_relaxed) + 1 == g.threads) {
        atomic_store(&g.t_last, bench_now_ns());
        weft_wg_done(&g.all_arrived);
    }
    /* Blocked here until main releases it; a park that returns for any
     * other reason (a stray token) parks again. */
    while (!atomic_load_explicit(&g.released, memory_order_acquire))
        bench_check_rc(weft_park());
    g.ran[i]++;
    return (void *)(uintptr_t)(i + 1);
}

static void *spawner(void *unused)
{
    (void)unused;
    atomic_store(&g.t_first, bench_now_ns());
    for (size_t i = 0; i < g.threads; i++) {
        int rc = weft_spawn(&g.h[i], NULL, idle_thread, (void *)(uintptr_t)i);
        if (rc) {
            fflush(stdout);
            fprintf(stderr, "LIMIT weft_spawn: %s after %zu of %zu threads\n", strerror(rc), i,
                    g.threads);
            /* The spawned uthreads are parked for good: leave without
             * weft_shutdown(), which would wait for them. */
            _exit(75);
        }
    }
    return NULL;
}

/* copies_so_far() sums every vcore's stack copies and the bytes they held. */
static void copies_so_far(uint64_t *copies, uint64_t *bytes)
{
    *copies = *bytes = 0;
    for (int v = 0; v < weft_num_vcores(); v++) {
        struct weft_vcore_stats st;
        bench_check_rc(weft_stats(v, &st));
        *copies += st.stack_copies;
        *bytes += st.stack_copy_bytes;
    }
}

int main(int argc, char **argv)
{
    const char *impl = "weft";
    g.threads = idlemem_threads(argc, argv);
    g.h = idlemem_alloc(g.threads, sizeof *g.h, g.threads);
    g.ran = idlemem_alloc(g.threads, sizeof *g.ran, g.threads);

    int rc = weft_init(NULL); /* vcores: WEFT_VCORES or all */
    if (rc)
        bench_fail("weft_init: %s", strerror(rc));
    bench_check_rc(weft_wg_add(&g.all_arrived, 1));

    struct idlemem_mem before = idlemem_read();
    weft_t sp;
    bench_check_rc(weft_spawn(&sp, NULL, spawner, NULL));
    bench_check_rc(weft_wg_wait(&g.all_arrived));
    struct idlemem_mem after = idlemem_read();
    uint64_t create_ns = atomic_load(&g.t_last) - atomic_load(&g.t_first);
    uint64_t copies, copied;
    char extra[96] = "";
    copies_so_far(&copies, &copied);
    if (copies && copies + (uint64_t)weft_num_vcores() >= g.threads) {
        impl = "weft-stackcopy";
        snprintf(extra, sizeof extra, " stack_copies=%llu copy_bytes_per_thread=%.0f",
                 (unsigned long long)copies, (double)copied / (double)g.threads);
    } else if (copies != 0) {
        bench_fail("weft idlemem: %llu stack copies with %zu uthreads parked: some are "
                   "stack-copy uthreads and some are not", (unsigned long long)copies, g.threads);
    }

    for (size_t i = 0; i < g.threads; i++)
        if (g.ran[i])
            bench_fail("%s idlemem: uthread %zu went past its park before it was woken", impl, i);
    atomic_store_explicit(&g.released, 1, memory_order_release);
    bench_check_rc(weft_join(sp, NULL));
    for (size_t i = 0; i < g.threads; i++)
        bench_check_rc(weft_unpark(g.h[i]));
    for (size_t i = 0; i < g.threads; i++) {
        void *res;
        bench_check_rc(weft_join(g.h[i], &res));
        if ((uintptr_t)res != i + 1)
            bench_fail("%s idlemem: uthread %zu returned %zu", impl, i, (size_t)(uintptr_t)res);
    }
    weft_shutdown();
    idlemem_check(impl, g.ran, g.threads);
    idlemem_report(impl, g.threads, before, after, create_ns, extra);
    free(g.h);
    free(g.ran);
    return 0;
}
