/*
 * sched_api — an application scheduler through <weft/sched.h>.
 *
 * Proves: weft_sched_register rejects NULL, a missing name or a missing
 * mandatory op (EINVAL) and a taken name, built-in or not (EEXIST); an
 * unknown scheduler name makes weft_init fail with EINVAL without starting
 * anything; a tiny global-LIFO scheduler selected with weft_config.sched
 * (and again with WEFT_SCHED) runs spawn/join/yield/mutex/sem/sleep/park
 * workloads correctly, its init/fini are called once per run with the vcore
 * count, its entry/runnable/paused/has_blocked ops are called (has_blocked
 * with the right reasons), and at one vcore threads really run LIFO; the
 * same with the optional take_local and take_yield (which queues the
 * yielder itself at one vcore: then thread_paused is not called for that
 * yield); the same with a next slot per vcore (struct weft_next_slot),
 * which weft_vcore_next_slot_set refuses without take_local (ENOTSUP), for
 * a vcore init was not given (EINVAL) and once the vcores run (EBUSY), and
 * from which the runtime then runs uthreads itself (within the budget; a
 * displaced one comes to thread_runnable with by_uthread 3 on its vcore);
 * the built-in "fifo" and "ws" can be selected by name and do not call it.
 */
#include "check.h"

/* ---- the LIFO scheduler ------------------------------------------------------------- */

static atomic_flag lifo_lock = ATOMIC_FLAG_INIT;
static struct weft_uthread *lifo_top;       /* guarded by lifo_lock */
static atomic_long c_init, c_init_arg, c_fini, c_entry, c_run, c_runnable, c_paused;
static atomic_long c_blocked[WEFT_BLOCK_OTHER + 1];

static void lifo_push(struct weft_uthread *t)
{
    while (atomic_flag_test_and_set_explicit(&lifo_lock, memory_order_acquire))
        ;
    weft_uthread_link(t)->next = lifo_top;
    lifo_top = t;
    atomic_flag_clear_explicit(&lifo_lock, memory_order_release);
}

static struct weft_uthread *lifo_pop(void)
{
    while (atomic_flag_test_and_set_explicit(&lifo_lock, memory_order_acquire))
        ;
    struct weft_uthread *t = lifo_top;
    if (t)
        lifo_top = weft_uthread_link(t)->next;
    atomic_flag_clear_explicit(&lifo_lock, memory_order_release);
    return t;
}

static int init_lifo(int nvcores)
{
    atomic_fetch_add(&c_init, 1);
    atomic_store(&c_init_arg, nvcores);
    return 0;
}

static void fini_lifo(void)
{
    atomic_fetch_add(&c_fini, 1);
}

static void sched_entry_lifo(void)
{
    atomic_fetch_add(&c_entry, 1);
    struct weft_uthread *t = lifo_pop();
    if (t) {
        atomic_fetch_add(&c_run, 1);
        weft_run_uthread(t);
    }
}

static void thread_runnable_lifo(struct weft_uthread *t)
{
    atomic_fetch_add(&c_runnable, 1);
    lifo_push(t);
    weft_vcore_kick(-1);
}

static void thread_paused_lifo(struct weft_uthread *t)
{
    atomic_fetch_add(&c_paused, 1);
    lifo_push(t);
}

static void thread_has_blocked_lifo(struct weft_uthread *t, int why)
{
    (void)t;
    if (why >= WEFT_BLOCK_SYNC && why <= WEFT_BLOCK_OTHER)
        atomic_fetch_add(&c_blocked[why], 1);
    else
        atomic_fetch_add(&c_blocked[0], 1);
}

/* The same scheduler with the direct hand-off (take_local) and a yield
 * that queues the yielder itself (take_yield), allowed only where no other
 * vcore may pop before this one's next decision: at one vcore. */
static atomic_long c_take_local, c_ty_queued; /* hand-offs; yielders queued by take_yield */

static struct weft_uthread *take_local_lifo(int vcore)
{
    (void)vcore;
    struct weft_uthread *t = lifo_pop();
    if (t)
        atomic_fetch_add(&c_take_local, 1); /* a hand-off: runs without sched_entry */
    return t;
}

static struct weft_uthread *take_yield_lifo(int vcore, struct weft_uthread *self, int *queued)
{
    struct weft_uthread *t = take_local_lifo(vcore);
    if (t && weft_num_vcores() == 1) {
        lifo_push(self); /* where thread_paused would put it */
        *queued = 1;
        atomic_fetch_add(&c_ty_queued, 1);
    }
    return t;
}

/* The same with a next slot per vcore that the runtime runs itself
 * (struct weft_next_slot): take_local, take_yield and sched_entry take the
 * slot first, thread_runnable queues what a wake-up displaced from it
 * (by_uthread 3); budget SLOT_BUDGET, re-armed at each of our decisions,
 * which count the runtime's runs from the slot (c_slot_runs). */
enum { SLOT_VCORES = 1024, SLOT_BUDGET = 8 };
static struct weft_next_slot slots[SLOT_VCORES];
static unsigned armed[SLOT_VCORES];
static atomic_long c_slot_runs, c_displaced, c_slot_set_errors;

static int init_slot(int nvcores)
{
    init_lifo(nvcores);
    if (nvcores > SLOT_VCORES)
        return ENOTSUP;
    for (int v = 0; v < nvcores; v++) {
        slots[v] = (struct weft_next_slot){ NULL, SLOT_BUDGET, 0 };
        armed[v] = SLOT_BUDGET;
        if (weft_vcore_next_slot_set(v, &slots[v]) != 0)
            atomic_fetch_add(&c_slot_set_errors, 1);
    }
    if (weft_vcore_next_slot_set(nvcores, &slots[0]) != EINVAL ||
        weft_vcore_next_slot_set(-1, &slots[0]) != EINVAL)
        atomic_fetch_add(&c_slot_set_errors, 1);
    return 0;
}

/* slot_take() is the slot of vcore v first (ours only on v), re-armed. */
static struct weft_uthread *slot_take(int v)
{
    struct weft_next_slot *ns = &slots[v];
    atomic_fetch_add(&c_slot_runs, armed[v] - ns->budget);
    ns->budget = armed[v] = SLOT_BUDGET;
    struct weft_uthread *t = __atomic_load_n(&ns->t, __ATOMIC_RELAXED);
    if (t)
        __atomic_store_n(&ns->t, NULL, __ATOMIC_RELAXED);
    return t;
}

static void sched_entry_slot(void)
{
    struct weft_uthread *t = slot_take(weft_vcore_id());
    if (!t) {
        sched_entry_lifo();
        return;
    }
    atomic_fetch_add(&c_entry, 1);
    atomic_fetch_add(&c_run, 1);
    weft_run_uthread(t);
}

static void thread_runnable_slot(struct weft_uthread *t)
{
    if (weft_uthread_link(t)->by_uthread == 3) {
        CHECK(weft_uthread_link(t)->waker == weft_vcore_id(),
              "a uthread displaced from vcore %d's slot reported on vcore %d",
              weft_uthread_link(t)->waker, weft_vcore_id());
        atomic_fetch_add(&c_displaced, 1);
    }
    thread_runnable_lifo(t);
}

static struct weft_uthread *take_local_slot(int vcore)
{
    struct weft_uthread *t = slot_take(vcore);
    if (t) {
        atomic_fetch_add(&c_take_local, 1);
        return t;
    }
    return take_local_lifo(vcore);
}

static struct weft_uthread *take_yield_slot(int vcore, struct weft_uthread *self, int *queued)
{
    struct weft_uthread *t = slot_take(vcore);
    if (t) {
        atomic_fetch_add(&c_take_local, 1);
        return t; /* self: thread_paused */
    }
    return take_yield_lifo(vcore, self, queued);
}

static const struct weft_sched_ops lifo_ops = {
    .name = "test-lifo",
    .init = init_lifo,
    .fini = fini_lifo,
    .sched_entry = sched_entry_lifo,
    .thread_runnable = thread_runnable_lifo,
    .thread_paused = thread_paused_lifo,
    .thread_has_blocked = thread_has_blocked_lifo,
};


/* ---- registration ---------------------------------------------------------------- */

static void check_registration(void)
{
    check_phase("weft_sched_register errors");
    CHECK_RC(weft_sched_register(NULL), EINVAL);
    struct weft_sched_ops bad = lifo_ops;
    bad.name = NULL;
    CHECK_RC(weft_sched_register(&bad), EINVAL);
    static struct weft_sched_ops no_entry, no_runnable, no_paused;
    no_entry = lifo_ops, no_entry.name = "bad-1", no_entry.sched_entry = NULL;
    no_runnable = lifo_ops, no_runnable.name = "bad-2", no_runnable.thread_runnable = NULL;
    no_paused = lifo_ops, no_paused.name = "bad-3", no_paused.thread_paused = NULL;
    CHECK_RC(weft_sched_register(&no_entry), EINVAL);
    CHECK_RC(weft_sched_register(&no_runnable), EINVAL);
    CHECK_RC(weft_sched_register(&no_paused), EINVAL);

    CHECK_RC(weft_sched_register(&lifo_ops), 0);
    CHECK_RC(weft_sched_register(&lifo_ops), EEXIST);
    static struct weft_sched_ops same_name, ws_name, fifo_name;
    same_name = lifo_ops;
    CHECK_RC(weft_sched_register(&same_name), EEXIST);
    ws_name = lifo_ops, ws_name.name = "ws";
    CHECK_RC(weft_sched_register(&ws_name), EEXIST);
    fifo_name = lifo_ops, fifo_name.name = "fifo";
    CHECK_RC(weft_sched_register(&fifo_name), EEXIST);

    struct weft_config c = { .sched = "bad-1" };   /* was refused: unknown */
    CHECK_RC(weft_init(&c), EINVAL);
    c.sched = "no-such";
    CHECK_RC(weft_init(&c), EINVAL);
    CHECK(weft_num_vcores() == 0, "a failed weft_init left %d vcores", weft_num_vcores());
    CHECK(atomic_load(&c_init) == 0, "init op called by a failed weft_init");
}

/* ---- workload -------------------------------------------------------------------------- */

static atomic_long yields_done;
static weft_mutex_t wl_mu = WEFT_MUTEX_INIT;
static long wl_counter;
static weft_sem_t wl_go = WEFT_SEM_INIT(0);   /* posted WL_N times once all are spawned */
static weft_sem_t wl_done = WEFT_SEM_INIT(0); /* posted by each once its yields are done */

static void *wl_thread(void *arg)
{
    uintptr_t i = (uintptr_t)arg;
    CHECK_RC(weft_sem_wait(&wl_go), 0);
    for (int k = 0; k < 3; k++) {
        weft_yield();
        atomic_fetch_add(&yields_done, 1);
    }
    CHECK_RC(weft_sem_post(&wl_done), 0);
    weft_mutex_lock(&wl_mu);
    wl_counter++;
    weft_mutex_unlock(&wl_mu);
    if (i % 10 == 0)
        weft_sleep_ns(100000);
    return (void *)(i + 1);
}

static void *sleepy_child(void *arg)
{
    (void)arg;
    weft_sleep_ns(MS(5));   /* WEFT_BLOCK_SLEEP */
    return (void *)5;
}

static void *joiner(void *arg)
{
    (void)arg;
    return join(spawn(sleepy_child, NULL));   /* WEFT_BLOCK_JOIN */
}

static weft_sem_t blk_sem = WEFT_SEM_INIT(0);
static atomic_int about_to_block;

static void *sem_blocker(void *arg)
{
    (void)arg;
    atomic_store(&about_to_block, 1);
    CHECK_RC(weft_sem_wait(&blk_sem), 0);    /* WEFT_BLOCK_SYNC */
    return NULL;
}

static void *parker(void *arg)
{
    (void)arg;
    atomic_store(&about_to_block, 1);
    CHECK_RC(weft_park(), 0);                /* WEFT_BLOCK_PARK */
    return NULL;
}

static void run_blocking(void *(*fn)(void *), int post_sem)
{
    atomic_store(&about_to_block, 0);
    weft_t t = spawn(fn, NULL);
    WAIT_UNTIL(atomic_load(&about_to_block), "about to block");
    weft_sleep_ns(MS(20));   /* nothing else to run: it blocks meanwhile */
    if (post_sem)
        CHECK_RC(weft_sem_post(&blk_sem), 0);
    else
        CHECK_RC(weft_unpark(t), 0);
    join(t);
}

enum { WL_N = 200 };

/* wl_spawner() spawns the workload and lets it go only when all of it is
 * there (wl_go), so that its yields find one another: otherwise a spawner
 * slower than the uthreads (from main under TSan on a loaded machine, at
 * one vcore; or at two vcores, where the other vcore takes each one as it
 * comes: 10 runs in 60 on a quiet machine) let each finish its yields
 * before the next one came, and take_yield never had a successor to name. */
/* thread_paused calls and yielders queued by take_yield while the workload
 * yielded: from its first spawn until each one's yields are done (it posts
 * wl_done), when nothing else yields. Not while it is joined: a joiner woken
 * by an exit that another vcore has not finished yet yields until it has
 * (weft_join), and a sleep's end may wait out its alarm's callback with
 * weft_yield: the library's yields, which the bound below cannot count. */
static long wl_paused, wl_queued;

static void *wl_spawner(void *arg)
{
    (void)arg;
    long paused = atomic_load(&c_paused), queued = atomic_load(&c_ty_queued);
    weft_t t[WL_N];
    for (uintptr_t i = 0; i < WL_N; i++)
        t[i] = spawn(wl_thread, (void *)i);
    for (int i = 0; i < WL_N; i++)
        CHECK_RC(weft_sem_post(&wl_go), 0);
    for (int i = 0; i < WL_N; i++)
        CHECK_RC(weft_sem_wait(&wl_done), 0);
    wl_paused = atomic_load(&c_paused) - paused;
    wl_queued = atomic_load(&c_ty_queued) - queued;
    for (uintptr_t i = 0; i < WL_N; i++)
        CHECK(join(t[i]) == (void *)(i + 1), "thread %zu result", (size_t)i);
    return NULL;
}

static void run_workload(void)
{
    wl_counter = 0;
    atomic_store(&yields_done, 0);
    in_uthread(wl_spawner, NULL);
    CHECK(wl_counter == WL_N, "counter %ld", wl_counter);
    CHECK(in_uthread(joiner, NULL) == (void *)5, "joiner");
    run_blocking(sem_blocker, 1);
    run_blocking(parker, 0);
}

/* ---- LIFO order at one vcore ---------------------------------------------------------------- */

static int order[3];
static atomic_int order_next;

static void *log_self(void *arg)
{
    order[atomic_fetch_add(&order_next, 1)] = (int)(uintptr_t)arg;
    return NULL;
}

static void *spawn_three(void *arg)
{
    (void)arg;
    weft_t t[3];
    for (uintptr_t i = 0; i < 3; i++)
        t[i] = spawn(log_self, (void *)i);
    for (int i = 0; i < 3; i++)
        join(t[i]);
    return NULL;
}

static void check_lifo_run(const char *how, bool hand_off)
{
    check_phase(how);
    long take_locals = atomic_load(&c_take_local);
    long inits = atomic_load(&c_init), finis = atomic_load(&c_fini);
    CHECK(inits == finis + 1, "init op called %ld times, fini %ld", inits, finis);
    CHECK(atomic_load(&c_init_arg) == weft_num_vcores(), "init got %ld vcores, running %d",
          atomic_load(&c_init_arg), weft_num_vcores());
    long entries = atomic_load(&c_entry), runs = atomic_load(&c_run);
    long runnables = atomic_load(&c_runnable);
    long sleeps = atomic_load(&c_blocked[WEFT_BLOCK_SLEEP]);
    long joins = atomic_load(&c_blocked[WEFT_BLOCK_JOIN]);

    run_workload();
    CHECK(atomic_load(&c_entry) > entries, "sched_entry never called");
    long handed = atomic_load(&c_take_local) - take_locals;
    CHECK(atomic_load(&c_run) - runs + handed >= 200,
          "only %ld uthreads run by our sched_entry and %ld handed off by take_local",
          atomic_load(&c_run) - runs, handed);
    CHECK(atomic_load(&c_runnable) - runnables >= 200, "thread_runnable called %ld times",
          atomic_load(&c_runnable) - runnables);
    long queued = wl_queued, paused = wl_paused;
    if (!hand_off) /* every yield goes through vcore context and thread_paused */
        CHECK(paused >= atomic_load(&yields_done), "thread_paused called %ld times for %ld yields",
              paused, atomic_load(&yields_done));
    else /* a yield that finds nothing local runs on, queued nowhere */
        CHECK(paused + queued > 0 && paused + queued <= atomic_load(&yields_done),
              "thread_paused called %ld times and take_yield queued %ld for %ld yields", paused,
              queued, atomic_load(&yields_done));
    if (hand_off) {
        CHECK(handed > 0, "take_local never handed a uthread off");
        if (weft_num_vcores() == 1)
            CHECK(queued > 0, "take_yield never queued a yielder at one vcore");
    } else {
        CHECK(handed == 0 && queued == 0,
              "take_local or take_yield called for a scheduler without them");
    }
    CHECK(atomic_load(&c_blocked[WEFT_BLOCK_SLEEP]) > sleeps, "no WEFT_BLOCK_SLEEP");
    CHECK(atomic_load(&c_blocked[WEFT_BLOCK_JOIN]) > joins, "no WEFT_BLOCK_JOIN");
    CHECK(atomic_load(&c_blocked[0]) == 0, "thread_has_blocked got an unknown reason");

    if (weft_num_vcores() == 1) {
        atomic_store(&order_next, 0);
        in_uthread(spawn_three, NULL);
        CHECK(order[0] == 2 && order[1] == 1 && order[2] == 0,
              "at one vcore the LIFO scheduler ran %d,%d,%d (want 2,1,0)", order[0], order[1],
              order[2]);
    }
    weft_shutdown();
    CHECK(atomic_load(&c_fini) == finis + 1, "fini op not called by weft_shutdown");
}

static void check_builtin(const char *name)
{
    check_phase(name);
    struct weft_config c = { .sched = name };
    CHECK_RC(weft_init(&c), 0);
    long entries = atomic_load(&c_entry);
    run_workload();
    CHECK(atomic_load(&c_entry) == entries, "built-in %s called our sched_entry", name);
    weft_shutdown();
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    unsetenv("WEFT_SCHED");
    check_registration();

    struct weft_config c = { .sched = "test-lifo" };
    CHECK_RC(weft_init(&c), 0);
    check_lifo_run("LIFO via weft_config.sched", false);
    CHECK(atomic_load(&c_blocked[WEFT_BLOCK_SYNC]) > 0, "no WEFT_BLOCK_SYNC seen");
    CHECK(atomic_load(&c_blocked[WEFT_BLOCK_PARK]) > 0, "no WEFT_BLOCK_PARK seen");

    check_builtin("fifo");
    check_builtin("ws");

    static struct weft_sched_ops lifo_yield_ops; /* lifo_ops with the hand-off ops */
    lifo_yield_ops = lifo_ops, lifo_yield_ops.name = "test-lifo-yield";
    lifo_yield_ops.take_local = take_local_lifo, lifo_yield_ops.take_yield = take_yield_lifo;
    CHECK_RC(weft_sched_register(&lifo_yield_ops), 0);
    c.sched = "test-lifo-yield";
    CHECK_RC(weft_init(&c), 0);
    check_lifo_run("LIFO with take_local and take_yield", true);

    /* The next slot: refused without take_local; with it, the runtime runs
     * the workload partly from the slots, and none is set while running. */
    static struct weft_sched_ops slot_no_take, slot_ops;
    slot_no_take = lifo_ops, slot_no_take.name = "test-lifo-slot-no-take";
    slot_no_take.init = init_slot;
    CHECK_RC(weft_sched_register(&slot_no_take), 0);
    c.sched = "test-lifo-slot-no-take";
    CHECK_RC(weft_init(&c), 0);
    CHECK(atomic_load(&c_slot_set_errors) == weft_num_vcores(),
          "weft_vcore_next_slot_set without take_local: %ld refusals for %d vcores",
          atomic_load(&c_slot_set_errors), weft_num_vcores());
    weft_shutdown();
    slot_ops = lifo_yield_ops, slot_ops.name = "test-lifo-slot";
    slot_ops.init = init_slot, slot_ops.sched_entry = sched_entry_slot;
    slot_ops.thread_runnable = thread_runnable_slot, slot_ops.take_local = take_local_slot;
    slot_ops.take_yield = take_yield_slot;
    CHECK_RC(weft_sched_register(&slot_ops), 0);
    atomic_store(&c_slot_set_errors, 0);
    c.sched = "test-lifo-slot";
    CHECK_RC(weft_init(&c), 0);
    CHECK(atomic_load(&c_slot_set_errors) == 0, "weft_vcore_next_slot_set refused a slot");
    CHECK_RC(weft_vcore_next_slot_set(0, &slots[0]), EBUSY);
    long slot_runs = atomic_load(&c_slot_runs);
    check_lifo_run("LIFO with a next slot", true);
    CHECK(atomic_load(&c_slot_runs) > slot_runs, "the runtime never ran a uthread from a slot");

    setenv("WEFT_SCHED", "test-lifo", 1);
    CHECK_RC(weft_init(NULL), 0);
    check_lifo_run("LIFO via WEFT_SCHED", false);
    setenv("WEFT_SCHED", "no-such", 1);
    CHECK_RC(weft_init(NULL), EINVAL);
    CHECK(weft_num_vcores() == 0, "runtime started with an unknown WEFT_SCHED");
    unsetenv("WEFT_SCHED");
    fprintf(stderr, "sched_api: ok\n");
    return 0;
}
