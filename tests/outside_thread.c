/*
 * outside_thread — the API from kernel threads that are not uthreads, and the
 * runtime's life cycle.
 *
 * Proves: weft_init rejects bad configurations without starting anything
 * (vcores > weft_max_vcores(), negative vcores, a preemption period below
 * 10 us or above 10 s, unknown scheduler); preempt_us = 100 starts (the
 * period reads back as 100) and shuts down; the runtime starts lazily on
 * first use with the environment's vcore count; weft_init while running is
 * EBUSY; main and extra pthreads can spawn, join (each other's uthreads too),
 * and share mutex/sem/cond with uthreads; weft_park outside a uthread is
 * EPERM; weft_exit in a pthread is pthread_exit; weft_shutdown from a uthread
 * does nothing; weft_shutdown waits for detached uthreads, stops the vcores,
 * and weft_init (or lazy start) works again afterwards with ids still unique.
 */
#include "check.h"

#include <weft/event.h>

static int expected_vcores(void)
{
    const char *env = getenv("WEFT_VCORES");
    if (env && *env)
        return atoi(env);
    return weft_max_vcores();
}

static void check_bad_init_before_start(void)
{
    check_phase("bad weft_init before start");
    CHECK(weft_num_vcores() == 0, "weft_num_vcores() = %d before start", weft_num_vcores());
    CHECK(weft_vcore_id() == -1, "weft_vcore_id() in main = %d", weft_vcore_id());
    CHECK(weft_self() == NULL, "weft_self() in main");
    int max = weft_max_vcores();
    CHECK(max >= 1, "weft_max_vcores() = %d", max);

    struct weft_config c = { 0 };
    c.vcores = max + 1;
    CHECK_RC(weft_init(&c), EINVAL);
    c.vcores = -1;
    CHECK_RC(weft_init(&c), EINVAL);
    c.vcores = 0;
    static const unsigned bad_periods[] = { 1, 9, 10000001, 4000000000u };
    for (size_t i = 0; i < sizeof bad_periods / sizeof bad_periods[0]; i++) {
        c.preempt_us = bad_periods[i];
        int rc = weft_init(&c);
        CHECK(rc == EINVAL, "weft_init with preempt_us = %u returned %d (%s), expected EINVAL",
              bad_periods[i], rc, check_errname(rc));
    }
    c.preempt_us = 0;
    c.sched = "no-such-scheduler";
    CHECK_RC(weft_init(&c), EINVAL);
    CHECK(weft_num_vcores() == 0, "a failed weft_init left %d vcores running",
          weft_num_vcores());
}

static void *plus_one(void *arg)
{
    return (void *)((uintptr_t)arg + 1);
}

static void check_preempt_init(void)
{
    check_phase("weft_init with preempt_us = 100");
    struct weft_config c = { .preempt_us = 100 };
    CHECK_RC(weft_init(&c), 0);
    CHECK(weft_num_vcores() == expected_vcores(), "preempt_us = 100 gave %d vcores",
          weft_num_vcores());
    CHECK(weft_preempt_period() == 100, "weft_preempt_period() = %u with preempt_us = 100",
          weft_preempt_period());
    CHECK(in_uthread(plus_one, (void *)1) == (void *)2, "a uthread with preemption on");
    weft_shutdown();
    CHECK(weft_num_vcores() == 0, "weft_num_vcores() = %d after shutdown", weft_num_vcores());
    /* The rest of this test runs cooperatively, as before. */
    CHECK_RC(weft_set_preempt_period(0), 0);
}

static void check_lazy_start(void)
{
    check_phase("lazy start");
    weft_mutex_t m = WEFT_MUTEX_INIT;
    CHECK_RC(weft_mutex_lock(&m), 0);
    CHECK_RC(weft_mutex_unlock(&m), 0);
    CHECK(in_uthread(plus_one, (void *)41) == (void *)42, "first uthread result");
    CHECK(weft_num_vcores() == expected_vcores(), "lazy start gave %d vcores, expected %d",
          weft_num_vcores(), expected_vcores());
    CHECK_RC(weft_init(NULL), EBUSY);
    struct weft_config c = { .vcores = 1 };
    CHECK_RC(weft_init(&c), EBUSY);
}

static void check_main_side_calls(void)
{
    check_phase("calls from main");
    weft_yield();
    uint64_t t0 = weft_now_ns();
    CHECK_RC(weft_sleep_ns(MS(2)), 0);
    CHECK(weft_now_ns() - t0 >= MS(2), "sleep from main too short");
    CHECK_RC(weft_park(), EPERM);
    CHECK_RC(weft_unpark(NULL), EINVAL);
}

/* ---- pthreads ------------------------------------------------------------- */

struct pt_ctx {
    weft_t from_main;     /* a uthread main spawned; the pthread joins it */
    weft_t for_main;      /* a uthread the pthread spawned; main joins it */
};

static void *pthread_spawner(void *arg)
{
    struct pt_ctx *ctx = arg;
    CHECK(weft_self() == NULL, "weft_self() in a pthread");
    CHECK(weft_vcore_id() == -1, "weft_vcore_id() in a pthread = %d", weft_vcore_id());
    enum { N = 50 };
    weft_t t[N];
    for (uintptr_t i = 0; i < N; i++)
        t[i] = spawn(plus_one, (void *)i);
    for (uintptr_t i = 0; i < N; i++)
        CHECK(join(t[i]) == (void *)(i + 1), "pthread-spawned uthread %zu", (size_t)i);
    CHECK(join(ctx->from_main) == (void *)1001, "main's uthread joined by a pthread");
    ctx->for_main = spawn(plus_one, (void *)2000);
    return (void *)1;
}

static void check_pthread_spawn_join(void)
{
    check_phase("spawn/join from pthreads");
    struct pt_ctx ctx = { .from_main = spawn(plus_one, (void *)1000) };
    pthread_t a = start_pthread(pthread_spawner, &ctx);
    CHECK(join_pthread(a) == (void *)1, "pthread_spawner");
    CHECK(join(ctx.for_main) == (void *)2001, "pthread's uthread joined by main");
}

/* mutex: pthreads, uthreads and main add to one plain counter */
static weft_mutex_t mix_mu = WEFT_MUTEX_INIT;
static long mix_counter;
#define MIX_ITERS SCALE(20000, 3000)

static void *mix_adder(void *arg)
{
    (void)arg;
    for (int i = 0; i < MIX_ITERS; i++) {
        CHECK_RC(weft_mutex_lock(&mix_mu), 0);
        long v = mix_counter;
        if (i % 64 == 0)
            weft_yield();
        mix_counter = v + 1;
        CHECK_RC(weft_mutex_unlock(&mix_mu), 0);
    }
    return NULL;
}

static void check_mutex_mixed(void)
{
    check_phase("mutex between pthreads and uthreads");
    pthread_t p[2];
    weft_t u[4];
    for (int i = 0; i < 2; i++)
        p[i] = start_pthread(mix_adder, NULL);
    for (int i = 0; i < 4; i++)
        u[i] = spawn(mix_adder, NULL);
    mix_adder(NULL);
    for (int i = 0; i < 2; i++)
        join_pthread(p[i]);
    for (int i = 0; i < 4; i++)
        join(u[i]);
    CHECK(mix_counter == 7L * MIX_ITERS, "counter %ld, expected %ld", mix_counter,
          7L * MIX_ITERS);
}

/* sem ping-pong between a pthread and a uthread */
static weft_sem_t ping = WEFT_SEM_INIT(0), pong = WEFT_SEM_INIT(0);
static int pp_turns;   /* written alternately, ordered by the semaphores */
#define PP_ROUNDS SCALE(5000, 1000)

static void *pinger(void *arg)
{
    (void)arg;
    for (int i = 0; i < PP_ROUNDS; i++) {
        CHECK(pp_turns == 2 * i, "pinger saw turn %d at round %d", pp_turns, i);
        pp_turns++;
        CHECK_RC(weft_sem_post(&ping), 0);
        CHECK_RC(weft_sem_wait(&pong), 0);
    }
    return NULL;
}

static void *ponger(void *arg)
{
    (void)arg;
    for (int i = 0; i < PP_ROUNDS; i++) {
        CHECK_RC(weft_sem_wait(&ping), 0);
        CHECK(pp_turns == 2 * i + 1, "ponger saw turn %d at round %d", pp_turns, i);
        pp_turns++;
        CHECK_RC(weft_sem_post(&pong), 0);
    }
    return NULL;
}

static void check_sem_mixed(void)
{
    check_phase("sem ping-pong pthread <-> uthread");
    pp_turns = 0;
    pthread_t p = start_pthread(pinger, NULL);
    weft_t u = spawn(ponger, NULL);
    join_pthread(p);
    join(u);
    CHECK(pp_turns == 2 * PP_ROUNDS, "turns %d", pp_turns);

    pp_turns = 0;   /* roles swapped */
    p = start_pthread(ponger, NULL);
    u = spawn(pinger, NULL);
    join(u);
    join_pthread(p);
    CHECK(pp_turns == 2 * PP_ROUNDS, "turns %d", pp_turns);
}

/* cond: a pthread and a uthread take turns through one mutex + cond */
static weft_mutex_t turn_mu = WEFT_MUTEX_INIT;
static weft_cond_t turn_cv = WEFT_COND_INIT;
static int turn_owner, turn_count;
#define TURN_ROUNDS SCALE(3000, 600)

static void *turn_taker(void *arg)
{
    int me = (int)(uintptr_t)arg;
    for (int i = 0; i < TURN_ROUNDS; i++) {
        CHECK_RC(weft_mutex_lock(&turn_mu), 0);
        while (turn_owner != me)
            CHECK_RC(weft_cond_wait(&turn_cv, &turn_mu), 0);
        turn_count++;
        turn_owner = 1 - me;
        CHECK_RC(weft_cond_signal(&turn_cv), 0);
        CHECK_RC(weft_mutex_unlock(&turn_mu), 0);
    }
    return NULL;
}

static void check_cond_mixed(void)
{
    check_phase("cond turns pthread <-> uthread");
    pthread_t p = start_pthread(turn_taker, (void *)0);
    weft_t u = spawn(turn_taker, (void *)1);
    join_pthread(p);
    join(u);
    CHECK(turn_count == 2 * TURN_ROUNDS, "turns %d", turn_count);
}

static void *pthread_exits(void *arg)
{
    (void)arg;
    weft_exit((void *)0xabc);
}

static void check_exit_in_pthread(void)
{
    check_phase("weft_exit in a pthread");
    pthread_t p = start_pthread(pthread_exits, NULL);
    CHECK(join_pthread(p) == (void *)0xabc, "pthread_exit result");
}

/* ---- life cycle -------------------------------------------------------------- */

#define MAX_IDS 16
static uint64_t seen_ids[MAX_IDS];
static int nseen;

static void *own_id(void *arg)
{
    (void)arg;
    return (void *)(uintptr_t)weft_id(weft_self());
}

static void note_new_id(void)
{
    uint64_t id = (uint64_t)(uintptr_t)in_uthread(own_id, NULL);
    for (int i = 0; i < nseen; i++)
        CHECK(seen_ids[i] != id, "id %llu reused after a restart", (unsigned long long)id);
    if (nseen < MAX_IDS)
        seen_ids[nseen++] = id;
}

static void *shutdown_from_uthread(void *arg)
{
    (void)arg;
    weft_shutdown();   /* must do nothing (and say so) */
    CHECK(in_uthread(plus_one, (void *)1) == (void *)2, "runtime after shutdown-in-uthread");
    return NULL;
}

static atomic_int late_done;

static void *late_detached(void *arg)
{
    (void)arg;
    weft_sleep_ns(MS(30));
    weft_yield();
    atomic_store(&late_done, 1);
    return NULL;
}

static void check_lifecycle(void)
{
    check_phase("shutdown from a uthread");
    note_new_id();
    in_uthread(shutdown_from_uthread, NULL);
    CHECK(weft_num_vcores() == expected_vcores(), "vcores after shutdown-in-uthread: %d",
          weft_num_vcores());

    check_phase("shutdown waits for detached uthreads");
    spawn_ex(late_detached, NULL, WEFT_DETACHED, 0, NULL);
    weft_shutdown();
    CHECK(atomic_load(&late_done) == 1, "weft_shutdown returned before a detached uthread finished");
    CHECK(weft_num_vcores() == 0, "weft_num_vcores() = %d after shutdown", weft_num_vcores());
    weft_shutdown();   /* no-op when not running */

    check_phase("weft_init after shutdown");
    struct weft_config c = { .vcores = weft_max_vcores() + 1 };
    CHECK_RC(weft_init(&c), EINVAL);
    c.vcores = 1;
    CHECK_RC(weft_init(&c), 0);
    CHECK(weft_num_vcores() == 1, "explicit vcores=1 gave %d", weft_num_vcores());
    CHECK_RC(weft_init(&c), EBUSY);
    note_new_id();
    check_pthread_spawn_join();
    weft_shutdown();

    check_phase("lazy start after shutdown");
    note_new_id();
    CHECK(weft_num_vcores() == expected_vcores(), "lazy restart gave %d vcores",
          weft_num_vcores());
    check_sem_mixed();
    weft_shutdown();

    check_phase("weft_init(NULL) after shutdown");
    CHECK_RC(weft_init(NULL), 0);
    CHECK(weft_num_vcores() == expected_vcores(), "weft_init(NULL) gave %d vcores",
          weft_num_vcores());
    note_new_id();
    weft_shutdown();
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_bad_init_before_start();
    check_preempt_init();
    check_lazy_start();
    check_main_side_calls();
    check_pthread_spawn_join();
    check_mutex_mixed();
    check_sem_mixed();
    check_cond_mixed();
    check_exit_in_pthread();
    check_lifecycle();
    fprintf(stderr, "outside_thread: ok\n");
    return 0;
}
