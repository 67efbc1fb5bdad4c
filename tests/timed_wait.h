/*
 * timed_wait.h — the timed-wait checks every blocking primitive's test runs
 * on its own primitive (mutex.c, cond.c, sem.c, futex.c, rwlock.c).
 *
 * A test describes its primitive as a struct tw_prim (make it unavailable,
 * make it available again, acquire it with a deadline) and calls
 * tw_check(prims, n). For each primitive, with the waiter in a uthread and
 * a holder uthread, in a uthread and a holder pthread, and in main and a
 * holder uthread:
 *  - a wait on the held primitive times out, not before its deadline and
 *    not long after it (TW_LATE_NS);
 *  - a past deadline (1, now - 1) times out at once, a top-bit deadline is
 *    EINVAL;
 *  - released 20 ms later by its holder, the wait succeeds before its
 *    deadline.
 * Include after check.h.
 */
#ifndef WEFT_TESTS_TIMED_WAIT_H
#define WEFT_TESTS_TIMED_WAIT_H

#define TW_LATE_NS SCALE(MS(200), MS(2000))     /* how late a timeout may come */
#define TW_BAD_DEADLINE ((uint64_t)1 << 63)

struct tw_prim {
    const char *name;
    void (*hold)(void);               /* make it unavailable (holder thread) */
    void (*release)(void);            /* make it available (same holder thread) */
    int (*timed)(uint64_t deadline);  /* acquire with a deadline; on 0 undo it */
};

static inline double tw_ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* The holder: takes the primitive, says so, waits to be told (or a delay),
 * releases. Runs as a uthread or a pthread. */
static struct {
    const struct tw_prim *p;
    uint64_t release_after;        /* 0: wait for `go` instead */
    atomic_int held, go;
} tw_holder;

static void *tw_holder_main(void *arg)
{
    (void)arg;
    tw_holder.p->hold();
    uint64_t t0 = weft_now_ns();
    atomic_store(&tw_holder.held, 1);
    if (tw_holder.release_after) {
        while (weft_now_ns() - t0 < tw_holder.release_after)
            weft_sleep_ns(MS(1));
    } else {
        WAIT_UNTIL(atomic_load(&tw_holder.go), "told to release");
    }
    tw_holder.p->release();
    return NULL;
}

struct tw_handle {
    int is_pthread;
    weft_t u;
    pthread_t th;
};

static inline struct tw_handle tw_start_holder(const struct tw_prim *p, uint64_t release_after,
                                               int as_pthread)
{
    tw_holder.p = p;
    tw_holder.release_after = release_after;
    atomic_store(&tw_holder.held, 0);
    atomic_store(&tw_holder.go, 0);
    struct tw_handle h = { .is_pthread = as_pthread };
    if (as_pthread)
        h.th = start_pthread(tw_holder_main, NULL);
    else
        h.u = spawn(tw_holder_main, NULL);
    WAIT_UNTIL(atomic_load(&tw_holder.held), "holder took the primitive");
    return h;
}

static inline void tw_finish_holder(struct tw_handle h)
{
    atomic_store(&tw_holder.go, 1);
    if (h.is_pthread)
        join_pthread(h.th);
    else
        join(h.u);
}

/* One waiter's round on each primitive; holder_kind 0 uthread, 1 pthread. */
static inline void tw_rounds(const struct tw_prim *prims, int n, const char *where,
                             int holder_kind)
{
    for (int i = 0; i < n; i++) {
        const struct tw_prim *p = &prims[i];

        /* Times out: not before the deadline, not long after. */
        struct tw_handle h = tw_start_holder(p, 0, holder_kind);
        uint64_t dl = weft_now_ns() + MS(40);
        int rc = p->timed(dl);
        uint64_t now = weft_now_ns();
        CHECK(rc == ETIMEDOUT, "%s (%s): returned %d (%s), expected ETIMEDOUT", p->name, where,
              rc, check_errname(rc));
        CHECK(now >= dl, "%s (%s): timed out %llu ns before the deadline", p->name, where,
              (unsigned long long)(dl - now));
        CHECK(now - dl < TW_LATE_NS, "%s (%s): timed out %.1f ms after the deadline", p->name,
              where, tw_ms(now - dl));

        /* Past deadline: at once. Top-bit deadline: EINVAL. */
        uint64_t t0 = weft_now_ns();
        CHECK_RC(p->timed(1), ETIMEDOUT);
        CHECK_RC(p->timed(weft_now_ns() - 1), ETIMEDOUT);
        CHECK(weft_now_ns() - t0 < TW_LATE_NS, "%s (%s): a past deadline waited %.1f ms",
              p->name, where, tw_ms(weft_now_ns() - t0));
        CHECK_RC(p->timed(TW_BAD_DEADLINE), EINVAL);
        tw_finish_holder(h);

        /* Released in time: succeeds before the deadline. */
        h = tw_start_holder(p, MS(20), holder_kind);
        dl = weft_now_ns() + SCALE(MS(3000), MS(20000));
        rc = p->timed(dl);
        now = weft_now_ns();
        CHECK(rc == 0, "%s (%s): released after 20 ms, returned %d (%s)", p->name, where, rc,
              check_errname(rc));
        CHECK(now < dl, "%s (%s): succeeded only after the deadline", p->name, where);
        tw_finish_holder(h);
    }
}

static struct {
    const struct tw_prim *prims;
    int n, holder_kind;
} tw_args;

static void *tw_rounds_uthread(void *arg)
{
    (void)arg;
    tw_rounds(tw_args.prims, tw_args.n, "uthread waiter", tw_args.holder_kind);
    return (void *)1;
}

/* tw_check() runs the rounds with each kind of waiter and holder. */
static inline void tw_check(const struct tw_prim *prims, int n)
{
    tw_args.prims = prims;
    tw_args.n = n;
    check_phase("timed waits: uthread waiter, uthread holder");
    tw_args.holder_kind = 0;
    CHECK(in_uthread(tw_rounds_uthread, NULL) == (void *)1, "rounds");
    check_phase("timed waits: uthread waiter, pthread holder");
    tw_args.holder_kind = 1;
    CHECK(in_uthread(tw_rounds_uthread, NULL) == (void *)1, "rounds");
    check_phase("timed waits: main waiter, uthread holder");
    tw_rounds(prims, n, "main waiter", 0);
}

#endif
