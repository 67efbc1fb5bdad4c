/*
 * thread_basic — spawn/join/detach/exit semantics and their bad-input rows.
 *
 * Proves: results reach join (returned and via weft_exit); joining a
 * detached, already joined, NULL or own thread fails (EINVAL / EDEADLK);
 * detach twice is EINVAL; detached threads run to completion; weft_self,
 * weft_id, weft_name behave; tiny stack sizes are rounded up, absurd ones,
 * unknown flags, out-of-range vcores and a NULL fn are refused; errno is
 * preserved per uthread across yields, sleeps and blocking, and weft calls
 * never touch errno.
 */
#include "check.h"

#define NSPAWN 64

static void *times_two(void *arg)
{
    return (void *)((uintptr_t)arg * 2);
}

static void check_results(void)
{
    check_phase("spawn/join results");
    weft_t t[NSPAWN];
    for (uintptr_t i = 0; i < NSPAWN; i++)
        t[i] = spawn(times_two, (void *)(i + 1));
    for (uintptr_t i = 0; i < NSPAWN; i++) {
        void *r = join(t[i]);
        CHECK(r == (void *)((i + 1) * 2), "thread %zu returned %p", (size_t)i, r);
    }
    /* result pointer NULL is allowed */
    CHECK_RC(weft_join(spawn(times_two, (void *)1), NULL), 0);
}

static void deep_exit(int depth)
{
    if (depth == 0)
        weft_exit((void *)0x5eed);
    deep_exit(depth - 1);
    CHECK(0, "weft_exit returned");
}

static void *exits_from_depth(void *arg)
{
    (void)arg;
    deep_exit(5);
    return NULL;
}

static void check_exit(void)
{
    check_phase("weft_exit result");
    void *r = join(spawn(exits_from_depth, NULL));
    CHECK(r == (void *)0x5eed, "weft_exit result lost: got %p", r);
}

static void *returns_self(void *arg)
{
    (void)arg;
    return weft_self();
}

static void *joins_self(void *arg)
{
    (void)arg;
    CHECK(weft_self() != NULL, "weft_self() is NULL inside a uthread");
    CHECK_RC(weft_join(weft_self(), NULL), EDEADLK);
    CHECK_RC(weft_join(NULL, NULL), EINVAL);
    return (void *)1;
}

static void check_self_and_bad_joins(void)
{
    check_phase("weft_self / join self / join NULL / double join");
    CHECK(weft_self() == NULL, "weft_self() in main is %p", (void *)weft_self());
    CHECK_RC(weft_join(NULL, NULL), EINVAL);
    CHECK(in_uthread(joins_self, NULL) == (void *)1, "joins_self");

    weft_t t = spawn(returns_self, NULL);
    void *r = join(t);
    CHECK(r == (void *)t, "weft_self() %p != handle %p", r, (void *)t);
    /* Immediately after the first join, before anything else is spawned. */
    CHECK_RC(weft_join(t, NULL), EINVAL);
}

/* A thread that stays alive until *arg becomes nonzero. */
static void *wait_gate(void *arg)
{
    atomic_int *g = arg;
    WAIT_UNTIL(atomic_load(g) != 0, "gate opened");
    return (void *)7;
}

static void *mark_finished(void *arg)
{
    atomic_store((atomic_int *)arg, 1);
    return NULL;
}

/* static: the detached threads outlive check_detach()'s frame */
static atomic_int gate, gate2, finished;

static void check_detach(void)
{
    check_phase("join detached / detach twice");
    weft_t t = spawn_ex(wait_gate, &gate, WEFT_DETACHED, 0, NULL);
    CHECK(t != NULL, "detached spawn with out != NULL gave no handle");
    CHECK_RC(weft_join(t, NULL), EINVAL);
    CHECK_RC(weft_detach(t), EINVAL);

    weft_t u = spawn(wait_gate, &gate2);
    CHECK_RC(weft_detach(u), 0);
    CHECK_RC(weft_detach(u), EINVAL);
    CHECK_RC(weft_join(u, NULL), EINVAL);
    CHECK_RC(weft_detach(NULL), EINVAL);

    /* Detaching a thread that already finished frees it at once. */
    weft_t v = spawn(mark_finished, &finished);
    WAIT_UNTIL(atomic_load(&finished), "thread finished");
    CHECK_RC(weft_detach(v), 0);

    atomic_store(&gate, 1);
    atomic_store(&gate2, 1);
}

static atomic_int detached_ran;
static weft_wg_t detached_wg = WEFT_WG_INIT;

static void *detached_body(void *arg)
{
    if ((uintptr_t)arg % 3 == 0)
        weft_yield();
    if ((uintptr_t)arg % 5 == 0)
        weft_sleep_ns(100000);
    atomic_fetch_add(&detached_ran, 1);
    weft_wg_done(&detached_wg);
    return NULL;
}

static void check_detached_complete(void)
{
    check_phase("detached threads run to completion");
    enum { N = 200 };
    CHECK_RC(weft_wg_add(&detached_wg, N), 0);
    weft_attr_t a = { .flags = WEFT_DETACHED };
    for (uintptr_t i = 0; i < N; i++)
        CHECK_RC(weft_spawn(NULL, &a, detached_body, (void *)i), 0);
    CHECK_RC(weft_wg_wait(&detached_wg), 0);
    CHECK(atomic_load(&detached_ran) == N, "only %d of %d detached threads ran",
          atomic_load(&detached_ran), N);
}

/* Copies its own name (as weft_name sees it from inside) into arg. */
static void *report_name(void *arg)
{
    const char *n = weft_name(weft_self());
    snprintf(arg, 64, "%s", n ? n : "(null)");
    return NULL;
}

static void *report_id(void *arg)
{
    (void)arg;
    return (void *)(uintptr_t)weft_id(weft_self());
}

static void check_names_ids(void)
{
    check_phase("names and ids");
    CHECK(weft_id(NULL) == 0, "weft_id(NULL) = %llu", (unsigned long long)weft_id(NULL));

    char buf[64], seen[64];
    snprintf(buf, sizeof buf, "worker-%d", 42);
    weft_t t = spawn_ex(report_name, seen, 0, 0, buf);
    memset(buf, 'X', sizeof buf - 1);   /* the name must have been copied */
    join(t);
    CHECK(strcmp(seen, "worker-42") == 0, "weft_name inside = '%s'", seen);

    atomic_int name_gate = 0;
    weft_t n1 = spawn_ex(wait_gate, &name_gate, 0, 0, "worker-42");
    memset(buf, 'Y', sizeof buf - 1);
    CHECK(strcmp(weft_name(n1), "worker-42") == 0, "name not copied: %s", weft_name(n1));
    weft_t n2 = spawn_ex(wait_gate, &name_gate, 0, 0,
                         "0123456789012345678901234567890123456789");
    CHECK(strcmp(weft_name(n2), "0123456789012345678901234567890") == 0,
          "long name should keep 31 chars, got '%s'", weft_name(n2));
    weft_t n3 = spawn(wait_gate, &name_gate);
    CHECK(weft_name(n3) == NULL, "unnamed thread has name '%s'", weft_name(n3));
    atomic_store(&name_gate, 1);
    join(n1), join(n2), join(n3);

    enum { N = 100 };
    weft_t ts[N];
    uint64_t ids[N];
    for (int i = 0; i < N; i++)
        ts[i] = spawn(report_id, NULL);
    for (int i = 0; i < N; i++) {
        uint64_t handle_id = weft_id(ts[i]);
        ids[i] = (uint64_t)(uintptr_t)join(ts[i]);
        CHECK(ids[i] != 0, "thread %d has id 0", i);
        CHECK(ids[i] == handle_id, "id inside %llu != weft_id(handle) %llu",
              (unsigned long long)ids[i], (unsigned long long)handle_id);
        for (int j = 0; j < i; j++)
            CHECK(ids[i] != ids[j], "threads %d and %d share id %llu", i, j,
                  (unsigned long long)ids[i]);
    }
}

/* Uses roughly depth * 512 bytes of stack. */
static __attribute__((noinline)) unsigned recurse(unsigned depth)
{
    volatile char pad[448];
    pad[0] = (char)depth;
    pad[sizeof pad - 1] = (char)depth;
    if (depth == 0)
        return 1;
    unsigned r = recurse(depth - 1) + (unsigned char)pad[0] + (unsigned char)pad[sizeof pad - 1];
    return r;
}

static void *use_some_stack(void *arg)
{
    unsigned depth = (unsigned)(uintptr_t)arg;
    weft_yield();
    return (void *)(uintptr_t)recurse(depth);
}

static unsigned recurse_expect(unsigned depth)
{
    unsigned r = 1;
    for (unsigned d = 1; d <= depth; d++)
        r += 2 * (unsigned char)(char)d;
    return r;
}

static void check_attrs(void)
{
    check_phase("attributes");
    weft_attr_t a;
    weft_t t;

    /* stack_size 1 is rounded up (>= 16 KiB): ~8 KiB of recursion works. */
    memset(&a, 0, sizeof a);
    a.stack_size = 1;
    CHECK_RC(weft_spawn(&t, &a, use_some_stack, (void *)16), 0);
    void *r = join(t);
    CHECK(r == (void *)(uintptr_t)recurse_expect(16), "recursion on tiny stack: %p", r);
    a.stack_size = 5000;   /* not a page multiple */
    CHECK_RC(weft_spawn(&t, &a, use_some_stack, (void *)16), 0);
    join(t);

    t = (weft_t)(uintptr_t)0x1;   /* failed spawns must not write *out... */
    weft_t before = t;
    a.stack_size = (size_t)1 << 40;
    CHECK_RC(weft_spawn(&t, &a, times_two, NULL), EINVAL);
    a.stack_size = ((size_t)1 << 30) + 4096;
    CHECK_RC(weft_spawn(&t, &a, times_two, NULL), EINVAL);
    CHECK(t == before, "failed weft_spawn changed *out");   /* ...nothing changes */

    memset(&a, 0, sizeof a);
    a.flags = 0x80000000u;
    CHECK_RC(weft_spawn(&t, &a, times_two, NULL), EINVAL);
    a.flags = 0x100;
    CHECK_RC(weft_spawn(&t, &a, times_two, NULL), EINVAL);
    a.flags = WEFT_STACK_COPY | WEFT_STACK_OWN;          /* contradictory */
    CHECK_RC(weft_spawn(&t, &a, times_two, NULL), EINVAL);
    a.flags = WEFT_STACK_COPY;
    a.stack_size = (size_t)64 << 20;                      /* more than a run stack */
    CHECK_RC(weft_spawn(&t, &a, times_two, NULL), EINVAL);
    CHECK(t == before, "failed weft_spawn changed *out");
    a.stack_size = 0;
    CHECK_RC(weft_spawn(&t, &a, times_two, (void *)5), 0);
    CHECK(join(t) == (void *)10, "WEFT_STACK_COPY thread result");

    int nv = weft_num_vcores();
    CHECK(nv >= 1, "weft_num_vcores() = %d with the runtime running", nv);
    a.flags = WEFT_ON_VCORE;
    a.vcore = nv;
    CHECK_RC(weft_spawn(&t, &a, times_two, NULL), EINVAL);
    a.vcore = -1;
    CHECK_RC(weft_spawn(&t, &a, times_two, NULL), EINVAL);
    a.flags = WEFT_PINNED;
    a.vcore = nv;
    CHECK_RC(weft_spawn(&t, &a, times_two, NULL), EINVAL);
    a.flags = WEFT_ON_VCORE;
    a.vcore = nv - 1;
    CHECK_RC(weft_spawn(&t, &a, times_two, (void *)3), 0);
    CHECK(join(t) == (void *)6, "WEFT_ON_VCORE thread result");

    memset(&a, 0, sizeof a);
    CHECK_RC(weft_spawn(&t, &a, NULL, NULL), EINVAL);
    CHECK_RC(weft_spawn(&t, NULL, NULL, NULL), EINVAL);
    CHECK_RC(weft_spawn(NULL, &a, times_two, NULL), EINVAL);   /* joinable, out NULL */
    CHECK_RC(weft_spawn(&t, NULL, times_two, (void *)4), 0);   /* attr NULL = defaults */
    CHECK(join(t) == (void *)8, "attr NULL thread result");
}

/* ---- errno ---------------------------------------------------------------- */

#define NERR 32
static weft_mutex_t err_mu = WEFT_MUTEX_INIT;
static weft_sem_t err_sem = WEFT_SEM_INIT(0);

/* errno is kernel-thread TLS and glibc declares __errno_location() "const":
 * within one function the compiler keeps its address across calls, which
 * goes stale when the uthread migrates to another vcore. Like the library,
 * the test re-resolves it through non-inlined accessors after each switch. */
__attribute__((noinline)) static int errno_read(void)
{
    __asm__ volatile("" ::: "memory");
    return errno;
}

__attribute__((noinline)) static void errno_write(int e)
{
    __asm__ volatile("" ::: "memory");
    errno = e;
}

static void check_my_errno(int want, const char *after)
{
    int e = errno_read();
    CHECK(e == want, "errno %d, expected %d, after %s", e, want, after);
}

static void *errno_keeper(void *arg)
{
    int mine = 1000 + (int)(uintptr_t)arg;
    errno_write(mine);
    for (int round = 0; round < 20; round++) {
        weft_yield();
        check_my_errno(mine, "weft_yield");
        weft_sleep_ns(1000 * (unsigned)(round % 4));
        check_my_errno(mine, "weft_sleep_ns");
        weft_mutex_lock(&err_mu);
        check_my_errno(mine, "weft_mutex_lock");
        weft_yield();
        weft_mutex_unlock(&err_mu);
        check_my_errno(mine, "weft_mutex_unlock");
    }
    weft_sem_wait(&err_sem);   /* blocks until main posts */
    check_my_errno(mine, "weft_sem_wait");
    return (void *)(uintptr_t)mine;
}

static void check_errno(void)
{
    check_phase("errno per uthread");
    weft_t t[NERR];
    for (uintptr_t i = 0; i < NERR; i++)
        t[i] = spawn(errno_keeper, (void *)i);
    errno_write(4242);
    for (int i = 0; i < NERR; i++)
        CHECK_RC(weft_sem_post(&err_sem), 0);
    for (uintptr_t i = 0; i < NERR; i++)
        CHECK(join(t[i]) == (void *)(1000 + i), "errno_keeper %zu", (size_t)i);
    CHECK(errno_read() == 4242, "main's errno changed to %d by weft calls", errno_read());

    check_phase("weft calls leave errno alone");
    errno_write(77);
    CHECK_RC(weft_join(NULL, NULL), EINVAL);
    CHECK_RC(weft_detach(NULL), EINVAL);
    CHECK_RC(weft_spawn(NULL, NULL, NULL, NULL), EINVAL);
    CHECK_RC(weft_sleep_ns((uint64_t)-5), EINVAL);
    CHECK_RC(weft_sem_trywait(&err_sem), EAGAIN);
    CHECK_RC(weft_mutex_unlock(&err_mu), EPERM);
    CHECK(errno_read() == 77, "a failing weft call set errno to %d", errno_read());
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_results();
    check_self_and_bad_joins();
    check_exit();
    check_detach();
    check_detached_complete();
    check_names_ids();
    check_attrs();
    check_errno();
    fprintf(stderr, "thread_basic: ok (%d vcores)\n", weft_num_vcores());
    return 0;
}
