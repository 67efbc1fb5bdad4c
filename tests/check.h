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
 * check_vcore_threads(out, n)  each vcore's kernel thread, for signals.
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
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

/* The watchdog's report of a hang, written with system calls only (a hung
 * process may hold the stderr or malloc lock): every kernel thread's state,
 * system call and wait channel from /proc, then, where gdb is installed
 * (scripts/deps.sh test installs it), every thread's backtrace. */
static void check_wd_write(const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0)
            return;
        s += w, n -= (size_t)w;
    }
}

static size_t check_wd_read(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    n = n < 0 ? 0 : n;
    buf[n] = 0;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == 0))
        buf[--n] = 0;
    return (size_t)n;
}

static void check_wd_threads(void)
{
    int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    char ents[4096];
    long n;
    while ((n = syscall(SYS_getdents64, dfd, ents, sizeof ents)) > 0) {
        for (long off = 0; off < n;) {
            struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type; char name[]; }
                *d = (void *)(ents + off);
            off += d->reclen;
            if (d->name[0] < '0' || d->name[0] > '9')
                continue;
            char path[64], st[512], sc[128], wch[64], line[800];
            snprintf(path, sizeof path, "/proc/self/task/%s/stat", d->name);
            check_wd_read(path, st, sizeof st);
            snprintf(path, sizeof path, "/proc/self/task/%s/syscall", d->name);
            check_wd_read(path, sc, sizeof sc);
            snprintf(path, sizeof path, "/proc/self/task/%s/wchan", d->name);
            check_wd_read(path, wch, sizeof wch);
            const char *rp = strrchr(st, ')'), *lp = strchr(st, '(');
            int cl = rp && lp && rp > lp ? (int)(rp - lp - 1) : 0;
            int len = snprintf(line, sizeof line, "  thread %s (%.*s) state %c syscall [%s] wchan %s\n",
                               d->name, cl, lp ? lp + 1 : "", rp && rp[1] ? rp[2] : '?', sc, wch);
            if (len > 0)
                check_wd_write(line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
        }
    }
    close(dfd);
}

static void check_wd_backtraces(void)
{
    static const char gdb[] = "/usr/bin/gdb";
    if (access(gdb, X_OK) != 0 || getenv("CHECK_NO_GDB"))
        return;
    char pid[24];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    char *argv[] = { "gdb", "-p", pid, "-batch", "-nx", "-ex", "set pagination off", "-ex",
                     "thread apply all bt", NULL };
    char *envp[] = { "PATH=/usr/bin:/bin", NULL };
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    /* The raw system calls: no fork handlers, no sanitizer interceptors (a
     * fork with SIGCHLD and no stack: clone's argument order, which differs
     * between x86-64 and aarch64, does not matter). */
    long child = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    if (child == 0) {
        syscall(SYS_dup3, 2, 1, 0); /* dup2: not on aarch64 */
        syscall(SYS_execve, gdb, argv, envp);
        syscall(SYS_exit_group, 127);
    }
    if (child < 0)
        return;
    for (int i = 0; i < 600; i++) { /* 60 s at most */
        if (waitpid((pid_t)child, NULL, WNOHANG) != 0)
            return;
        struct timespec ts = { 0, 100000000 };
        nanosleep(&ts, NULL);
    }
    kill((pid_t)child, SIGKILL);
    waitpid((pid_t)child, NULL, 0);
}

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
    check_wd_threads();
    check_wd_backtraces();
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

/* check_vcore_threads(out, n) fills out[v] with the kernel thread of vcore v
 * for v < n, from a pinned uthread on each (the runtime started). */
__attribute__((unused)) static pthread_t *check_vt_out;
__attribute__((unused)) static atomic_int check_vt_done;

__attribute__((unused)) static void *check_vt_record(void *arg)
{
    check_vt_out[(intptr_t)arg] = pthread_self();
    atomic_fetch_add(&check_vt_done, 1);
    return NULL;
}

__attribute__((unused)) static void check_vcore_threads(pthread_t *out, int n)
{
    check_vt_out = out;
    atomic_store(&check_vt_done, 0);
    for (int v = 0; v < n; v++) {
        weft_attr_t a = { .flags = WEFT_PINNED | WEFT_DETACHED, .vcore = v };
        CHECK_RC(weft_spawn(NULL, &a, check_vt_record, (void *)(intptr_t)v), 0);
    }
    WAIT_UNTIL(atomic_load(&check_vt_done) == n, "the vcore threads recorded");
}

/* struct check_pair: two uthreads that hand a turn back and forth through
 * weft_park/weft_unpark until stop (each wake-up lands in the waker's
 * vcore's next slot): check_pair_spawn() starts them parked (nobody's turn),
 * check_pair_go() gives the first turn, check_pair_end() stops and joins
 * them. */
struct check_pair {
    weft_t t[2];
    atomic_int turn;                 /* 0 or 1: whose turn; 2: nobody's yet */
    atomic_bool stop;
    atomic_long hops;                /* turns handed over */
    struct check_pair_side {
        struct check_pair *p;
        int me;
    } side[2];
};

__attribute__((unused)) static void *check_pair_run(void *arg)
{
    struct check_pair_side *s = arg;
    struct check_pair *p = s->p;
    for (;;) {
        while (atomic_load(&p->turn) != s->me && !atomic_load(&p->stop))
            CHECK_RC(weft_park(), 0);
        if (atomic_load(&p->stop))
            return NULL; /* check_pair_end() wakes both */
        atomic_store(&p->turn, !s->me);
        atomic_fetch_add_explicit(&p->hops, 1, memory_order_relaxed);
        CHECK_RC(weft_unpark(p->t[!s->me]), 0);
    }
}

__attribute__((unused)) static void check_pair_spawn(struct check_pair *p, const weft_attr_t *attr)
{
    atomic_store(&p->turn, 2);
    atomic_store(&p->stop, false);
    atomic_store(&p->hops, 0);
    for (int i = 0; i < 2; i++) {
        p->side[i] = (struct check_pair_side){ p, i };
        CHECK_RC(weft_spawn(&p->t[i], attr, check_pair_run, &p->side[i]), 0);
    }
}

__attribute__((unused)) static void check_pair_go(struct check_pair *p)
{
    atomic_store(&p->turn, 0);
    CHECK_RC(weft_unpark(p->t[0]), 0);
}

__attribute__((unused)) static void check_pair_end(struct check_pair *p)
{
    atomic_store(&p->stop, true);
    for (int i = 0; i < 2; i++)
        CHECK_RC(weft_unpark(p->t[i]), 0);
    for (int i = 0; i < 2; i++)
        CHECK_RC(weft_join(p->t[i], NULL), 0);
}

#endif /* WEFT_TESTS_CHECK_H */
