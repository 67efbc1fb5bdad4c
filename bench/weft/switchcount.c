/*
 * switchcount.c — the switch paths under an instruction counter
 *   switchcount park N    two uthreads hand a turn back and forth N times
 *                         through weft_park() / weft_unpark(): 2N hand-offs,
 *                         each an unpark of the other and a park;
 *   switchcount sem N     the same through two semaphores (weft_sem_post()
 *                         of the other's, weft_sem_wait() on its own): 2N
 *                         hand-offs, each a post and a wait that blocks;
 *   switchcount yield N   two uthreads each call weft_yield() N times: 2N
 *                         yields, each handing the vcore to the other;
 *   switchcount park-timer N, sem-timer N, yield-timer N: the same with an
 *                         alarm armed on the vcore all along, an hour away
 *                         (a server's pending timeouts).
 * One vcore. Both uthreads are spawned by a parent uthread (as an
 * application's are once it runs), so they start on the vcore's own queues.
 * Not timed: bench/switch-counts.sh runs it under callgrind at N and 2N
 * and divides the difference by the extra hand-offs or yields, so start-up
 * and shutdown cancel out (the figures of issue 21: a park + unpark
 * hand-off in at most 90 instructions).
 *
 * It checks what it counts: after each of its parks, a uthread sees exactly
 * one more turn by the other (a park that returned without an unpark, or a
 * lost wake-up, fails the run), and every yield handed the vcore over.
 */
#include "bench.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <weft/sync.h>
#include <weft/time.h>
#include <weft/weft.h>

static long n;
static weft_t ta, tb;
static atomic_long turns;           /* park: each side adds 1 per turn */
static _Atomic(weft_t) last;        /* yield: the uthread that ran last */
static atomic_long switched;        /* yield: yields after which the other had run */

static void *park_b(void *unused)
{
    (void)unused;
    for (long i = 0; i < n; i++) {
        bench_check_rc(weft_park());
        if (atomic_load_explicit(&turns, memory_order_relaxed) != 2 * i + 1)
            bench_fail("switchcount park: B's turn %ld came after %ld turns", i,
                       atomic_load(&turns));
        atomic_fetch_add_explicit(&turns, 1, memory_order_relaxed);
        bench_check_rc(weft_unpark(ta));
    }
    return NULL;
}

static void *park_a(void *unused)
{
    (void)unused;
    for (long i = 0; i < n; i++) {
        atomic_fetch_add_explicit(&turns, 1, memory_order_relaxed);
        bench_check_rc(weft_unpark(tb));
        bench_check_rc(weft_park());
        if (atomic_load_explicit(&turns, memory_order_relaxed) != 2 * i + 2)
            bench_fail("switchcount park: A's turn %ld came after %ld turns", i,
                       atomic_load(&turns));
    }
    return NULL;
}

static weft_sem_t sem_a = WEFT_SEM_INIT(0), sem_b = WEFT_SEM_INIT(0);

static void *sem_b_fn(void *unused)
{
    (void)unused;
    for (long i = 0; i < n; i++) {
        bench_check_rc(weft_sem_wait(&sem_b));
        if (atomic_load_explicit(&turns, memory_order_relaxed) != 2 * i + 1)
            bench_fail("switchcount sem: B's turn %ld came after %ld turns", i, atomic_load(&turns));
        atomic_fetch_add_explicit(&turns, 1, memory_order_relaxed);
        bench_check_rc(weft_sem_post(&sem_a));
    }
    return NULL;
}

static void *sem_a_fn(void *unused)
{
    (void)unused;
    for (long i = 0; i < n; i++) {
        atomic_fetch_add_explicit(&turns, 1, memory_order_relaxed);
        bench_check_rc(weft_sem_post(&sem_b));
        bench_check_rc(weft_sem_wait(&sem_a));
        if (atomic_load_explicit(&turns, memory_order_relaxed) != 2 * i + 2)
            bench_fail("switchcount sem: A's turn %ld came after %ld turns", i, atomic_load(&turns));
    }
    return NULL;
}

static void *yielder(void *unused)
{
    (void)unused;
    weft_t me = weft_self();
    for (long i = 0; i < n; i++) {
        weft_yield();
        if (atomic_exchange_explicit(&last, me, memory_order_relaxed) != me)
            atomic_fetch_add_explicit(&switched, 1, memory_order_relaxed);
    }
    return NULL;
}

static void never(struct weft_alarm *a)
{
    (void)a;
    bench_fail("switchcount: the alarm an hour away fired");
}

static void *parent(void *mode)
{
    struct weft_alarm far;
    bool timer = strstr(mode, "-timer") != NULL;
    if (timer) {
        weft_alarm_init(&far, never);
        bench_check_rc(weft_alarm_set_rel(&far, 3600ull * 1000000000ull));
        bench_check_rc(weft_alarm_start(&far));
    }
    if (strncmp(mode, "park", 4) == 0) {
        bench_check_rc(weft_spawn(&tb, NULL, park_b, NULL));
        bench_check_rc(weft_spawn(&ta, NULL, park_a, NULL));
    } else if (strncmp(mode, "sem", 3) == 0) {
        bench_check_rc(weft_spawn(&tb, NULL, sem_b_fn, NULL));
        bench_check_rc(weft_spawn(&ta, NULL, sem_a_fn, NULL));
    } else {
        bench_check_rc(weft_spawn(&ta, NULL, yielder, NULL));
        bench_check_rc(weft_spawn(&tb, NULL, yielder, NULL));
    }
    bench_check_rc(weft_join(ta, NULL));
    bench_check_rc(weft_join(tb, NULL));
    if (timer && !weft_alarm_stop(&far))
        bench_fail("switchcount: the alarm an hour away was not armed at the end");
    return NULL;
}

int main(int argc, char **argv)
{
    static const char *const modes[] = { "park", "sem", "yield", "park-timer", "sem-timer",
                                         "yield-timer" };
    bool known = false;
    for (size_t i = 0; argc == 3 && i < sizeof modes / sizeof modes[0]; i++)
        known |= strcmp(argv[1], modes[i]) == 0;
    if (!known || (n = atol(argv[2])) < 1) {
        fprintf(stderr, "usage: %s park|sem|yield[-timer] N   (N >= 1)\n", argv[0]);
        return 2;
    }
    bool yield = strncmp(argv[1], "yield", 5) == 0;
    struct weft_config cfg = { .vcores = 1 };
    bench_check_rc(weft_init(&cfg));
    weft_t p;
    bench_check_rc(weft_spawn(&p, NULL, parent, argv[1]));
    bench_check_rc(weft_join(p, NULL));
    if (!yield && atomic_load(&turns) != 2 * n)
        bench_fail("switchcount %s: %ld turns, %ld expected", argv[1], atomic_load(&turns), 2 * n);
    /* The first yield of each may find the other not started yet. */
    if (yield && atomic_load(&switched) < 2 * n - 2)
        bench_fail("switchcount yield: %ld of %ld yields handed the vcore over",
                   atomic_load(&switched), 2 * n);
    weft_shutdown();
    printf("switchcount %s %ld: ok\n", argv[1], n);
    return 0;
}
