/*
 * timerlat.c (kernel peer) — how late this machine's timer wakes a thread
 * that sleeps the way weft's ticker does (issue 6, section yieldpass: in
 * flag mode the ticker looks at the vcores twice a quantum, so how late it
 * wakes bounds how late a run is flagged). impl=kernel-timer.
 *
 *   kernel_timerlat [--sleeps N] [--sleep-us P] [--spin-s S]
 *
 * N = 20000 sleeps of P = 50 us (the ticker's sleep at a 100 us quantum).
 * The sleeper (main) is pinned to the second CPU of the affinity mask, sets
 * its timer slack to 1 ns (prctl(PR_SET_TIMERSLACK)) and sleeps in
 * FUTEX_WAIT_BITSET_PRIVATE on a word nobody changes, with an absolute
 * CLOCK_MONOTONIC deadline of now + P, as the ticker does; the lateness of
 * a wake-up is the clock read after the call returned minus the deadline (a
 * return before the deadline waits again for the same deadline). Meanwhile a
 * spinner thread pinned to the first CPU of the mask spins on a stop flag,
 * as weft's one busy vcore does beside the ticker, reading the clock each
 * time round: the longest gap between two of its reads is the longest time
 * its CPU stopped running it (the guest kernel or the hypervisor took the
 * CPU; a thread that never sleeps cannot be late any other way). The
 * spinner keeps on for S = 5 s in all (main sleeps out the rest after its
 * sleeps): such stops are rarer than a timer's lateness.
 *
 * The run stops after N sleeps or TL_MAX_NS, whichever comes first, and
 * prints
 *
 *   RESULT bench=yieldpass impl=kernel-timer param=timer,sleep=<P>us
 *          value=<max us> unit=us p50=<us> p99=<us> p999=<us> sleeps=<n>
 *          total_s=<s> cpu=<sleeper's CPU> spin_max=<us> spin_over200=<k>
 *          spin_s=<s>
 *
 * (exact nearest-rank percentiles of the n wake-ups' lateness; spin_max is
 * the spinner's longest gap between clock reads, spin_over200 how many of
 * its gaps exceeded 200 us).
 *
 * Exit: 0 measured, 1 FAIL (a failed call), 2 bad command line, 77 fewer
 * than two CPUs in the affinity mask.
 */
#include "bench.h"
#include "opts.h"

#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TL_MAX_NS (3000000000ull)   /* a run's bound, whatever N and P */

static _Atomic int spinning;        /* the spinner: 1 running, 0 told to stop */
static uint32_t word;               /* the futex word; stays 0 */
static uint64_t spin_max_ns, spin_over200; /* the spinner's gaps; read after the join */

static void *spinner(void *arg)
{
    bench_pin_self((int)(intptr_t)arg);
    atomic_store(&spinning, 1);
    uint64_t last = bench_now_ns();
    while (atomic_load_explicit(&spinning, memory_order_relaxed)) {
        uint64_t now = bench_now_ns(), gap = now - last;
        if (gap > spin_max_ns)
            spin_max_ns = gap;
        spin_over200 += gap > 200000u;
        last = now;
    }
    return NULL;
}

/* sleep_until() waits on the futex word until the deadline (absolute
 * CLOCK_MONOTONIC ns) has passed and returns the time it woke. */
static uint64_t sleep_until(uint64_t deadline)
{
    struct timespec ts = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };
    for (;;) {
        if (syscall(SYS_futex, &word, FUTEX_WAIT_BITSET_PRIVATE, 0, &ts, NULL,
                    FUTEX_BITSET_MATCH_ANY) != 0 && errno != ETIMEDOUT && errno != EINTR)
            bench_fail("FUTEX_WAIT_BITSET: %s", strerror(errno));
        uint64_t now = bench_now_ns();
        if (now >= deadline)
            return now;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* rank() is the nearest-rank q-quantile of the n sorted values. */
static double rank(const uint64_t *v, uint64_t n, double q)
{
    uint64_t k = (uint64_t)(q * (double)n + 0.999999);
    return (double)v[(k ? k : 1) - 1] / 1e3;
}

int main(int argc, char **argv)
{
    uint64_t sleeps = 20000, sleep_us = 50, spin_s = 5;
    struct bench_opt opts[] = {
        { "--sleeps", &sleeps, 1, 1000000 },
        { "--sleep-us", &sleep_us, 1, 1000000 },
        { "--spin-s", &spin_s, 0, 60 },
    };
    bench_opts_parse(argc, argv, "[--sleeps N] [--sleep-us P] [--spin-s S]", opts,
                     sizeof opts / sizeof opts[0]);
    int cpu[2], found = bench_affinity_cpus(cpu, 2);
    if (found < 2) {
        fprintf(stderr, "SKIP needs two CPUs in the affinity mask (a spinner and the sleeper)\n");
        return 77;
    }
    uint64_t *late = malloc(sleeps * sizeof *late);
    if (!late)
        bench_fail("timerlat: no memory for %llu wake-ups", (unsigned long long)sleeps);

    pthread_t spin;
    bench_check_rc(pthread_create(&spin, NULL, spinner, (void *)(intptr_t)cpu[0]));
    while (!atomic_load(&spinning))
        ;
    bench_pin_self(cpu[1]);
    if (prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) != 0)
        bench_fail("prctl(PR_SET_TIMERSLACK): %s", strerror(errno));

    uint64_t n = 0, t0 = bench_now_ns(), now = t0;
    while (n < sleeps && now - t0 < TL_MAX_NS) {
        uint64_t deadline = now + sleep_us * 1000u;
        now = sleep_until(deadline);
        late[n++] = now - deadline;
    }
    uint64_t spin_end = t0 + spin_s * 1000000000u;
    while (bench_now_ns() < spin_end) {
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    atomic_store(&spinning, 0);
    bench_check_rc(pthread_join(spin, NULL));
    double spun_s = (double)(bench_now_ns() - t0) / 1e9;

    qsort(late, n, sizeof *late, cmp_u64);
    bench_note("kernel-timer", "sleeper pinned to CPU %d, timer slack 1 ns; a spinner on CPU %d; "
               "%llu of %llu sleeps of %llu us in %.2f s", cpu[1], cpu[0],
               (unsigned long long)n, (unsigned long long)sleeps, (unsigned long long)sleep_us,
               (double)(now - t0) / 1e9);
    printf("RESULT bench=yieldpass impl=kernel-timer param=timer,sleep=%lluus value=%.3f unit=us "
           "p50=%.3f p99=%.3f p999=%.3f sleeps=%llu total_s=%.3f cpu=%d spin_max=%.3f "
           "spin_over200=%llu spin_s=%.3f\n",
           (unsigned long long)sleep_us, (double)late[n - 1] / 1e3, rank(late, n, 0.50),
           rank(late, n, 0.99), rank(late, n, 0.999), (unsigned long long)n,
           (double)(now - t0) / 1e9, cpu[1], (double)spin_max_ns / 1e3,
           (unsigned long long)spin_over200, spun_s);
    fflush(stdout);
    free(late);
    return 0;
}
