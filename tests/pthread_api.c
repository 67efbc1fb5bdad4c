/*
 * pthread_api — <weft/pthread.h>: pthread names become weft calls.
 *
 *  1. create/join/detach/self/equal: results come back, threads are
 *     uthreads (weft_self), join errors (EDEADLK, EINVAL), attributes
 *     (stack size honoured, a caller's stack and SCHED_FIFO refused);
 *  2. static initialisers (normal, recursive, error-checking mutexes, cond,
 *     rwlock, once) work; error-checking relock is EDEADLK, a non-owner's
 *     unlock EPERM; a NORMAL relock with a deadline times out (deadlock);
 *  3. a static mutex and cond shared by main (a kernel thread) and 8
 *     uthreads: every increment counted;
 *  4. timed waits on CLOCK_MONOTONIC and CLOCK_REALTIME conds end on time;
 *  5. rwlock, barrier (one serial thread per phase), spinlock, semaphores
 *     (pshared and sem_open refused);
 *  6. keys with destructors at pthread_exit; cleanup handlers run newest
 *     first on pthread_exit and on cancellation; a thread cancelled in
 *     pthread_cond_wait holds the mutex in its handler and joins as
 *     PTHREAD_CANCELED; disabled cancellation waits for enabling;
 *     asynchronous cancellation is ENOTSUP;
 *  7. pthread_kill to a uthread runs the handler on that uthread, at its
 *     next cancellation point, only once unmasked;
 *  8. process-shared and robust objects are refused with ENOTSUP.
 */
#define _GNU_SOURCE
#include <fcntl.h>

#include "check.h" /* before the header: its helpers use the C library's pthreads */
#include <weft/pthread.h>

static void *ret_arg(void *a) { return a; }
static void *sleeper(void *a) { weft_sleep_ns(MS(50)); return a; }
static void *self_is_uthread(void *a)
{
    (void)a;
    CHECK(weft_self() != NULL, "a pthread is not a uthread");
    CHECK(pthread_equal(pthread_self(), (pthread_t)weft_self()), "pthread_self");
    CHECK_RC(pthread_join(pthread_self(), NULL), EDEADLK);
    return (void *)1;
}

static void case_threads(void)
{
    check_phase("threads");
    pthread_t t[50];
    for (intptr_t i = 0; i < 50; i++)
        CHECK_RC(pthread_create(&t[i], NULL, ret_arg, (void *)i), 0);
    for (intptr_t i = 0; i < 50; i++) {
        void *r;
        CHECK_RC(pthread_join(t[i], &r), 0);
        CHECK(r == (void *)i, "join result %p, want %p", r, (void *)i);
    }
    pthread_t s;
    CHECK_RC(pthread_create(&s, NULL, self_is_uthread, NULL), 0);
    void *r;
    CHECK_RC(pthread_join(s, &r), 0);
    CHECK(r == (void *)1, "self check");
    CHECK(!pthread_equal(pthread_self(), s), "main equals a uthread");

    pthread_attr_t a;
    CHECK_RC(pthread_attr_init(&a), 0);
    CHECK_RC(pthread_attr_setdetachstate(&a, 7), EINVAL);
    CHECK_RC(pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED), 0);
    CHECK_RC(pthread_create(&s, &a, sleeper, NULL), 0);
    CHECK_RC(pthread_join(s, NULL), EINVAL); /* detached (and still running) */
    CHECK_RC(pthread_detach(s), EINVAL);
    CHECK_RC(pthread_attr_setdetachstate(&a, PTHREAD_CREATE_JOINABLE), 0);
    CHECK_RC(pthread_attr_setstacksize(&a, 1 << 20), 0);
    size_t sz;
    CHECK_RC(pthread_attr_getstacksize(&a, &sz), 0);
    CHECK(sz == 1 << 20, "stack size %zu", sz);
    CHECK_RC(pthread_create(&s, &a, ret_arg, NULL), 0);
    pthread_attr_t got;
    CHECK_RC(pthread_getattr_np(s, &got), 0);
    CHECK_RC(pthread_attr_getstacksize(&got, &sz), 0);
    CHECK(sz >= 1 << 20, "the uthread's stack is %zu bytes, asked 1 MiB", sz);
    CHECK_RC(pthread_join(s, NULL), 0);
    /* calls that take a pthread_t */
    CHECK_RC(pthread_create(&s, NULL, sleeper, (void *)3), 0);
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(0, &cs);
    CHECK_RC(pthread_setaffinity_np(s, sizeof cs, &cs), 0);
    CHECK_RC(pthread_getaffinity_np(s, sizeof cs, &cs), 0);
    CHECK(CPU_COUNT(&cs) >= 1, "affinity");
    clockid_t ck;
    CHECK_RC(pthread_getcpuclockid(s, &ck), ENOENT);
    CHECK_RC(pthread_tryjoin_np(s, &r), EBUSY);
    struct timespec far;
    clock_gettime(CLOCK_REALTIME, &far);
    far.tv_sec += 10;
    CHECK_RC(pthread_timedjoin_np(s, &r, &far), 0);
    CHECK(r == (void *)3, "timedjoin result");
    CHECK_RC(pthread_create(&s, NULL, ret_arg, NULL), 0);
    CHECK_RC(pthread_join(s, NULL), 0);
    CHECK_RC(pthread_detach(s), ESRCH); /* joined: a default stack stays cached, so this is safe */
    size_t ssz = 1 << 20; /* above PTHREAD_STACK_MIN everywhere (aarch64's is 128 KiB) */
    void *stack = malloc(ssz);
    CHECK(stack != NULL, "malloc");
    CHECK_RC(pthread_attr_setstack(&a, stack, ssz), 0);
    CHECK_RC(pthread_create(&s, &a, ret_arg, NULL), ENOTSUP);
    free(stack);
    CHECK_RC(pthread_attr_destroy(&a), 0);
    CHECK_RC(pthread_attr_init(&a), 0);
    struct sched_param sp = { .sched_priority = 10 };
    CHECK_RC(pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED), 0);
    CHECK_RC(pthread_attr_setschedpolicy(&a, SCHED_FIFO), 0);
    CHECK_RC(pthread_attr_setschedparam(&a, &sp), 0);
    CHECK_RC(pthread_create(&s, &a, ret_arg, NULL), ENOTSUP);
    pthread_attr_destroy(&a);
}

/* ---- static initialisers -------------------------------------------------------------- */

static pthread_mutex_t m_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m_rec = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t m_err = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_cond_t c_static = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw_static = PTHREAD_RWLOCK_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_int once_runs;
static void once_fn(void) { atomic_fetch_add(&once_runs, 1); }

static void *unlock_err(void *a)
{
    (void)a;
    CHECK_RC(pthread_mutex_unlock(&m_err), EPERM);
    return NULL;
}

static void *statics(void *a)
{
    (void)a;
    CHECK_RC(pthread_mutex_lock(&m_rec), 0);
    CHECK_RC(pthread_mutex_lock(&m_rec), 0);
    CHECK_RC(pthread_mutex_trylock(&m_rec), 0);
    for (int i = 0; i < 3; i++)
        CHECK_RC(pthread_mutex_unlock(&m_rec), 0);
    CHECK_RC(pthread_mutex_unlock(&m_rec), EPERM);
    CHECK_RC(pthread_mutex_lock(&m_err), 0);
    CHECK_RC(pthread_mutex_lock(&m_err), EDEADLK);
    CHECK_RC(pthread_mutex_trylock(&m_err), EBUSY);
    pthread_t t;
    CHECK_RC(pthread_create(&t, NULL, unlock_err, NULL), 0);
    CHECK_RC(pthread_join(t, NULL), 0);
    CHECK_RC(pthread_mutex_unlock(&m_err), 0);
    CHECK_RC(pthread_mutex_lock(&m_normal), 0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 30000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    uint64_t t0 = weft_now_ns();
    CHECK_RC(pthread_mutex_timedlock(&m_normal, &ts), ETIMEDOUT); /* relock: deadlock */
    CHECK(weft_now_ns() - t0 >= MS(25), "the relock did not wait");
    CHECK_RC(pthread_mutex_unlock(&m_normal), 0);
    CHECK_RC(pthread_rwlock_rdlock(&rw_static), 0);
    CHECK_RC(pthread_rwlock_tryrdlock(&rw_static), 0);
    CHECK_RC(pthread_rwlock_trywrlock(&rw_static), EBUSY);
    CHECK_RC(pthread_rwlock_unlock(&rw_static), 0);
    CHECK_RC(pthread_rwlock_unlock(&rw_static), 0);
    CHECK_RC(pthread_rwlock_wrlock(&rw_static), 0);
    CHECK_RC(pthread_rwlock_unlock(&rw_static), 0);
    CHECK_RC(pthread_once(&once, once_fn), 0);
    return (void *)1;
}

static void case_statics(void)
{
    check_phase("static initialisers");
    pthread_t t;
    CHECK_RC(pthread_create(&t, NULL, statics, NULL), 0);
    void *r;
    CHECK_RC(pthread_join(t, &r), 0);
    CHECK(r == (void *)1, "statics");
    CHECK_RC(pthread_once(&once, once_fn), 0);
    CHECK(atomic_load(&once_runs) == 1, "once ran %d times", atomic_load(&once_runs));
}

/* ---- shared with main ------------------------------------------------------------------- */

#define NSHARE 8
#define ROUNDS SCALE(20000, 2000)
static long shared_count;
static int turn_done;
static void *share(void *a)
{
    (void)a;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&m_normal);
        shared_count++;
        if (i % 1000 == 0)
            pthread_cond_signal(&c_static);
        pthread_mutex_unlock(&m_normal);
    }
    pthread_mutex_lock(&m_normal);
    turn_done++;
    pthread_cond_broadcast(&c_static);
    pthread_mutex_unlock(&m_normal);
    return NULL;
}

static void case_shared_with_main(void)
{
    check_phase("mutex and cond shared with main");
    pthread_t t[NSHARE];
    for (int i = 0; i < NSHARE; i++)
        CHECK_RC(pthread_create(&t[i], NULL, share, NULL), 0);
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&m_normal);
        shared_count++;
        pthread_mutex_unlock(&m_normal);
    }
    pthread_mutex_lock(&m_normal);
    while (turn_done < NSHARE)
        CHECK_RC(pthread_cond_wait(&c_static, &m_normal), 0);
    pthread_mutex_unlock(&m_normal);
    for (int i = 0; i < NSHARE; i++)
        CHECK_RC(pthread_join(t[i], NULL), 0);
    CHECK(shared_count == (long)(NSHARE + 1) * ROUNDS, "count %ld, want %ld", shared_count,
          (long)(NSHARE + 1) * ROUNDS);
}

/* ---- timed waits --------------------------------------------------------------------------- */

static void *timed(void *a)
{
    clockid_t clock = (clockid_t)(intptr_t)a;
    pthread_condattr_t ca;
    CHECK_RC(pthread_condattr_init(&ca), 0);
    CHECK_RC(pthread_condattr_setclock(&ca, clock), 0);
    clockid_t got;
    CHECK_RC(pthread_condattr_getclock(&ca, &got), 0);
    CHECK(got == clock, "clock");
    pthread_cond_t c;
    pthread_mutex_t m;
    CHECK_RC(pthread_cond_init(&c, &ca), 0);
    CHECK_RC(pthread_mutex_init(&m, NULL), 0);
    struct timespec ts;
    clock_gettime(clock, &ts);
    ts.tv_nsec += 40000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&m);
    uint64_t t0 = weft_now_ns();
    int r;
    do
        r = pthread_cond_timedwait(&c, &m, &ts);
    while (r == 0);
    uint64_t dt = weft_now_ns() - t0;
    CHECK_RC(r, ETIMEDOUT);
    CHECK(dt >= MS(35) && dt < MS(40) + SCALE(MS(200), MS(2000)), "a 40 ms wait took %llu ns",
          (unsigned long long)dt);
    CHECK_RC(pthread_mutex_unlock(&m), 0);
    struct timespec bad = { 0, 2000000000 };
    pthread_mutex_lock(&m);
    CHECK_RC(pthread_cond_timedwait(&c, &m, &bad), EINVAL);
    pthread_mutex_unlock(&m);
    CHECK_RC(pthread_cond_destroy(&c), 0);
    CHECK_RC(pthread_mutex_destroy(&m), 0);
    return NULL;
}

static void case_timed(void)
{
    check_phase("timed waits");
    pthread_t a, b;
    CHECK_RC(pthread_create(&a, NULL, timed, (void *)(intptr_t)CLOCK_MONOTONIC), 0);
    CHECK_RC(pthread_create(&b, NULL, timed, (void *)(intptr_t)CLOCK_REALTIME), 0);
    CHECK_RC(pthread_join(a, NULL), 0);
    CHECK_RC(pthread_join(b, NULL), 0);
}

/* ---- rwlock, barrier, spin, sem -------------------------------------------------------------- */

#define NB 6
static pthread_barrier_t bar;
static pthread_spinlock_t spin;
static long spin_count;
static atomic_int serials;
static sem_t sem;

static void *barrier_spin(void *a)
{
    (void)a;
    for (int phase = 0; phase < 20; phase++) {
        for (int i = 0; i < 100; i++) {
            pthread_spin_lock(&spin);
            spin_count++;
            pthread_spin_unlock(&spin);
        }
        int r = pthread_barrier_wait(&bar);
        CHECK(r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD, "barrier %d", r);
        if (r == PTHREAD_BARRIER_SERIAL_THREAD)
            atomic_fetch_add(&serials, 1);
    }
    CHECK(sem_wait(&sem) == 0, "sem_wait");
    return NULL;
}

static void case_objects(void)
{
    check_phase("barrier, spin, sem");
    CHECK_RC(pthread_barrier_init(&bar, NULL, 0), EINVAL);
    CHECK_RC(pthread_barrier_init(&bar, NULL, NB), 0);
    CHECK_RC(pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE), 0);
    CHECK(sem_init(&sem, 1, 0) == -1 && errno == ENOTSUP, "a process-shared sem_init");
    CHECK(sem_init(&sem, 0, 0) == 0, "sem_init");
    CHECK(sem_open("/weft-test", O_CREAT, 0600, 0) == SEM_FAILED && errno == ENOTSUP, "sem_open");
    pthread_t t[NB];
    for (int i = 0; i < NB; i++)
        CHECK_RC(pthread_create(&t[i], NULL, barrier_spin, NULL), 0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 0;
    ts.tv_nsec = 0; /* in the past: try once */
    CHECK(sem_trywait(&sem) == -1 && errno == EAGAIN, "sem_trywait on 0");
    for (int i = 0; i < NB; i++)
        CHECK(sem_post(&sem) == 0, "sem_post");
    for (int i = 0; i < NB; i++)
        CHECK_RC(pthread_join(t[i], NULL), 0);
    CHECK(sem_timedwait(&sem, &ts) == -1 && errno == ETIMEDOUT, "sem_timedwait on 0");
    int v = -1;
    CHECK(sem_getvalue(&sem, &v) == 0 && v == 0, "sem value %d", v);
    CHECK(spin_count == NB * 20 * 100, "spin count %ld", spin_count);
    CHECK(atomic_load(&serials) == 20, "%d serial threads in 20 phases", atomic_load(&serials));
    CHECK_RC(pthread_barrier_destroy(&bar), 0);
    CHECK(sem_destroy(&sem) == 0, "sem_destroy");
}

/* ---- keys, cleanup, cancellation ------------------------------------------------------------ */

static pthread_key_t key;
static atomic_int key_dtors, order_pos;
static int order[4];
static void key_dtor(void *v) { CHECK(v == (void *)5, "key value %p", v); atomic_fetch_add(&key_dtors, 1); }
static void note(void *v) { order[atomic_fetch_add(&order_pos, 1)] = (int)(intptr_t)v; }

static void *exits(void *a)
{
    (void)a;
    CHECK_RC(pthread_setspecific(key, (void *)5), 0);
    pthread_cleanup_push(note, (void *)1);
    pthread_cleanup_push(note, (void *)2);
    pthread_exit((void *)77);
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    return NULL;
}

static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cc = PTHREAD_COND_INITIALIZER;
static atomic_int in_wait, handler_had_mutex;
static void unlock_cm(void *a)
{
    (void)a;
    atomic_store(&handler_had_mutex, pthread_mutex_trylock(&cm) == EBUSY); /* held by us */
    pthread_mutex_unlock(&cm);
}

static void *waits_forever(void *a)
{
    (void)a;
    pthread_mutex_lock(&cm);
    pthread_cleanup_push(unlock_cm, NULL);
    atomic_store(&in_wait, 1);
    for (;;)
        pthread_cond_wait(&cc, &cm);
    pthread_cleanup_pop(1);
    return NULL;
}

static atomic_int may_enable;
static void *disabled_then_enabled(void *a)
{
    (void)a;
    int old;
    CHECK_RC(pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old), 0);
    CHECK(old == PTHREAD_CANCEL_ENABLE, "old state");
    while (!atomic_load(&may_enable))
        pthread_testcancel(); /* disabled: no effect */
    CHECK_RC(pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL), 0);
    for (;;)
        pthread_testcancel();
    return NULL;
}

static void case_cancel(void)
{
    check_phase("keys, cleanup, cancellation");
    CHECK_RC(pthread_key_create(&key, key_dtor), 0);
    pthread_t t;
    void *r;
    CHECK_RC(pthread_create(&t, NULL, exits, NULL), 0);
    CHECK_RC(pthread_join(t, &r), 0);
    CHECK(r == (void *)77, "pthread_exit value %p", r);
    CHECK(atomic_load(&order_pos) == 2 && order[0] == 2 && order[1] == 1, "cleanup order %d %d (%d)",
          order[0], order[1], atomic_load(&order_pos));
    CHECK(atomic_load(&key_dtors) == 1, "key destructor ran %d times", atomic_load(&key_dtors));

    CHECK_RC(pthread_create(&t, NULL, waits_forever, NULL), 0);
    WAIT_UNTIL(atomic_load(&in_wait), "the thread waits");
    weft_sleep_ns(MS(10));
    CHECK_RC(pthread_cancel(t), 0);
    CHECK_RC(pthread_join(t, &r), 0);
    CHECK(r == PTHREAD_CANCELED, "cancelled join result %p", r);
    CHECK(atomic_load(&handler_had_mutex), "the cleanup handler ran without the mutex");
    CHECK_RC(pthread_mutex_trylock(&cm), 0);
    pthread_mutex_unlock(&cm);

    CHECK_RC(pthread_create(&t, NULL, disabled_then_enabled, NULL), 0);
    CHECK_RC(pthread_cancel(t), 0);
    weft_sleep_ns(MS(20));
    CHECK_RC(pthread_kill(t, 0), 0); /* still alive: cancellation disabled */
    atomic_store(&may_enable, 1);
    CHECK_RC(pthread_join(t, &r), 0);
    CHECK(r == PTHREAD_CANCELED, "result %p", r);
    CHECK_RC(pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL), ENOTSUP);
}

/* ---- pthread_kill ------------------------------------------------------------------------ */

static _Atomic(void *) handled_on;
static atomic_int handled, unmask_now;
static void on_usr1(int sig)
{
    CHECK(sig == SIGUSR1, "signal %d", sig);
    atomic_store(&handled_on, (void *)weft_self());
    atomic_fetch_add(&handled, 1);
}

static void *masked_target(void *a)
{
    (void)a;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    CHECK_RC(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
    atomic_store(&in_wait, 2);
    while (!atomic_load(&unmask_now))
        pthread_testcancel();
    CHECK(atomic_load(&handled) == 0, "a masked signal ran");
    CHECK_RC(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
    CHECK(atomic_load(&handled) == 1, "the signal did not run when unmasked");
    CHECK(atomic_load(&handled_on) == (void *)weft_self(), "the handler ran on another thread");
    return NULL;
}

static void case_kill(void)
{
    check_phase("pthread_kill");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    pthread_t t;
    CHECK_RC(pthread_create(&t, NULL, masked_target, NULL), 0);
    WAIT_UNTIL(atomic_load(&in_wait) == 2, "the target masked");
    CHECK_RC(pthread_kill(t, SIGUSR1), 0);
    weft_sleep_ns(MS(10));
    atomic_store(&unmask_now, 1);
    CHECK_RC(pthread_join(t, NULL), 0);
    CHECK_RC(pthread_kill(t, 0), ESRCH);
    CHECK_RC(pthread_kill(pthread_self(), 999), EINVAL);
}

static void case_refusals(void)
{
    check_phase("refusals");
    pthread_mutexattr_t ma;
    pthread_mutex_t m;
    CHECK_RC(pthread_mutexattr_init(&ma), 0);
    CHECK_RC(pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED), 0);
    CHECK_RC(pthread_mutex_init(&m, &ma), ENOTSUP);
    CHECK_RC(pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_PRIVATE), 0);
    CHECK_RC(pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST), 0);
    CHECK_RC(pthread_mutex_init(&m, &ma), ENOTSUP);
    CHECK_RC(pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_STALLED), 0);
    CHECK_RC(pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT), 0);
    CHECK_RC(pthread_mutex_init(&m, &ma), ENOTSUP);
    CHECK_RC(pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_NONE), 0);
    CHECK_RC(pthread_mutexattr_settype(&ma, 99), EINVAL);
    CHECK_RC(pthread_mutex_init(&m, &ma), 0);
    CHECK_RC(pthread_mutex_destroy(&m), 0);
    pthread_condattr_t ca;
    pthread_cond_t c;
    CHECK_RC(pthread_condattr_init(&ca), 0);
    CHECK_RC(pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED), 0);
    CHECK_RC(pthread_cond_init(&c, &ca), ENOTSUP);
    CHECK_RC(pthread_condattr_setclock(&ca, CLOCK_PROCESS_CPUTIME_ID), EINVAL);
    pthread_rwlockattr_t ra;
    pthread_rwlock_t rl;
    CHECK_RC(pthread_rwlockattr_init(&ra), 0);
    CHECK_RC(pthread_rwlockattr_setpshared(&ra, PTHREAD_PROCESS_SHARED), 0);
    CHECK_RC(pthread_rwlock_init(&rl, &ra), ENOTSUP);
    struct sched_param sp = { .sched_priority = 1 };
    CHECK_RC(pthread_setschedparam(pthread_self(), SCHED_OTHER, &(struct sched_param){ 0 }), 0);
    pthread_t t;
    CHECK_RC(pthread_create(&t, NULL, ret_arg, NULL), 0);
    CHECK_RC(pthread_setschedparam(t, SCHED_FIFO, &sp), ENOTSUP);
    CHECK_RC(pthread_join(t, NULL), 0);
}

int main(void)
{
    case_threads();
    case_statics();
    case_shared_with_main();
    case_timed();
    case_objects();
    case_cancel();
    case_kill();
    case_refusals();
    printf("pthread_api: ok\n");
    return 0;
}
