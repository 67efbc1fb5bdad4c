/*
 * idlemem.c (kernel peer) — memory per idle pthread: T pthreads each blocked
 * in sem_wait() (a futex wait); resident-set growth per thread and creation
 * time per thread (method and output: bench/common/idlemem.h,
 * bench/README.md "Memory per idle thread"). impl=pthread.
 *
 *   kernel_idlemem --threads T
 *
 * pthread_create() with default attributes, as a user has them: an 8 MiB
 * stack (RLIMIT_STACK) that is only reserved, so the resident set holds what
 * a thread touched (its descriptor, TLS and the top of its stack), plus a
 * guard page. Unpinned. Each thread counts its arrival and waits on one
 * shared semaphore; the last to arrive records the time and posts the
 * semaphore main waits on. Main reads the resident set, sets the release flag
 * and posts the shared semaphore T times; each thread, woken, counts its run
 * in its own slot and returns its index + 1, which main checks at the join.
 *
 * What the resident set does not show: the kernel's side of a thread (its
 * kernel stack, 16 KiB on x86-64, task_struct and the rest). The program
 * adds the growth of /proc/meminfo's KernelStack (system-wide: other
 * processes' threads count too) as kstack_per_thread.
 *
 * The kernel's limits stop it (pid_max and threads-max, vm.max_map_count: a
 * stack and its guard are two mappings, RLIMIT_NPROC): a failed
 * pthread_create() prints a NOTE with what the k threads created so far
 * cost, then "LIMIT pthread_create: <error> after k of T threads" on stderr,
 * and exits 75 (the k threads are blocked in sem_wait: exit() ends them).
 *
 * Exit: 0 measured, 1 FAIL, 2 bad command line, 75 thread creation failed.
 */
#include "idlemem.h"

#include <semaphore.h>
#include <stdatomic.h>

static struct {
    size_t threads;
    pthread_t *tids;
    uint32_t *ran;                 /* ran[i]: times thread i went past its wait */
    atomic_size_t arrived;
    atomic_int released;
    _Atomic uint64_t t_last;
    sem_t all_arrived;             /* posted by the last thread to arrive */
    sem_t wake;                    /* every thread waits here */
} g;

static void sem_wait_intr(sem_t *s)
{
    while (sem_wait(s) != 0)
        if (errno != EINTR)
            bench_fail("sem_wait: %s", strerror(errno));
}

static void *idle_thread(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    if (atomic_fetch_add_explicit(&g.arrived, 1, memory_order_relaxed) + 1 == g.threads) {
        atomic_store(&g.t_last, bench_now_ns());
        sem_post(&g.all_arrived);
    }
    do
        sem_wait_intr(&g.wake);
    while (!atomic_load_explicit(&g.released, memory_order_acquire));
    g.ran[i]++;
    return (void *)(uintptr_t)(i + 1);
}

/* kernel_stack() is /proc/meminfo's KernelStack in bytes (0 if unreadable). */
static uint64_t kernel_stack(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "KernelStack: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kib * 1024;
}

int main(int argc, char **argv)
{
    const char *impl = "pthread";
    g.threads = idlemem_threads(argc, argv);
    g.tids = idlemem_alloc(g.threads, sizeof *g.tids, g.threads);
    g.ran = idlemem_alloc(g.threads, sizeof *g.ran, g.threads);
    if (sem_init(&g.all_arrived, 0, 0) || sem_init(&g.wake, 0, 0))
        bench_fail("sem_init: %s", strerror(errno));

    struct idlemem_mem before = idlemem_read();
    uint64_t kstack0 = kernel_stack();
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < g.threads; i++) {
        int rc = pthread_create(&g.tids[i], NULL, idle_thread, (void *)(uintptr_t)i);
        if (rc) {
            /* Wait (a little) for the i created to block, then say what they cost. */
            for (int w = 0; w < 2000 && atomic_load(&g.arrived) < i; w++)
                usleep(1000);
            struct idlemem_mem now = idlemem_read();
            bench_note(impl, "stopped after %zu of %zu threads: %s; the %zu cost %.0f B/thread "
                       "resident, %.0f B/thread kernel stack", i, g.threads, strerror(rc), i,
                       i ? ((double)now.rss - (double)before.rss) / (double)i : 0.0,
                       i ? ((double)kernel_stack() - (double)kstack0) / (double)i : 0.0);
            fprintf(stderr, "LIMIT pthread_create: %s after %zu of %zu threads\n", strerror(rc),
                    i, g.threads);
            exit(75);
        }
    }
    sem_wait_intr(&g.all_arrived);
    struct idlemem_mem after = idlemem_read();
    uint64_t kstack1 = kernel_stack();
    uint64_t create_ns = atomic_load(&g.t_last) - t0;

    for (size_t i = 0; i < g.threads; i++)
        if (g.ran[i])
            bench_fail("%s idlemem: thread %zu went past its wait before it was woken", impl, i);
    atomic_store_explicit(&g.released, 1, memory_order_release);
    for (size_t i = 0; i < g.threads; i++)
        if (sem_post(&g.wake))
            bench_fail("sem_post: %s", strerror(errno));
    for (size_t i = 0; i < g.threads; i++) {
        void *res;
        bench_check_rc(pthread_join(g.tids[i], &res));
        if ((uintptr_t)res != i + 1)
            bench_fail("%s idlemem: thread %zu returned %zu", impl, i, (size_t)(uintptr_t)res);
    }
    idlemem_check(impl, g.ran, g.threads);
    char extra[64];
    snprintf(extra, sizeof extra, " kstack_per_thread=%.0f",
             ((double)kstack1 - (double)kstack0) / (double)g.threads);
    idlemem_report(impl, g.threads, before, after, create_ns, extra);
    free(g.tids);
    free(g.ran);
    return 0;
}
