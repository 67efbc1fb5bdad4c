/*
 * mutex.c (kernel peer) — contended pthread_mutex_t: 4 pthreads (not pinned)
 * each take the lock n times around the same short critical section as
 * bench/weft/mutex.c. Two kinds: kind=normal (PTHREAD_MUTEX_NORMAL, glibc
 * parks at once) and kind=adaptive (PTHREAD_MUTEX_ADAPTIVE_NP, glibc spins a
 * little first). Value: wall time / total acquisitions. Counter and sum are
 * checked at the end.
 */
#include "bench.h"

#include <stdatomic.h>

#define NTHREADS 4

static pthread_mutex_t lock;
static uint64_t counter;        /* guarded by lock */
static uint64_t sum;            /* guarded by lock */
static pthread_barrier_t start;
static atomic_uint_fast64_t t_start;

static void *locker(void *arg)
{
    uint64_t n = (uint64_t)(uintptr_t)arg;
    if (pthread_barrier_wait(&start) == PTHREAD_BARRIER_SERIAL_THREAD)
        atomic_store(&t_start, bench_now_ns());
    for (uint64_t i = 0; i < n; i++) {
        bench_check_rc(pthread_mutex_lock(&lock));
        counter++;
        sum += i;
        bench_check_rc(pthread_mutex_unlock(&lock));
    }
    return NULL;
}

static uint64_t run_mutex(void *unused, uint64_t n)
{
    (void)unused;
    pthread_t t[NTHREADS];

    counter = sum = 0;
    bench_check_rc(pthread_barrier_init(&start, NULL, NTHREADS));
    for (int i = 0; i < NTHREADS; i++)
        bench_check_rc(pthread_create(&t[i], NULL, locker, (void *)(uintptr_t)n));
    for (int i = 0; i < NTHREADS; i++)
        bench_check_rc(pthread_join(t[i], NULL));
    uint64_t t1 = bench_now_ns();
    pthread_barrier_destroy(&start);
    if (counter != NTHREADS * n || sum != NTHREADS * (n * (n - 1) / 2))
        bench_fail("pthread mutex: counter %llu (want %llu): lost updates",
                   (unsigned long long)counter, (unsigned long long)(NTHREADS * n));
    return t1 - atomic_load(&t_start);
}

int main(void)
{
    static const struct { int kind; const char *param; } kinds[] = {
        { PTHREAD_MUTEX_NORMAL, "threads=4,kind=normal" },
        { PTHREAD_MUTEX_ADAPTIVE_NP, "threads=4,kind=adaptive" },
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        pthread_mutexattr_t a;
        bench_check_rc(pthread_mutexattr_init(&a));
        bench_check_rc(pthread_mutexattr_settype(&a, kinds[k].kind));
        bench_check_rc(pthread_mutex_init(&lock, &a));
        pthread_mutexattr_destroy(&a);
        struct bench_sample s = bench_measure(run_mutex, NULL, 1000, 1u << 28);
        bench_result("mutex", "pthread", kinds[k].param,
                     (double)s.ns / (double)(s.iters * NTHREADS), "ns/lock");
        bench_check_rc(pthread_mutex_destroy(&lock));
    }
    return 0;
}
