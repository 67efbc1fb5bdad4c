/*
 * park — weft_park / weft_unpark.
 *
 * Proves: park outside a uthread is EPERM and unpark(NULL) EINVAL; an unpark
 * that comes before the park is kept (park returns at once), from the thread
 * itself, from another uthread and from main; only one token is kept (two
 * unparks then two parks: the second blocks until a third unpark); two
 * uthreads on different vcores ping-pong with park/unpark N times with the
 * count exact and no hang; many parker/unparker pairs (uthreads and a
 * pthread) hand over in lock step without losing a wake-up; a park whose
 * token arrives while it switches out to a local successor (the window
 * weft__ctx_swap_park's compare-and-swap closes: two uthreads hand over on
 * one vcore while a third unparks one of them without pause from another)
 * loses neither the hand-over nor the token.
 */
#include "check.h"

static void *self_token(void *arg)
{
    (void)arg;
    CHECK_RC(weft_unpark(weft_self()), 0);
    CHECK_RC(weft_park(), 0);                /* returns at once */
    CHECK_RC(weft_unpark(NULL), EINVAL);
    return (void *)1;
}

/* ---- one token, not a counter -------------------------------------------------------- */

static atomic_int second_park_started, phase;

static void *one_token(void *arg)
{
    (void)arg;
    CHECK_RC(weft_unpark(weft_self()), 0);
    CHECK_RC(weft_unpark(weft_self()), 0);
    CHECK_RC(weft_park(), 0);
    atomic_store(&second_park_started, 1);
    CHECK_RC(weft_park(), 0);
    CHECK(atomic_load(&phase) == 1, "second park returned on a left-over token");
    return NULL;
}

static void check_one_token(void)
{
    check_phase("only one token is kept");
    weft_t t = spawn(one_token, NULL);
    WAIT_UNTIL(atomic_load(&second_park_started), "second park");
    weft_sleep_ns(MS(20));      /* a second token would have released it by now */
    atomic_store(&phase, 1);
    CHECK_RC(weft_unpark(t), 0);
    join(t);
}

/* ---- unpark before park, from outside -------------------------------------------------- */

static atomic_int unparked_early;

static void *parks_late(void *arg)
{
    (void)arg;
    WAIT_UNTIL(atomic_load(&unparked_early), "early unpark");
    CHECK_RC(weft_park(), 0);   /* the token is already there */
    return (void *)1;
}

static void check_early_unpark(void)
{
    check_phase("unpark before park from main");
    weft_t t = spawn(parks_late, NULL);
    CHECK_RC(weft_unpark(t), 0);
    atomic_store(&unparked_early, 1);
    CHECK(join(t) == (void *)1, "parks_late");
}

/* ---- ping-pong between two vcores ------------------------------------------------------- */

#define PP_ROUNDS SCALE(50000, 5000)

static weft_t _Atomic players[2];
static atomic_int turn, pp_finished;
static long pp_count;                 /* written in turn; ordered by park/unpark */

static void *pp_player(void *arg)
{
    int me = (int)(uintptr_t)arg;
    atomic_store(&players[me], weft_self());
    WAIT_UNTIL(atomic_load(&players[1 - me]) != NULL, "partner started");
    weft_t other = atomic_load(&players[1 - me]);
    for (int i = 0; i < PP_ROUNDS; i++) {
        while (atomic_load(&turn) != me)
            CHECK_RC(weft_park(), 0);
        CHECK(pp_count == 2L * i + me, "count %ld at round %d of player %d", pp_count, i, me);
        pp_count++;
        atomic_store(&turn, 1 - me);
        CHECK_RC(weft_unpark(other), 0);
    }
    /* Stay alive until the partner's last unpark of us has returned. */
    atomic_fetch_add(&pp_finished, 1);
    WAIT_UNTIL(atomic_load(&pp_finished) == 2, "partner finished");
    return NULL;
}

static void check_ping_pong(void)
{
    check_phase("park/unpark ping-pong");
    int nv = weft_num_vcores();
    unsigned flags = nv >= 2 ? WEFT_PINNED : 0;
    weft_t a = spawn_ex(pp_player, (void *)0, flags, 0, "pp0");
    weft_t b = spawn_ex(pp_player, (void *)1, flags, nv >= 2 ? 1 : 0, "pp1");
    join(a);
    join(b);
    CHECK(pp_count == 2L * PP_ROUNDS, "count %ld, expected %ld", pp_count, 2L * PP_ROUNDS);
}

/* ---- many pairs in lock step -------------------------------------------------------------- */

#define NPAIRS 16
#define STEPS SCALE(2000, 300)

struct pair {
    weft_t _Atomic parker;
    atomic_int sent, received;
};

static struct pair pairs[NPAIRS + 1];   /* the last one's unparker is a pthread */

static void *parker(void *arg)
{
    struct pair *p = arg;
    atomic_store(&p->parker, weft_self());
    for (int i = 0; i < STEPS; i++) {
        while (atomic_load(&p->sent) <= i)
            CHECK_RC(weft_park(), 0);
        atomic_store(&p->received, i + 1);
        if (i % 7 == 0)
            weft_yield();
    }
    return NULL;
}

static void *unparker(void *arg)
{
    struct pair *p = arg;
    WAIT_UNTIL(atomic_load(&p->parker) != NULL, "parker started");
    weft_t t = atomic_load(&p->parker);
    for (int i = 0; i < STEPS; i++) {
        atomic_store(&p->sent, i + 1);
        CHECK_RC(weft_unpark(t), 0);
        WAIT_UNTIL(atomic_load(&p->received) > i, "parker woke for this step");
    }
    return NULL;
}

static void check_pairs(void)
{
    check_phase("parker/unparker pairs");
    weft_t pk[NPAIRS + 1], up[NPAIRS];
    for (int i = 0; i <= NPAIRS; i++)
        pk[i] = spawn(parker, &pairs[i]);
    for (int i = 0; i < NPAIRS; i++)
        up[i] = spawn(unparker, &pairs[i]);
    pthread_t pt = start_pthread(unparker, &pairs[NPAIRS]);
    for (int i = 0; i < NPAIRS; i++)
        join(up[i]);
    join_pthread(pt);
    for (int i = 0; i <= NPAIRS; i++) {
        join(pk[i]);
        CHECK(atomic_load(&pairs[i].received) == STEPS, "pair %d received %d", i,
              atomic_load(&pairs[i].received));
    }
}

/* ---- tokens that arrive during the switch out ------------------------------------------ */

#define RACE_ROUNDS SCALE(100000, 10000)

static weft_t _Atomic race_p, race_q;
static atomic_long race_pturn, race_qturn, race_spam;
static atomic_int race_stop, race_p_done, race_spam_started;

/* P and Q hand over by park/unpark on one vcore, so each park has a local
 * successor; P's parks also race the spammer's unparks. */
static void *race_pq(void *arg)
{
    int is_p = arg != NULL;
    atomic_store(is_p ? &race_p : &race_q, weft_self());
    /* The spammer first: spawned last from main, it could otherwise come
     * after P and Q have finished (an ASan run at one vcore did). */
    WAIT_UNTIL(atomic_load(&race_p) != NULL && atomic_load(&race_q) != NULL &&
                   atomic_load(&race_spam_started),
               "partner and spammer started");
    weft_t other = atomic_load(is_p ? &race_q : &race_p);
    atomic_long *mine = is_p ? &race_pturn : &race_qturn, *theirs = is_p ? &race_qturn : &race_pturn;
    for (long i = 0; i < RACE_ROUNDS; i++) {
        if (is_p) {
            while (atomic_load(mine) <= i)
                CHECK_RC(weft_park(), 0);
            atomic_fetch_add(theirs, 1);
            CHECK_RC(weft_unpark(other), 0);
        } else {
            atomic_fetch_add(theirs, 1);
            CHECK_RC(weft_unpark(other), 0);
            while (atomic_load(mine) <= i)
                CHECK_RC(weft_park(), 0);
        }
    }
    if (is_p)
        atomic_store(&race_p_done, 1);
    return NULL;
}

static void *race_spammer(void *arg)
{
    (void)arg;
    WAIT_UNTIL(atomic_load(&race_p) != NULL, "P started");
    weft_t p = atomic_load(&race_p);
    atomic_store(&race_spam_started, 1); /* race_stop comes after P's rounds, so we unpark */
    while (!atomic_load(&race_stop)) {
        CHECK_RC(weft_unpark(p), 0);
        atomic_fetch_add_explicit(&race_spam, 1, memory_order_relaxed);
        if (weft_num_vcores() < 2)
            weft_yield(); /* one vcore: let P and Q run */
    }
    return NULL;
}

static void check_token_during_switch(void)
{
    check_phase("tokens that arrive during the switch out");
    int nv = weft_num_vcores();
    weft_t p = spawn_ex(race_pq, (void *)1, WEFT_PINNED, 0, "race-p");
    weft_t q = spawn_ex(race_pq, NULL, WEFT_PINNED, 0, "race-q");
    weft_t s = spawn_ex(race_spammer, NULL, WEFT_PINNED, nv >= 2 ? 1 : 0, "race-spam");
    join(q);
    WAIT_UNTIL(atomic_load(&race_p_done), "P finished");
    atomic_store(&race_stop, 1);
    join(s); /* its last unpark of P has returned: P may be joined (freed) now */
    join(p);
    CHECK(atomic_load(&race_pturn) == RACE_ROUNDS && atomic_load(&race_qturn) == RACE_ROUNDS,
          "hand-overs %ld and %ld, expected %ld", atomic_load(&race_pturn), atomic_load(&race_qturn),
          (long)RACE_ROUNDS);
    CHECK(atomic_load(&race_spam) > 0, "the spammer never ran");
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_phase("rows");
    CHECK_RC(weft_park(), EPERM);
    CHECK_RC(weft_unpark(NULL), EINVAL);
    CHECK(in_uthread(self_token, NULL) == (void *)1, "self_token");
    check_one_token();
    check_early_unpark();
    check_ping_pong();
    check_pairs();
    check_token_during_switch();
    fprintf(stderr, "park: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
