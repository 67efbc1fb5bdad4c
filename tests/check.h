/*
 * check.h — the tiny assertion kit shared by weft's tests.
 *
 * CHECK(cond, fmt, ...)   fails the test with file:line, the condition and a
 *                          message when cond is false.
 * CHECK_RC(expr, want)     evaluates an int-returning call and fails, naming
 *                          both errno values, unless it returned want.
 * WAIT_UNTIL(cond, what)   polls cond (yielding, then napping) and fails if it
 *                          is still false after a generous bound: a hang
 *                          becomes a message instead of a CTest timeout.
 * errno_now()              this uthread's errno, read afresh (see below).
 * check_watchdog(secs)     kills the test with a message naming the current
 *                          phase (check_phase()) if it runs longer than secs.
 *
 * A failure calls _exit(1): exit() from a uthread would run atexit handlers
 * on a uthread stack while other vcores keep running, which can turn a clean
 * failure into a crash.
 */
#ifndef WEFT_TESTS_CHECK_H
#define WEFT_TESTS_CHECK_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>
#include <weft/sched.h>

/* TEST_TSAN: 1 in a ThreadSanitizer build (gcc or clang). */
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#ifndef TEST_TSAN
#define TEST_TSAN 0
#endif

/* TEST_ASAN: 1 in an AddressSanitizer build (gcc or clang). */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifndef TEST_ASAN
#define TEST_ASAN 0
#endif

#ifdef WEFT_TEST_SANITIZED
#define SCALE(normal, sanitized) (sanitized)
#define WATCHDOG_SECS 540u
#else
#define SCALE(normal, sanitized) (normal)
#define WATCHDOG_SECS 100u
#endif

#define MS(x) ((uint64_t)(x) * 1000000ull)

static const char *_Atomic check_phase_name = "start";

/* check_phase() names what the test is doing, for failure and hang messages. */
static inline void check_phase(const char *name)
{
    atomic_store(&check_phase_name, name);
}

static inline const char *check_errname(int e)
{
    switch (e) {
    case 0: return "0";
    case -1: return "-1/SERIAL";
    case EINVAL: return "EINVAL";
    case EPERM: return "EPERM";
    case EBUSY: return "EBUSY";
    case EDEADLK: return "EDEADLK";
    case EAGAIN: return "EAGAIN";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ENOTSUP: return "ENOTSUP";
    case EOVERFLOW: return "EOVERFLOW";
    case EEXIST: return "EEXIST";
    case ENOSPC: return "ENOSPC";
    case ENOMEM: return "ENOMEM";
    case ESRCH: return "ESRCH";
    default: return "?";
    }
}

__attribute__((noreturn, format(printf, 4, 5)))
static void check_fail(const char *file, int line, const char *what, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: FAILED [%s]: %s: ", file, line,
            atomic_load(&check_phase_name), what);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    _exit(1);
}

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond))                                                         \
            check_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);              \
    } while (0)

#define CHECK_RC(expr, want)                                                 \
    do {                                                                     \
        int rc_ = (expr), want_ = (want);                                    \
        if (rc_ != want_)                                                    \
            check_fail(__FILE__, __LINE__, #expr,                            \
                       "returned %d (%s), expected %d (%s)", rc_,            \
                       check_errname(rc_), want_, check_errname(want_));     \
    } while (0)

/* check_nap() gives other threads a chance, in or outside a uthread. */
/* errno_now(): errno read through a fresh __errno_location(). glibc declares
 * that function const, so a compiler may reuse errno's address computed
 * earlier in the same function; after a weft call that blocked, the uthread
 * may run on another vcore, whose kernel thread has another errno (the caveat
 * at the top of <weft/weft.h>). A call of its own computes the address anew. */
__attribute__((noinline, unused)) static int errno_now(void)
{
    return errno;
}

static inline void check_nap(unsigned round)
{
    if (round < 200)
        weft_yield();
    else
        weft_sleep_ns(100000);   /* 0.1 ms */
}

#define WAIT_BOUND_NS (SCALE(30ull, 300ull) * 1000000000ull)

#define WAIT_UNTIL(cond, what)                                               \
    do {                                                                     \
        uint64_t wu_end_ = weft_now_ns() + WAIT_BOUND_NS;                    \
        for (unsigned wu_i_ = 0; !(cond); wu_i_++) {                         \
            if (weft_now_ns() > wu_end_)                                     \
                check_fail(__FILE__, __LINE__, #cond,                        \
                           "still false after the hang bound: %s", (what));  \
            check_nap(wu_i_);                                                \
        }                                                                    \
    } while (0)

static void *check_watchdog_main(void *arg)
{
    unsigned secs = (unsigned)(uintptr_t)arg;
    struct timespec ts = { .tv_sec = (time_t)secs, .tv_nsec = 0 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    /* No stdio: a hung process may hold the stderr lock. */
    char msg[256];
    int n = snprintf(msg, sizeof msg, "FAILED: watchdog: still in phase '%s' after %u s (hang?)\n",
                     atomic_load(&check_phase_name), secs);
    if (n > 0 && write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1) < 0)
        n = 0;
    weft_dump(2); /* each vcore's state and last park/kick decisions */
    _exit(2);
    return NULL;
}

/* check_watchdog() ends the process with a message after secs seconds. */
static inline void check_watchdog(unsigned secs)
{
    const char *e = getenv("CHECK_WATCHDOG_SECS"); /* shorter, to chase a hang */
    if (e && atoi(e) > 0)
        secs = (unsigned)atoi(e);
    pthread_t th;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &a, check_watchdog_main, (void *)(uintptr_t)secs) != 0)
        check_fail(__FILE__, __LINE__, "pthread_create", "cannot start the watchdog");
    pthread_attr_destroy(&a);
}

/* spawn_ex() spawns fn(arg) with the given flags/vcore/name, or fails. */
static inline weft_t spawn_ex(void *(*fn)(void *), void *arg, unsigned flags,
                              int vcore, const char *name)
{
    weft_attr_t a;
    memset(&a, 0, sizeof a);
    a.flags = flags;
    a.vcore = vcore;
    a.name = name;
    weft_t t = NULL;
    int rc = weft_spawn(&t, &a, fn, arg);
    if (rc != 0)
        check_fail(__FILE__, __LINE__, "weft_spawn", "returned %d (%s)", rc,
                   check_errname(rc));
    if (t == NULL && !(flags & WEFT_DETACHED))
        check_fail(__FILE__, __LINE__, "weft_spawn", "returned 0 but no handle");
    return t;
}

static inline weft_t spawn(void *(*fn)(void *), void *arg)
{
    return spawn_ex(fn, arg, 0, 0, NULL);
}

/* join() joins t and returns its result, or fails. */
static inline void *join(weft_t t)
{
    void *res = (void *)(uintptr_t)0xdeadbeef;
    int rc = weft_join(t, &res);
    if (rc != 0)
        check_fail(__FILE__, __LINE__, "weft_join", "returned %d (%s)", rc,
                   check_errname(rc));
    return res;
}

/* in_uthread() runs fn(arg) in a fresh uthread and returns its result. */
static inline void *in_uthread(void *(*fn)(void *), void *arg)
{
    return join(spawn(fn, arg));
}

/* start_pthread() starts a joinable kernel thread, or fails. */
/* check_table() runs a table of cases from main (an outside kernel thread),
 * then from a uthread, where it must return (void *)1. */
static inline void check_table(void *(*rows)(void *))
{
    check_phase("rows from main");
    rows(NULL);
    check_phase("rows from a uthread");
    CHECK(in_uthread(rows, NULL) == (void *)1, "rows");
}

static inline pthread_t start_pthread(void *(*fn)(void *), void *arg)
{
    pthread_t th;
    int rc = pthread_create(&th, NULL, fn, arg);
    if (rc != 0)
        check_fail(__FILE__, __LINE__, "pthread_create", "returned %d", rc);
    return th;
}

static inline void *join_pthread(pthread_t th)
{
    void *res = NULL;
    int rc = pthread_join(th, &res);
    if (rc != 0)
        check_fail(__FILE__, __LINE__, "pthread_join", "returned %d", rc);
    return res;
}

/* check_rand() is a small fixed-seed generator (xorshift32) for tests. */
static inline uint32_t check_rand(uint32_t *s)
{
    uint32_t x = *s ? *s : 0x9e3779b9u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* spin_work() burns some CPU in a way the compiler cannot drop. */
static inline uint64_t spin_work(unsigned n)
{
    volatile uint64_t acc = 0;
    for (unsigned i = 0; i < n; i++)
        acc += (uint64_t)i * 2654435761u;
    return acc;
}

#endif /* WEFT_TESTS_CHECK_H */
