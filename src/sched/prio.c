/*
 * prio.c — the priority scheduler (WEFT_SCHED=prio): 64 levels, the most
 * urgent runnable uthread first.
 *
 * Written only against <weft/sched.h>, like an application's scheduler.
 * The idea is SharedScheduler's (a ready queue per priority and a bitmap of
 * the non-empty ones, find-first-set picks the level); the per-vcore shape
 * and the wake-up slot are ws's.
 *
 * Vocabulary. A uthread's level is its priority + 32 (0..63, 63 the most
 * urgent); link.prio is the effective priority (weft_setprio, inheritance
 * by weft mutexes). Each vcore has a queue per level (FIFO: a ring of
 * pointers, see "level queues" below) and a 64-bit word, bits, with bit l
 * set while level l is not empty; a `next` slot (the wake-up slot); an
 * inbox where other threads leave uthreads when they may not touch the
 * queues.
 *
 * Where a runnable uthread goes (thread_runnable, thread_paused):
 *  - woken by the uthread running on vcore v (or by its blocking callback,
 *    an exit waking its joiner): v's next slot (a woken uthread follows its
 *    waker, as in ws); what it displaces goes to the back of its level,
 *    except with one vcore online: there it goes to the front of its level
 *    (ws's prev slot: a group of uthreads that keep waking each other runs
 *    on while its state is cached), unless the last one put there is still
 *    queued or this is the FRONT_RUNS-th in a row; with several online,
 *    under the same rule, to v's front slot (see "The front slot" below)
 *    while its level holds others a thief may take;
 *  - spawned by a uthread on v: next if it is free, else the back of its
 *    level on v, with a kick;
 *  - made runnable in vcore context of v (alarms, events, the poller): the
 *    back of its level on v, with a kick;
 *  - paused (weft_yield, a preemption): the back of its level on its vcore
 *    (with one vcore online, a yield's take_yield swaps it with the front
 *    of its level when that level is the most urgent queued);
 *  - from a kernel thread that is not a vcore, from an offline vcore, or
 *    for another vcore (placed at spawn, pinned): that vcore's queue (under
 *    its lock) or inbox (when the owner does not lock, see Modes), and the
 *    vcore is woken (pinned, placed) or a parked one kicked.
 *
 * What a vcore runs next (take): the inbox and other requests first (see
 * Modes); then next, if nothing queued on this vcore is more urgent, at
 * most NEXT_CHAIN decisions in a row while others of its level wait (two
 * uthreads waking each other cannot starve their level: when the chain is
 * up, the front of the level runs once, next staying where it is, as in
 * ws); else the front of the most urgent non-empty level.
 * So within a level uthreads run in the order they were queued, except a
 * uthread woken by the one running, which may go first (Go's runnext: the
 * woken one's data is in the cache now). Then, in sched_entry only,
 * stealing: the thief compares every other online vcore's bits (a hint),
 * takes from the victim with the most urgent non-empty level, more urgent
 * than its own best, half of that level's unpinned front (at most
 * STEAL_MAX): never a lower level while a higher one is queued anywhere
 * the thief looked. next is never stolen; a thief that finds only next
 * slots of busy vcores watches them and pokes one that makes no decision
 * (poked moves next to its level, stealable), as ws does. A vcore that
 * keeps finding local work (take_local) still looks elsewhere: at every
 * slow look (each SLOW_EVERY-th decision) it reads one other busy vcore's
 * bits, in turn, and if they hold a level more urgent than what it was
 * about to run, it goes to sched_entry to steal instead (want_steal). A
 * more urgent uthread queued behind a busy vcore's hog so waits at most
 * about SLOW_EVERY x vcores decisions of a vcore that hands off less
 * urgent work, not for as long as that hand-off goes on (one look per
 * decision would cost each decision a cache miss per vcore).
 *
 * Preemption. A uthread made runnable for vcore v more urgent than the one
 * v runs (cur, a hint each vcore publishes at every pick) preempts it at
 * once when a preemption period is set (weft_vcore_preempt: a notification
 * for another vcore, the next safe point of the waker on its own;
 * should_preempt confirms with the uthread actually interrupted), otherwise
 * it waits for the next scheduling point, as the cooperative model says. A
 * uthread that lowers its own priority below queued work, or raises
 * another's above it on its vcore, gives way at weft_setprio's return
 * whatever the period. Paused uthreads go to the back of their level
 * (round robin within a level, SCHED_RR-like).
 *
 * Modes. With one vcore online the owner uses plain loads and stores, no
 * lock: the yield and hand-off paths cost what ws's do. Anyone else leaves
 * work in the inbox (a locked list), and a change of a queued uthread's
 * priority made elsewhere is a request (P_RESORT) the owner carries out
 * before its next pick. With several online, each vcore's queues are
 * guarded by its lock (thieves take from them); the owner switches between
 * the two at a decision (P_MODE), others test `locking` under the lock and
 * fall back to the inbox when it is off. next, the chain and the board
 * state stay the owner's alone in both.
 *
 * Priority changes (thread_prio_changed) of a uthread that is not the
 * caller: it may be queued anywhere, or being queued this moment, so the
 * change takes every vcore's lock in order (no queue operation is under way
 * anywhere meanwhile), moves it if it is queued at the wrong level, and
 * asks owners that do not lock to re-sort (P_RESORT). A change of oneself
 * is local.
 *
 * Aging (WEFT_PRIO_AGING_MS, off by default, as in the paper): every
 * SLOW_EVERY decisions a vcore looks at the head of each level below its
 * most urgent one; a head that has not moved for the aging period is moved
 * to the back of the most urgent level (F_AGED; it returns to its own
 * level when it next runs). The least urgent level then waits at most
 * about an aging period per uthread ahead of it.
 *
 * The board (<weft/board.h>): each vcore publishes the most urgent level
 * it has ready (running, next or queued) whenever that changes, and clears
 * it when it idles. sched_entry gives the CPU away (weft_vcore_cede, one
 * preemption period or 1 ms at a time) rather than run a uthread less
 * urgent than what another process has ready on the same CPU; a wake-up of
 * more urgent work here pokes the ceding vcore. And at each such decision
 * (kernel_yield) a vcore about to run a uthread less urgent than what
 * another process published on its CPU recently, ready now or asleep
 * (weft_board_recent), runs its thread under the kernel's idle policy, so
 * that the other process's vcore gets the CPU the moment it wakes rather
 * than at the end of our kernel time slice; it leaves that policy at the
 * first decision that finds nothing more urgent elsewhere, or on detach.
 *
 * The front slot. With several vcores online the queues are locked, and a
 * displaced uthread queued at its level's front and picked a few
 * decisions later cost the owner two lock round trips and a kick: the
 * ring benchmark at 2 vcores ran at 0.7x ws's rate. So while the process
 * is flat (no `mixed`) a displaced uthread goes to the owner's front slot
 * instead, as ws's prev: it stands for the front of its level (front_lv),
 * the owner's alone, never stolen (a thief that finds only next or front
 * slots of a vcore that makes no decisions pokes it, and poked queues
 * both), filled only while its level holds others a thief may take, so
 * it hides no work that another vcore could run. Every owner pick counts
 * it as queued at front_lv (owned_bits) and takes it before the level's
 * queue; what it holds is checked at the pick (level_of), as next's is.
 *
 * Run-time vcore counts (vcore_up/vcore_down): a vcore going down hands
 * next, its front slot, its levels and its inbox to online vcores; pushes
 * check `online` under the lock they take and go elsewhere once it is off.
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <weft/sched.h>

#define NLEVELS WEFT_PRIO_LEVELS
#define NEXT_CHAIN 16        /* decisions in a row from next */
#define FRONT_RUNS 32        /* displaced uthreads put at their level's front per one
                                put at its back (ws's PREV_RUNS) */
#define SLOW_EVERY 61        /* decisions between looks at aging and the mode */
#define STEAL_MAX 32         /* uthreads one steal takes at most */
#define WATCH_EVERY 128      /* a thief looks at busy vcores' next every 128th round
                                (rarely: each look costs the busy vcore a miss, ws.c) */
#define POKE_LOOKS 1         /* looks after the first that find next stuck: a poke */
#define LAST_LOOK_NS 20000   /* a parking vcore's wait to see if a next is stuck */
#define NONE (-1)            /* no level: an idle vcore's cur, an empty queue's top */

/* sched_flags (read anywhere with relaxed atomics; written by whoever holds
 * the uthread: the queue's owner or lock holder, or its waker) */
#define F_RAN    0x1u        /* has been picked to run before */
#define F_QUEUED 0x2u        /* on level F_LV of vcore F_VC's queues */
#define F_AGED   0x4u        /* queued above its own level by aging */
#define F_LV(f) (((f) >> 8) & 63u)
#define F_VC(f) ((int)((f) >> 16))
#define F_AT(v, l) (F_QUEUED | (unsigned)(l) << 8 | (unsigned)(v) << 16)

/* pending: what others ask of the owner (set with an RMW, taken by it) */
#define P_INBOX  0x1u        /* the inbox has uthreads */
#define P_RESORT 0x2u        /* a queued uthread's priority changed: re-sort */
#define P_MODE   0x4u        /* the online count changed: check `locking` */

struct level {                       /* 32 bytes: an index is a shift */
    struct weft_uthread **v;         /* ring of slots, mask + 1 of them (or NULL, mask 0) */
    uint32_t head, tail;             /* slots head..tail-1 are in use (counters) */
    uint32_t mask;
    uint32_t live;                   /* uthreads in them (the others were taken out) */
    uint32_t pinned;                 /* WEFT_PINNED ones among them (a uthread's flag
                                        changes only while it is not queued), so that
                                        a thief need not read every uthread it takes */
    uint32_t tag;                    /* F_RAN | F_AT(its vcore, its level): fixed */
};

_Static_assert(sizeof(struct level) == 32, "struct level: 32 bytes");

struct seen {                        /* aging, per level (the owner's) */
    struct weft_uthread *t;          /* the first one queued at the last look */
    uint64_t at;                     /* ... and when it was first seen there */
};

struct pq {
    union {
    struct {
    /* Owner only. */
    struct weft_next_slot ns;        /* next (ns.t, the wake-up slot; thieves read it,
                                        relaxed), also the runtime's (see "The runtime's
                                        slot"); ns.ask: anyone may set it */
    unsigned armed;                  /* ns.budget as arm() set it */
    unsigned chain;                  /* decisions in a row taken from next */
    struct weft_uthread *fronted;    /* the last displaced uthread put at a level's front
                                        (compared, never read: it may be freed) */
    int fronted_lv;                  /* ... and that level */
    unsigned front_runs;             /* displaced ones put at a front since one went back */
    struct weft_uthread *front;      /* only while locking: a displaced uthread held
                                        ahead of its level instead of queued (see "The
                                        front slot"); thieves read it (relaxed), a hint */
    int front_lv;                    /* the level it had when put there (a hint) */
    unsigned slow_tick;              /* decisions until the next slow look */
    bool board;                      /* the process is attached to a board */
    bool slow;                       /* board || ovf: take_local's fast path is off */
    int published;                   /* the level last published to it, or NONE */
    int poke_victim;                 /* as a thief: the vcore whose stuck next we watch */
    unsigned watch_tick, poke_looks; /* steal rounds; looks that found it stuck */
    int look_at;                     /* the vcore the next slow look reads (urgent_elsewhere) */
    uint64_t poke_decisions;         /* its decision count when we began watching */
    /* bit l: level l not empty; written with the queues, read anywhere (a
     * hint): on a line of its own, which thieves looking for work read
     * without taking the lock's line from whoever holds it. */
    _Alignas(64) _Atomic uint64_t bits;
    /* The queues: the owner's alone while !locking, else guarded by lock. */
    _Alignas(64) _Atomic uint32_t lock; /* qlock() */
    bool locking;                    /* the owner's mode: written under lock by the owner */
    bool online;                     /* vcore_up/down; written under lock and inbox_lock */
    struct level lv[NLEVELS];
    struct seen seen[NLEVELS];       /* aging's (age(), the owner's) */
    struct weft_ulist ovf;           /* could not be queued for want of memory (lv_overflow) */
    /* Read and written by others. */
    _Alignas(64) _Atomic int cur;    /* level of the uthread it runs, or NONE; the owner
                                        writes at each pick, others read (a hint) */
    _Atomic bool ceding;             /* in weft_vcore_cede for the board */
    _Atomic bool want_steal;         /* asked to look at others' queues first */
    _Alignas(64) _Atomic unsigned pending; /* P_*: others set, the owner takes */
    weft_spinlock_t inbox_lock;
    struct weft_ulist inbox;         /* guarded by inbox_lock */
    };
    char size_[4096];                /* a power of two: pqs[me] is a shift, not a
                                        multiply, on the yield path's critical chain */
    };
};

_Static_assert(sizeof(struct pq) == 4096, "struct pq: 4096 bytes");

static struct pq *pqs;               /* one per vcore; fixed between init and fini */
static int npq;
static struct pq *volatile parents_pqs; /* a fork child's copy of the parent's (init) */
static _Atomic int nup;              /* vcores online (vcore_up minus vcore_down) */
static _Atomic unsigned rr;          /* round robin over online vcores */
static uint64_t aging_ns;            /* WEFT_PRIO_AGING_MS; 0 = off */
static _Atomic bool mixed;           /* a level other than FLAT_LEVEL was seen, or aging
                                        is on (sticky): the runtime's slot is off */
#define FLAT_LEVEL (0 - WEFT_PRIO_MIN) /* the default priority's level */

static inline struct weft_sched_link *L(struct weft_uthread *t)
{
    return weft_uthread_link(t);
}

static inline int level_of(struct weft_uthread *t)
{
    return weft_uthread_prio(t) - WEFT_PRIO_MIN;
}

static inline unsigned flags_of(struct weft_uthread *t)
{
    return atomic_load_explicit((_Atomic unsigned *)&L(t)->sched_flags, memory_order_relaxed);
}

static inline void flags_set(struct weft_uthread *t, unsigned f)
{
    atomic_store_explicit((_Atomic unsigned *)&L(t)->sched_flags, f, memory_order_relaxed);
}

/* is_pinned(): t is WEFT_PINNED, expected not. (The level counts update
 * `pinned` behind this branch rather than by adding the flag, which gcc
 * pairs with the `live` update in one vector load and store.) */
static inline bool is_pinned(struct weft_uthread *t)
{
    return __builtin_expect((L(t)->flags & WEFT_PINNED) != 0, 0);
}

static inline int top_of(uint64_t bits)
{
    return bits ? 63 - __builtin_clzll(bits) : NONE;
}

static inline uint64_t bits_of(struct pq *q)
{
    return atomic_load_explicit(&q->bits, memory_order_relaxed);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline bool preempting(void)
{
    return weft_preempt_period() != 0;
}

/* ---- the runtime's slot ---------------------------------------------------------
 *
 * next is the runtime's next slot too (struct weft_next_slot in
 * <weft/sched.h>): a wake-up here by a uthread of one that last ran here
 * fills it without thread_runnable (what it displaces comes with
 * by_uthread 3), and a block here takes it without take_local while
 * ns.budget lasts and ns.ask is clear. That skips every look take_local
 * and thread_runnable make at the uthread's level (more urgent work queued
 * first, a preemption for a more urgent wake-up, the board), so the slot
 * is the runtime's only while the process is flat: every uthread seen so
 * far at the default priority (FLAT_LEVEL), no aging, no board. The first
 * uthread seen at another level (made runnable, or its priority changed)
 * or a board takes the slots away for good (go_mixed, `mixed`); a wake-up
 * or a decision already under way on another vcore may still use its slot
 * once, for a uthread at the flat level or one raised a moment ago. While
 * the slot is ours alone, next works as it did before. ns.ask stands for
 * a pending request or q->slow: set by ask(), and by arm() from what it
 * reads, so that the owner's take_local looks; a request that comes as arm
 * reads waits for the decision after the runs arm allowed (at most
 * NEXT_CHAIN). settle(), first in each decision of ours, counts the runs
 * the runtime made as decisions from next (chain, slow_tick); arm() at its
 * end allows what take_local would take in a row from next, short of the
 * next slow look. */
static inline struct weft_uthread *next_of(struct pq *q)
{
    return __atomic_load_n(&q->ns.t, __ATOMIC_RELAXED);
}

static inline void next_set(struct pq *q, struct weft_uthread *t)
{
    __atomic_store_n(&q->ns.t, t, __ATOMIC_RELAXED);
}

static inline struct weft_uthread *front_of(struct pq *q)
{
    return __atomic_load_n(&q->front, __ATOMIC_RELAXED);
}

static inline void front_set(struct pq *q, struct weft_uthread *t)
{
    __atomic_store_n(&q->front, t, __ATOMIC_RELAXED);
}

/* owned_bits() is bits with the front slot's level counted as queued: what
 * the owner compares next and its levels with. */
static inline uint64_t owned_bits(struct pq *q)
{
    uint64_t b = bits_of(q);
    if (__builtin_expect(front_of(q) != NULL, 0))
        b |= 1ull << q->front_lv;
    return b;
}

static inline void settle(struct pq *q)
{
    unsigned used = q->armed - q->ns.budget;
    if (__builtin_expect(used != 0, 0)) {
        q->chain += used;
        q->slow_tick -= used;
        q->armed = q->ns.budget;
    }
}

static inline void arm(struct pq *q)
{
    bool off = q->slow || atomic_load_explicit(&q->pending, memory_order_relaxed);
    unsigned b = 0;
    uint64_t bits = owned_bits(q);
    if (!off && (q->chain < NEXT_CHAIN || !bits)) { /* the chain: others queued */
        b = bits ? NEXT_CHAIN - q->chain : SLOW_EVERY;
        if (b >= q->slow_tick)
            b = q->slow_tick ? q->slow_tick - 1 : 0; /* the slow look is take_local's */
    }
    __atomic_store_n(&q->ns.ask, off, __ATOMIC_RELAXED);
    q->ns.budget = q->armed = b;
}

/* go_mixed(): a uthread at a level other than FLAT_LEVEL, or a board: the
 * runtime's slots taken away (next stays ours). */
static __attribute__((noinline)) void go_mixed(void)
{
    if (atomic_exchange_explicit(&mixed, true, memory_order_relaxed))
        return;
    for (int i = 0; i < npq; i++)
        weft_vcore_next_slot_set(i, NULL);
}

static inline void note_level(int l)
{
    if (__builtin_expect(l != FLAT_LEVEL, 0) && !atomic_load_explicit(&mixed, memory_order_relaxed))
        go_mixed();
}

/* ---- level queues (the owner, or the lock holder) --------------------------------- */

/* Each level is a ring of uthread pointers (FIFO, growing by doubling),
 * not a list through the uthreads: popping from a list reads the popped
 * uthread's line to find the next one, which with thousands of uthreads
 * is a cache and TLB miss on the hot path (the ring costs what ws's rings
 * do: the report's priocost section). A queued
 * uthread's slot number is in its link.data, so it can be taken out from
 * anywhere (a priority change, a steal that skips pinned ones): its slot
 * becomes NULL, which pops skip. A push that finds the ring full rebuilds
 * it (twice the live count, at least RING_MIN slots; the slot numbers are
 * written again); if memory runs out the uthread goes to the vcore's ovf
 * list instead, run after everything else: nothing is lost. */
#define RING_MIN 64u

/* lv_room(): a slot is free. One slot always stays empty, so that a level
 * without a ring (v NULL, mask 0) has none without a test of its own. */
static inline bool lv_room(struct level *lv)
{
    return lv->tail - lv->head < lv->mask;
}

/* lv_rebuild() gives level lv room for one more: false if out of memory. */
static __attribute__((noinline)) bool lv_rebuild(struct level *lv)
{
    uint32_t cap = RING_MIN;
    while (cap < 2 * lv->live + 2)
        cap *= 2;
    struct weft_uthread **v = malloc(sizeof *v * cap);
    if (!v)
        return false;
    uint32_t n = 0;
    for (uint32_t i = lv->head; i != lv->tail; i++) {
        struct weft_uthread *t = lv->v[i & lv->mask];
        if (t) {
            v[n] = t;
            L(t)->data = (void *)(uintptr_t)n++;
        }
    }
    free(lv->v);
    lv->v = v;
    lv->head = 0;
    lv->tail = n;
    lv->mask = cap - 1;
    return true;
}

/* The bit of level l follows its live count: set when it goes 0 -> 1,
 * cleared when it goes 1 -> 0 (one writer: the owner or the lock holder). */
static inline void lv_bit(struct pq *q, int l, bool set)
{
    uint64_t b = bits_of(q), m = 1ull << l;
    atomic_store_explicit(&q->bits, set ? b | m : b & ~m, memory_order_relaxed);
    if (set && !b)
        __atomic_store_n(&q->ns.ask, 1, __ATOMIC_RELAXED); /* arm()'s budget ignored the chain */
}

/* lv_overflow() is the last resort of a push with no memory to grow. */
static __attribute__((noinline)) void lv_overflow(struct pq *q, struct weft_uthread *t)
{
    q->slow = true; /* the fast path does not look at ovf; pick() does (set_mode) */
    flags_set(t, F_RAN);
    weft_ulist_push(&q->ovf, t);
}

static void lv_push_back_slow(struct pq *q, struct weft_uthread *t, int l, unsigned keep);

/* lv_push_back() queues t at the back of level l of queues q:
 * inline without a stack frame (the callback of a hand-off runs it on the
 * next uthread's stack, where every new line is a cache miss). */
static inline __attribute__((always_inline)) void lv_push_back(struct pq *q,
                                                               struct weft_uthread *t, int l,
                                                               unsigned keep)
{
    struct level *lv = &q->lv[l];
    __asm__("" : "+r"(lv)); /* one base register for every field (gcc made two) */
    uint32_t i = lv->tail, m = lv->mask, live = lv->live;
    if (__builtin_expect(i - lv->head >= m, 0)) { /* !lv_room(lv) */
        lv_push_back_slow(q, t, l, keep); /* a tail call */
        return;
    }
    lv->tail = i + 1;
    lv->live = live + 1;
    lv->v[i & m] = t;
    L(t)->data = (void *)(uintptr_t)i;
    flags_set(t, lv->tag | keep); /* F_RAN: only a blocked one's matters */
    if (is_pinned(t))
        lv->pinned++;
    if (live == 0)
        lv_bit(q, l, true);
}

static __attribute__((noinline)) void lv_push_back_slow(struct pq *q, struct weft_uthread *t,
                                                        int l, unsigned keep)
{
    if (lv_rebuild(&q->lv[l]))
        lv_push_back(q, t, l, keep);
    else
        lv_overflow(q, t);
}

static void lv_push_front(struct pq *q, struct weft_uthread *t, int l)
{
    struct level *lv = &q->lv[l];
    if (!lv_room(lv) && !lv_rebuild(lv)) {
        lv_overflow(q, t);
        return;
    }
    uint32_t i = --lv->head;
    lv->v[i & lv->mask] = t;
    L(t)->data = (void *)(uintptr_t)i;
    flags_set(t, lv->tag);
    if (is_pinned(t))
        lv->pinned++;
    if (lv->live++ == 0)
        lv_bit(q, l, true);
}

/* front_queue() moves the front slot's uthread f to the front of its level
 * (the owner, holding the lock while locking). */
static void front_queue(struct pq *q, struct weft_uthread *f)
{
    front_set(q, NULL);
    lv_push_front(q, f, level_of(f));
}

/* lv_took() counts n uthreads taken out of level l of q; a level left
 * empty starts afresh at its tail and loses its bit. True if it emptied. */
static inline bool lv_took(struct pq *q, struct level *lv, int l, uint32_t n)
{
    lv->live -= n;
    if (lv->live != 0)
        return false;
    lv->head = lv->tail;
    lv_bit(q, l, false);
    return true;
}

/* lv_unlink() takes t, queued at level l of q, out of its slot. */
static void lv_unlink(struct pq *q, struct weft_uthread *t, int l)
{
    struct level *lv = &q->lv[l];
    lv->v[(uint32_t)(uintptr_t)L(t)->data & lv->mask] = NULL;
    if (is_pinned(t))
        lv->pinned--;
    lv_took(q, lv, l, 1);
    flags_set(t, F_RAN);
}

/* lv_first() is the first uthread queued at level l (not taken out), or NULL. */
static struct weft_uthread *lv_first(struct level *lv)
{
    for (uint32_t i = lv->head; i != lv->tail; i++)
        if (lv->v[i & lv->mask])
            return lv->v[i & lv->mask];
    return NULL;
}

static inline struct weft_uthread *lv_pop(struct pq *q, int l)
{
    struct level *lv = &q->lv[l];
    struct weft_uthread **v = lv->v, *t;
    uint32_t h = lv->head, m = lv->mask;
    while (!(t = v[h++ & m])) /* slots taken out from the middle */
        ;
    lv->head = h;
    if (is_pinned(t))
        lv->pinned--;
    if (!lv_took(q, lv, l, 1))
        __builtin_prefetch(v[h & m], 1); /* the next one's first line */
    flags_set(t, F_RAN);
    return t;
}

/* A queue's lock. Held only by weft's own code (this file), which the
 * notification handler never switches out, for a few pointer updates: a
 * plain spinlock does (weft_spin_lock's notification hold-off, for code a
 * signal may switch out, would cost two calls and TLS lookups a decision);
 * it spins with a CPU pause, then yields the kernel thread, as weft's own. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static __attribute__((noinline)) void qlock_slow(_Atomic uint32_t *l)
{
    for (unsigned i = 0;; i++) {
        if (!atomic_load_explicit(l, memory_order_relaxed) &&
            !atomic_exchange_explicit(l, 1, memory_order_acquire))
            return;
        if (i < 1000)
            cpu_relax();
        else
            sched_yield(); /* the holder's kernel thread may be descheduled */
    }
}

static inline void qlock(_Atomic uint32_t *l)
{
    if (__builtin_expect(atomic_exchange_explicit(l, 1, memory_order_acquire), 0))
        qlock_slow(l);
}

static inline void qunlock(_Atomic uint32_t *l)
{
    atomic_store_explicit(l, 0, memory_order_release);
}

/* The owner's lock around its own queue operations (held only while
 * locking). */
static inline void own_lock(struct pq *q)
{
    if (q->locking)
        qlock(&q->lock);
}

static inline void own_unlock(struct pq *q)
{
    if (q->locking)
        qunlock(&q->lock);
}

/* remote_lock() takes q's lock for someone who is not its owner: true if
 * the queues may be touched (the owner locks, and the vcore is online). */
static bool remote_lock(struct pq *q)
{
    qlock(&q->lock);
    if (q->locking && q->online)
        return true;
    qunlock(&q->lock);
    return false;
}

/* queue_own() puts t at the back of its level on the caller's own vcore. */
static inline __attribute__((always_inline)) void queue_own(struct pq *q, struct weft_uthread *t)
{
    own_lock(q);
    lv_push_back(q, t, level_of(t), 0);
    own_unlock(q);
}

/* ---- requests to the owner ------------------------------------------------------- */

static void ask(struct pq *q, unsigned what)
{
    if ((atomic_load_explicit(&q->pending, memory_order_relaxed) & what) != what)
        atomic_fetch_or_explicit(&q->pending, what, memory_order_seq_cst);
    __atomic_store_n(&q->ns.ask, 1, __ATOMIC_RELAXED); /* the owner's take_local looks */
}

/* inbox_push() leaves t for vcore v; false if v is offline (unless force:
 * a pinned uthread waits there for v, vcore 0 never goes offline). */
static bool inbox_push(int v, struct weft_uthread *t, bool force)
{
    struct pq *q = &pqs[v];
    weft_spin_lock(&q->inbox_lock);
    bool ok = q->online || force;
    if (ok) {
        flags_set(t, flags_of(t) & F_RAN);
        weft_ulist_push(&q->inbox, t);
    }
    weft_spin_unlock(&q->inbox_lock);
    if (ok)
        ask(q, P_INBOX);
    return ok;
}

static void set_mode(struct pq *q)
{
    bool want = atomic_load_explicit(&nup, memory_order_relaxed) > 1;
    q->slow = q->board || q->ovf.head;
    if (q->locking == want)
        return;
    qlock(&q->lock);
    q->locking = want;
    struct weft_uthread *f = front_of(q);
    if (f && !want)
        front_queue(q, f); /* the front slot is for locking owners only */
    qunlock(&q->lock);
}

/* resort() moves every queued uthread whose priority changed (and is not
 * aged) to the back of its level. */
static void resort(struct pq *q, int me)
{
    struct weft_ulist moved = { NULL, NULL };
    own_lock(q);
    for (uint64_t b = bits_of(q); b; b &= b - 1) {
        int l = __builtin_ctzll(b);
        struct level *lv = &q->lv[l];
        for (uint32_t i = lv->head; i != lv->tail && lv->live; i++) {
            struct weft_uthread *t = lv->v[i & lv->mask];
            if (t && level_of(t) != l && !(flags_of(t) & F_AGED)) {
                lv_unlink(q, t, l);
                weft_ulist_push(&moved, t);
            }
        }
    }
    for (struct weft_uthread *t = moved.head, *n; t; t = n) {
        n = L(t)->next;
        lv_push_back(q, t, level_of(t), 0);
    }
    own_unlock(q);
}

static void inbox_drain(struct pq *q, int me)
{
    weft_spin_lock(&q->inbox_lock);
    struct weft_uthread *t = q->inbox.head;
    q->inbox.head = q->inbox.tail = NULL;
    weft_spin_unlock(&q->inbox_lock);
    if (!t)
        return;
    own_lock(q);
    for (struct weft_uthread *n; t; t = n) {
        n = L(t)->next;
        lv_push_back(q, t, level_of(t), 0);
    }
    own_unlock(q);
}

/* age() promotes the heads of levels below the most urgent one here (the
 * running uthread's included) that have waited an aging period. */
static void age(struct pq *q, int me)
{
    uint64_t now = mono_ns();
    own_lock(q);
    int top = top_of(bits_of(q)), cur = atomic_load_explicit(&q->cur, memory_order_relaxed);
    if (cur > top)
        top = cur;
    for (int l = 0; l < top; l++) {
        struct level *lv = &q->lv[l];
        struct seen *s = &q->seen[l];
        struct weft_uthread *t = lv->live ? lv_first(lv) : NULL;
        if (!t) {
            s->t = NULL;
            continue;
        }
        if (s->t != t) {
            s->t = t;
            s->at = now;
            continue;
        }
        if (now - s->at < aging_ns)
            continue;
        lv_unlink(q, t, l);
        lv_push_back(q, t, top, F_AGED);
        flags_set(t, flags_of(t) | F_AGED);
        s->t = NULL;
    }
    own_unlock(q);
}

/* slow_look(): what the owner does before a pick when asked, and every
 * SLOW_EVERY decisions. */
static void slow_look(struct pq *q, int me)
{
    q->slow_tick = SLOW_EVERY;
    unsigned p = atomic_load_explicit(&q->pending, memory_order_relaxed);
    if (p)
        p = atomic_exchange_explicit(&q->pending, 0, memory_order_seq_cst);
    set_mode(q);
    if (p & P_INBOX)
        inbox_drain(q, me);
    if (p & P_RESORT)
        resort(q, me);
    if (aging_ns)
        age(q, me);
}

/* ---- picking ------------------------------------------------------------------------ */

/* yielder_level() is the level of the uthread yielding on this vcore
 * (weft_vcore_yielder), which stays runnable: nothing less urgent may be
 * picked instead; NONE if none yields. */
static int yielder_level(void)
{
    struct weft_uthread *y = weft_vcore_yielder();
    return y ? level_of(y) : NONE;
}

/* pick() is take_local for vcore me (its own queues, no stealing), picking
 * nothing below level floor: see the top of this file. */
static struct weft_uthread *pick(struct pq *q, int me, int floor)
{
    if (--q->slow_tick == 0 || atomic_load_explicit(&q->pending, memory_order_relaxed))
        slow_look(q, me);
    struct weft_uthread *n = next_of(q);
    if (n) {
        int ln = level_of(n);
        uint64_t above = owned_bits(q) >> ln; /* bit 0: its level queued; more: a higher one */
        if (above == 0 || (above == 1 && q->chain < NEXT_CHAIN)) {
            if (ln < floor)
                return NULL; /* the yielder is more urgent: it runs on */
            next_set(q, NULL);
            q->chain++; /* a uthread in next is F_RAN and not queued */
            atomic_store_explicit(&q->cur, ln, memory_order_relaxed);
            return n;
        }
        /* Its chain is up and others of its level wait: the first of them
         * runs, n stays in next and runs after it (ws's rule: n's group
         * goes on while its lines are cached, where sending n to the back
         * of its level made every break of a chain start a cold one: the
         * ring N=2 at 10 000 threads, one vcore, ran at 0.4x ws's rate).
         * While two groups keep next and the front filled, the rest of
         * the level advances by one every FRONT_RUNS displaced uthreads:
         * its first waits up to FRONT_RUNS x (NEXT_CHAIN + 1) decisions,
         * ws's bound for its woken ring. A more urgent level queued: n
         * goes ahead of its level, its level read again under the lock (a
         * priority change since it left next found it nowhere). */
        if (above != 1) {
            next_set(q, NULL);
            own_lock(q);
            lv_push_front(q, n, level_of(n));
            own_unlock(q);
        }
    }
    q->chain = 0;
    struct weft_uthread *f = front_of(q);
    if (f) { /* the front of its level, as it is now (a priority change found it nowhere) */
        int lf = level_of(f);
        if (lf >= top_of(bits_of(q)) && lf >= floor) {
            front_set(q, NULL);
            atomic_store_explicit(&q->cur, lf, memory_order_relaxed);
            return f;
        }
        if (lf != q->front_lv) { /* queued after all: its level changed */
            own_lock(q);
            front_queue(q, f);
            own_unlock(q);
        }
    }
    own_lock(q);
    int top = top_of(bits_of(q));
    struct weft_uthread *t = top >= 0 && top >= floor ? lv_pop(q, top) : NULL;
    if (!t && top < 0 && q->ovf.head) { /* no memory to queue them: after all else */
        t = q->ovf.head;
        if (!(q->ovf.head = L(t)->next))
            q->ovf.tail = NULL;
        top = level_of(t);
    }
    own_unlock(q);
    if (!t && (n = next_of(q)) != NULL && level_of(n) >= floor) { /* its level emptied meanwhile */
        next_set(q, NULL);
        q->chain = 1;
        top = level_of(n);
        t = n;
    }
    if (t)
        atomic_store_explicit(&q->cur, top, memory_order_relaxed);
    return t;
}

/* demand() is the most urgent level vcore q has ready besides running. */
static int demand(struct pq *q, int running)
{
    int d = top_of(owned_bits(q));
    struct weft_uthread *n = next_of(q);
    if (n && level_of(n) > d)
        d = level_of(n);
    return running > d ? running : d;
}

static void publish(struct pq *q, int me, int level)
{
    if (level == q->published)
        return;
    q->published = level;
    weft_board_publish(me, level == NONE ? WEFT_BOARD_NONE : level + WEFT_PRIO_MIN);
}

/* kernel_yield() is a decision with the board to run a uthread at level lt:
 * the kernel's idle policy while another process published something more
 * urgent on this CPU recently (see the top of this file). The vcore knows
 * which policy it has (a no-op if unchanged); where the process may not
 * leave the idle policy again, nothing changes. */
static void kernel_yield(int me, int lt)
{
    int r = weft_board_recent(me);
    weft_vcore_kernel_idle(r != WEFT_BOARD_NONE && r - WEFT_PRIO_MIN > lt);
}

/* urgent_elsewhere() is a slow look's glance at one other online vcore,
 * each in turn (q->look_at): true if it is busy and its queues hold a
 * level above l (see the top of this file). */
static bool urgent_elsewhere(struct pq *q, int me, int l)
{
    int n = weft_num_vcores();
    if (n < 2)
        return false;
    int v = q->look_at + 1 < n ? q->look_at + 1 : 0;
    if (v == me)
        v = v + 1 < n ? v + 1 : 0;
    q->look_at = v;
    return top_of(bits_of(&pqs[v])) > l && weft_vcore_busy(v);
}

/* take_local_slow() is take_local for everything but the fast path below:
 * pick() with a yielder's level as the floor, and the board; at a slow
 * look, sched_entry instead when another vcore queues more urgent work. */
static __attribute__((noinline)) struct weft_uthread *take_local_slow(struct pq *q, int me)
{
    bool look = q->slow_tick == 0; /* pick() makes this decision's slow look */
    q->slow_tick++; /* pick() counts this decision */
    struct weft_uthread *t = pick(q, me, yielder_level());
    if (t && look && urgent_elsewhere(q, me, level_of(t))) {
        own_lock(q);
        lv_push_front(q, t, level_of(t));
        own_unlock(q);
        atomic_store_explicit(&q->want_steal, true, memory_order_relaxed);
        return NULL; /* sched_entry steals the more urgent work */
    }
    if (t && q->board) {
        int f = weft_board_foreign(me) - WEFT_PRIO_MIN;
        if (f > level_of(t)) { /* another process has more urgent work here: cede */
            own_lock(q);
            lv_push_front(q, t, level_of(t));
            own_unlock(q);
            return NULL; /* sched_entry cedes */
        }
        publish(q, me, demand(q, level_of(t)));
        kernel_yield(me, level_of(t));
    }
    return t;
}

/* take_locked() is the fast path's pop when others may touch the queues. */
static __attribute__((noinline)) struct weft_uthread *take_locked(struct pq *q, int me)
{
    q->slow_tick++; /* pick() counts this decision */
    return pick(q, me, yielder_level());
}

/* take_local_q() is pick() with its common cases inline and no stack
 * frame: nothing asked, no board, nothing less urgent than the uthread
 * running (cur): next when nothing queued is more urgent (no lock: next is
 * the owner's; the front slot counts as queued), else the front of the
 * most urgent level, with plain loads and stores when one vcore is online
 * (else pick(): the front slot, or the lock). (Less
 * urgent than cur only if the running one does not stay runnable: it
 * blocks or exits rather than yields; take_local_slow finds out.) */
static inline struct weft_uthread *take_local_q(struct pq *q, int me)
{
    if (__builtin_expect(--q->slow_tick == 0 || q->slow ||
                             atomic_load_explicit(&q->pending, memory_order_relaxed),
                         0))
        return take_local_slow(q, me);
    uint64_t bits = owned_bits(q);
    int cur = atomic_load_explicit(&q->cur, memory_order_relaxed);
    struct weft_uthread *n = next_of(q);
    if (n) {
        int ln = level_of(n);
        uint64_t above = bits >> ln; /* bit 0: its level queued; more: a higher one */
        if (__builtin_expect(above > 1 || (above == 1 && q->chain >= NEXT_CHAIN) || ln < cur, 0))
            return take_local_slow(q, me);
        next_set(q, NULL);
        q->chain++;
        atomic_store_explicit(&q->cur, ln, memory_order_relaxed);
        return n;
    }
    if (!bits)
        return NULL;
    int top = 63 - __builtin_clzll(bits);
    if (__builtin_expect(top < cur, 0))
        return take_local_slow(q, me);
    if (q->locking)
        return take_locked(q, me); /* pick() takes the front slot first */
    q->chain = 0;
    atomic_store_explicit(&q->cur, top, memory_order_relaxed);
    return lv_pop(q, top);
}

/* take_local_prio() is take_local_q() between settle and arm (the runtime's
 * slot). */
static struct weft_uthread *take_local_prio(int me)
{
    struct pq *q = &pqs[me];
    settle(q);
    struct weft_uthread *t = take_local_q(q, me);
    arm(q);
    return t;
}

/* take_yield_prio() is take_local for a yield of self. In take_local's
 * common case, with one vcore online (no thief can touch the queues before
 * our next decision), next empty and self's level the most urgent queued,
 * self goes to the back of that level as its front comes out, in one step:
 * the level's count and bit stay as they are. Else take_local. */
static struct weft_uthread *take_yield_prio(int me, struct weft_uthread *self, int *queued)
{
    struct pq *q = &pqs[me];
    int l = level_of(self);
    settle(q);
    /* cur is self's level as it was picked, or as self last set it; another
     * thread may have raised self since (weft_setprio: it finds self neither
     * queued nor in next, and tells only non-locking owners), and
     * take_local's fast path takes next only if it is not less urgent than
     * cur: a yield never hands the vcore to a less urgent uthread. */
    atomic_store_explicit(&q->cur, l, memory_order_relaxed);
    if (__builtin_expect(q->slow_tick <= 1 || q->slow || q->locking ||
                             atomic_load_explicit(&q->pending, memory_order_relaxed) ||
                             next_of(q) || /* the front slot: only while locking */
                             bits_of(q) >> l != 1,
                         0))
        return take_local_prio(me);
    q->slow_tick--;
    q->chain = 0;
    /* The level holds one uthread at least and one free slot (lv_room):
     * after the pop the push has room, in another slot. */
    struct level *lv = &q->lv[l];
    __asm__("" : "+r"(lv)); /* one base register for every field (gcc made three) */
    struct weft_uthread **v = lv->v, *t;
    uint32_t h = lv->head, m = lv->mask, i = lv->tail;
    while (!(t = v[h++ & m])) /* slots taken out from the middle */
        ;
    lv->head = h;
    v[i & m] = self;
    lv->tail = i + 1;
    L(self)->data = (void *)(uintptr_t)i;
    flags_set(self, lv->tag);
    if (is_pinned(t))
        lv->pinned--;
    if (is_pinned(self))
        lv->pinned++;
    __builtin_prefetch(v[h & m], 1); /* the next one's first line */
    flags_set(t, F_RAN);
    *queued = 1;
    return t; /* the slot's budget left as it was: only settle() counts its runs */
}

/* ---- stealing ------------------------------------------------------------------------ */

/* grab() takes about half (at most STEAL_MAX) of the unpinned uthreads at
 * level l of victim v, front first, if l is still its most urgent level;
 * returns the first (not queued) and queues the rest on q.
 *
 * The victim's owner wants its lock for every queue operation, so the lock
 * is held only to move pointers out of the ring (reading a uthread's flags
 * only while the level holds pinned ones): no stolen uthread is written
 * under it (each store would be a cache miss that the unlock waits for).
 * Their sched_flags still say "queued on v" for a moment after: move_queued
 * checks the slot before it believes them. */
static struct weft_uthread *grab(struct pq *q, int me, int v, int l)
{
    struct pq *vq = &pqs[v];
    struct weft_uthread *got[STEAL_MAX];
    unsigned n = 0;
    if (!remote_lock(vq))
        return NULL;
    if (top_of(bits_of(vq)) == l) {
        struct level *lv = &vq->lv[l];
        unsigned want = lv->live < 2 * STEAL_MAX ? lv->live : 2 * STEAL_MAX;
        want -= want / 2;
        bool pins = lv->pinned != 0; /* else no uthread need be read here */
        for (uint32_t i = lv->head; i != lv->tail && n < want; i++) {
            struct weft_uthread **slot = &lv->v[i & lv->mask], *t = *slot;
            if (!t || (pins && is_pinned(t)))
                continue; /* pinned ones stay, in order */
            got[n++] = t;
            *slot = NULL; /* move_queued's check (above) */
            if (i == lv->head)
                lv->head++; /* the front: later pops need not skip it */
        }
        lv_took(vq, lv, l, n);
    }
    qunlock(&vq->lock);
    weft_sched_note_shared(1);
    struct weft_uthread *first = NULL;
    bool locked = false;
    for (unsigned i = 0; i < n; i++) {
        struct weft_uthread *t = got[i];
        if (!first) {
            first = t;
            flags_set(t, F_RAN);
        } else {
            if (!locked) {
                own_lock(q);
                locked = true;
            }
            lv_push_back(q, t, level_of(t), 0);
        }
    }
    if (locked)
        own_unlock(q);
    return first;
}

/* held(): v's owner holds a uthread no thief may take (next, front): worth a
 * poke if it makes no decisions. */
static inline bool held(int v)
{
    return next_of(&pqs[v]) || front_of(&pqs[v]);
}

/* watch_next() is a thief that found only v's next to take: poke v if its
 * decisions have not moved for POKE_LOOKS of our looks. */
static void watch_next(struct pq *q, int v)
{
    if (q->poke_victim >= 0 && q->poke_victim != v)
        return;
    uint64_t d = weft_vcore_decisions(v);
    if (q->poke_victim != v || q->poke_decisions != d) {
        q->poke_victim = v;
        q->poke_decisions = d;
        q->poke_looks = 0;
        return;
    }
    if (++q->poke_looks == POKE_LOOKS) {
        weft_vcore_poke(v);
        q->poke_victim = -1;
    }
}

/* last_looks() is a vcore about to park: a uthread in a busy vcore's next
 * may have nobody left to watch it. Wait LAST_LOOK_NS once and poke those
 * that made no decision meanwhile (ws does the same). */
static void last_looks(int me, int n)
{
    int ids[16];
    uint64_t seen[16];
    int k = 0;
    for (int v = 0; v < n && k < 16; v++)
        if (v != me && held(v) && weft_vcore_busy(v)) {
            ids[k] = v;
            seen[k++] = weft_vcore_decisions(v);
        }
    if (!k)
        return;
    for (uint64_t end = mono_ns() + LAST_LOOK_NS; mono_ns() < end;)
        ;
    for (int i = 0; i < k; i++)
        if (weft_vcore_decisions(ids[i]) == seen[i] &&
            held(ids[i]) && weft_vcore_busy(ids[i]))
            weft_vcore_poke(ids[i]);
}

/* steal() takes work more urgent than level floor from the online vcore
 * with the most urgent queued level, or NULL. idle: we have nothing to run
 * but maybe a yielder (then watch stuck next slots too). */
static struct weft_uthread *steal(struct pq *q, int me, int floor, bool idle)
{
    int n = weft_num_vcores();
    if (n < 2)
        return NULL;
    for (int tries = 0; tries < 2; tries++) {
        int best = -1, bl = floor;
        for (int v = 0; v < n; v++) {
            int tl = v == me ? NONE : top_of(bits_of(&pqs[v]));
            if (tl > bl) {
                bl = tl;
                best = v;
            }
        }
        if (best < 0)
            break;
        struct weft_uthread *t = grab(q, me, best, bl);
        if (t)
            return t;
    }
    if (!idle)
        return NULL; /* we have work of our own */
    bool parking = weft_vcore_parking();
    if (parking) {
        last_looks(me, n);
    } else if (++q->watch_tick % WATCH_EVERY == 0) {
        bool watched = false;
        for (int v = 0; v < n; v++)
            if (v != me && held(v) && weft_vcore_busy(v)) {
                watch_next(q, v);
                watched |= q->poke_victim == v;
            }
        if (!watched)
            q->poke_victim = -1;
    }
    return NULL;
}

/* ---- the ops ------------------------------------------------------------------------ */

/* cede_for() is sched_entry giving its CPU to a more urgent process: t (the
 * uthread it would run) goes back to the front of its level; sleeps for a
 * period unless work more urgent than foreign arrives. True if it woke for
 * an event (then it must not cede again before running something). */
static bool cede_for(struct pq *q, int me, struct weft_uthread *t, int foreign)
{
    own_lock(q);
    lv_push_front(q, t, level_of(t));
    own_unlock(q);
    publish(q, me, demand(q, NONE));
    atomic_store_explicit(&q->cur, NONE, memory_order_relaxed);
    atomic_store_explicit(&q->ceding, true, memory_order_seq_cst); /* Dekker with a waker: we publish, then look again */
    bool events = false;
    if (top_of(bits_of(q)) <= foreign && !atomic_load_explicit(&q->pending, memory_order_seq_cst)) {
        uint64_t period = (uint64_t)weft_preempt_period() * 1000u;
        events = weft_vcore_cede(mono_ns() + (period ? period : 1000000u));
    }
    atomic_store_explicit(&q->ceding, false, memory_order_seq_cst);
    return events;
}

static void sched_entry_prio(void)
{
    int me = weft_vcore_id();
    struct pq *q = &pqs[me];
    bool may_cede = true;
    int yl = yielder_level(); /* a weft_yield() that found nothing local */
    settle(q);
    for (;;) {
        struct weft_uthread *t = pick(q, me, yl);
        /* Steal only above what we have; a yielder's equals may be stolen. */
        int floor = t ? level_of(t) : yl != NONE ? yl - 1 : NONE;
        if (atomic_load_explicit(&q->want_steal, memory_order_relaxed) || !t) {
            atomic_store_explicit(&q->want_steal, false, memory_order_relaxed);
            struct weft_uthread *s = steal(q, me, floor, !t); /* a yielder's too */
            if (s) {
                if (t) {
                    own_lock(q);
                    lv_push_front(q, t, level_of(t)); /* now: it may have changed */
                    own_unlock(q);
                }
                t = s;
            }
        }
        if (!t) {
            if (yl == NONE) { /* idle (a yielder would run on) */
                atomic_store_explicit(&q->cur, NONE, memory_order_relaxed);
                if (q->board && !weft_vcore_busy(me))
                    publish(q, me, NONE);
            }
            arm(q);
            return;
        }
        int lt = level_of(t);
        atomic_store_explicit(&q->cur, lt, memory_order_relaxed);
        if (q->board) {
            int f = weft_board_foreign(me);
            if (may_cede && f != WEFT_BOARD_NONE && f - WEFT_PRIO_MIN > lt) {
                if (cede_for(q, me, t, f - WEFT_PRIO_MIN))
                    may_cede = false;
                continue;
            }
            publish(q, me, demand(q, lt));
            kernel_yield(me, lt);
        }
        flags_set(t, F_RAN);
        arm(q);
        weft_run_uthread(t);
    }
}

/* poke_if_ceding(): v may be ceding to another process; work more urgent
 * than it ceded for arrived: wake it (partner: the Dekker in cede_for). */
static void poke_if_ceding(int v)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&pqs[v].ceding, memory_order_relaxed))
        weft_vcore_poke(v);
}

/* preempt_for_steal(): t (level lt, queued on v) waits behind more urgent
 * work on v while another vcore runs something less urgent: ask the least
 * urgent busy one to look at others' queues first (it steals t). */
static void preempt_for_steal(int v, int lt)
{
    int n = weft_num_vcores(), w = -1, wl = lt;
    for (int i = 0; i < n; i++) {
        int c = atomic_load_explicit(&pqs[i].cur, memory_order_relaxed);
        if (i != v && c < wl && weft_vcore_busy(i)) {
            wl = c;
            w = i;
        }
    }
    if (w < 0)
        return;
    atomic_store_explicit(&pqs[w].want_steal, true, memory_order_relaxed);
    weft_vcore_preempt(w);
}

/* push_away() queues t on vcore v, which is not the caller's (or is one
 * the caller may not touch), and makes sure someone runs it: wakes v for
 * work only it should take first (placed, pinned), else kicks an idle
 * vcore; preempts v if t is more urgent than what v runs. */
static void push_away(int v, struct weft_uthread *t)
{
    struct pq *q = &pqs[v];
    int lt = level_of(t);
    /* Placed there at spawn, or pinned: only v should take it first. (A
     * new uthread from outside, not placed, went to v by target(): any
     * spinning vcore may take it, as a kick lets one.) */
    bool placed = is_pinned(t) || (!(flags_of(t) & F_RAN) && L(t)->vcore >= 0);
    if (remote_lock(q)) {
        /* Read again under the lock: a priority change that ran since
         * (thread_prio_changed takes every lock) found t nowhere and left it
         * to us; one after this finds it queued. */
        lt = level_of(t);
        lv_push_back(q, t, lt, 0);
        qunlock(&q->lock);
    } else if (!inbox_push(v, t, is_pinned(t))) {
        /* v went offline meanwhile: vcore 0, which never does. */
        q = &pqs[v = 0];
        inbox_push(0, t, true);
    }
    /* t may run (and finish) from here on: only v and lt below. */
    weft_sched_note_shared(1);
    if (placed)
        weft_vcore_wake(v);
    else
        weft_vcore_kick(v);
    if (lt > atomic_load_explicit(&q->cur, memory_order_relaxed)) {
        if (weft_vcore_busy(v) && preempting())
            weft_vcore_preempt(v);
    } else if (!placed && preempting()) {
        preempt_for_steal(v, lt);
    }
    poke_if_ceding(v);
}

/* target() is the vcore a uthread made runnable by a kernel thread, an
 * offline vcore or for another vcore should go to: the one it is placed
 * on, pinned to or last ran on; else the one the last such uthread went
 * to while it is not busy (spinning for work, or parked), else the next
 * one. */
static int target(struct weft_uthread *t)
{
    int v = L(t)->vcore, n = weft_num_vcores();
    if (v >= 0 && v < n)
        return v;
    /* Pinned to a vcore that is offline: weft_vcores_release refuses a vcore
     * with WEFT_PINNED uthreads, so this is a stack-copy uthread forwarded
     * to its run stack's holder (weft__sc_wake, forward), which that vcore
     * let go of when it went down: any online vcore may run it (sc_enter
     * clears the pin). Left in the offline vcore's inbox it is lost. */
    if (v >= 0 && is_pinned(t))
        return 0;
    if (n < 1)
        return 0;
    unsigned last = atomic_load_explicit(&rr, memory_order_relaxed) % (unsigned)n;
    if (!weft_vcore_busy((int)last))
        return (int)last;
    return (int)((atomic_fetch_add_explicit(&rr, 1, memory_order_relaxed) + 1) % (unsigned)n);
}

/* fronted_waits(): the last displaced uthread put at a level's front is
 * still there (the level's first slot), by its queue alone. */
static inline bool fronted_waits(struct pq *q)
{
    struct level *lv = &q->lv[q->fronted_lv];
    return q->fronted && lv->live && lv->v[lv->head & lv->mask] == q->fronted;
}

/* displaced() queues old, which a wake-up on this vcore just moved out of
 * next: at the front of its level with one vcore online, as the top of
 * this file says; with several, under the same rule, in the front slot
 * while the process is flat and its level holds others (a thief has
 * something to take); else at the back, with a kick: thieves may take it. */
static inline void displaced(struct pq *q, struct weft_uthread *old)
{
    int l = level_of(old);
    if (q->locking) {
        if (!front_of(q) && (bits_of(q) >> l & 1) && ++q->front_runs < FRONT_RUNS &&
            !atomic_load_explicit(&mixed, memory_order_relaxed)) {
            q->front_lv = l;
            front_set(q, old);
            return;
        }
        q->front_runs = 0;
    } else {
        if (!fronted_waits(q) && ++q->front_runs < FRONT_RUNS) {
            q->fronted = old;
            q->fronted_lv = l;
            lv_push_front(q, old, l);
            return;
        }
        q->front_runs = 0;
        lv_push_back(q, old, l, 0);
        return;
    }
    queue_own(q, old);
    weft_vcore_kick_local();
}

static void thread_runnable_prio(struct weft_uthread *t)
{
    struct weft_sched_link *l = L(t);
    int me = l->waker;
    unsigned f = flags_of(t);
    note_level(level_of(t));
    if (l->by_uthread == 3 && me >= 0 && pqs[me].online) {
        /* Displaced from our next by the runtime's slot (a flat process:
         * nothing to compare). */
        displaced(&pqs[me], t);
        return;
    }
    /* The common case: woken by the uthread running on the vcore it last
     * ran on: next, no kick. */
    if (__builtin_expect(me >= 0 && l->vcore == me && l->by_uthread == 1 && (f & F_RAN) &&
                             !is_pinned(t) && pqs[me].online, 1)) {
        struct pq *q = &pqs[me];
        struct weft_uthread *old = next_of(q);
        next_set(q, t);
        if (old)
            displaced(q, old);
        int lt = level_of(t);
        if (__builtin_expect(lt > atomic_load_explicit(&q->cur, memory_order_relaxed), 0) &&
            preempting())
            weft_vcore_preempt(me); /* the waker gives way at its next safe point */
        if (q->board)
            poke_if_ceding(me);
        return;
    }
    /* Pinned elsewhere, or placed on a vcore at spawn (vcore set, never
     * run), or from outside or an offline vcore: someone else's queues. */
    if (me < 0 || !pqs[me].online || (l->vcore >= 0 && l->vcore != me &&
                                      (is_pinned(t) || !(f & F_RAN)))) {
        push_away(target(t), t);
        return;
    }
    struct pq *q = &pqs[me];
    int lt = level_of(t);
    if (is_pinned(t)) {
        queue_own(q, t);
    } else if (l->by_uthread && !(f & F_RAN)) {
        /* Spawned by a uthread here: next if free (spawn, then join, hands
         * the vcore to the child), else behind its level; a kick either
         * way, as ws. F_RAN from here: next is never stolen. */
        flags_set(t, F_RAN);
        if (next_of(q))
            queue_own(q, t);
        else
            next_set(q, t);
        if (q->locking)
            weft_vcore_kick_local();
    } else if (l->by_uthread == 1 ||
               (l->by_uthread == 2 && !next_of(q) &&
                top_of(owned_bits(q)) < lt)) {
        /* Woken by the uthread running here (having run elsewhere), or by
         * a blocking callback with nothing at its level or above here. */
        struct weft_uthread *old = next_of(q);
        next_set(q, t);
        if (old)
            displaced(q, old);
    } else {
        /* Vcore context (alarms, events, the poller), or a blocking
         * callback with other work queued: in order, with a kick. */
        queue_own(q, t);
        if (q->locking)
            weft_vcore_kick_local();
    }
    if (lt > atomic_load_explicit(&q->cur, memory_order_relaxed) && preempting())
        weft_vcore_preempt(me);
    if (q->board)
        poke_if_ceding(me);
}

static __attribute__((noinline)) void paused_locking(struct pq *q, struct weft_uthread *t)
{
    bool kick = !is_pinned(t); /* read before t is queued */
    queue_own(q, t);
    if (kick)
        weft_vcore_kick_local();
}

static void thread_paused_prio(struct weft_uthread *t)
{
    int me = L(t)->vcore; /* vcore context of the vcore it ran on */
    struct pq *q = &pqs[me];
    if (__builtin_expect(q->locking, 0)) {
        paused_locking(q, t); /* with a kick: others may take it */
        return;
    }
    lv_push_back(q, t, level_of(t), 0);
}

/* poked_prio(): a thief wants our next, the board or the online count
 * changed: make next stealable, look at the board and the mode. */
static void poked_prio(void)
{
    int me = weft_vcore_id();
    struct pq *q = &pqs[me];
    q->board = weft_board_attached();
    if (!q->board) {
        q->published = NONE;
        weft_vcore_kernel_idle(0); /* detached: back to the thread's own policy */
    }
    if (q->board)
        go_mixed();
    set_mode(q); /* and slow */
    struct weft_uthread *t = next_of(q), *f = front_of(q);
    if (t || f) {
        next_set(q, NULL);
        own_lock(q);
        if (f)
            front_queue(q, f);
        if (t)
            lv_push_back(q, t, level_of(t), 0);
        own_unlock(q);
        if (q->locking)
            weft_vcore_kick_local();
    }
}

static int should_preempt_prio(struct weft_uthread *running)
{
    int me = weft_vcore_id();
    struct pq *q = &pqs[me];
    int rl = level_of(running);
    if (atomic_load_explicit(&q->pending, memory_order_relaxed)) {
        q->slow_tick = 1;
        slow_look(q, me);
    }
    if (demand(q, NONE) > rl)
        return 1;
    if (q->board) {
        int f = weft_board_foreign(me);
        if (f != WEFT_BOARD_NONE && f - WEFT_PRIO_MIN > rl)
            return 1; /* sched_entry cedes */
    }
    /* Asked to look at others' queues: a more urgent uthread waits there. */
    int n = weft_num_vcores();
    if (atomic_load_explicit(&q->want_steal, memory_order_relaxed))
        for (int v = 0; v < n; v++)
            if (v != me && top_of(bits_of(&pqs[v])) > rl)
                return 1;
    return 0;
}

/* move_queued() moves t, if it is queued on a vcore whose lock we hold or
 * whose owner we are, to its new level; else asks that owner to re-sort.
 * Returns the vcore t is queued on, or -1. */
static int move_queued(struct weft_uthread *t, int me, bool all_locked)
{
    unsigned f = flags_of(t);
    if (!(f & F_QUEUED) || (f & F_AGED))
        return -1;
    int v = F_VC(f), l = (int)F_LV(f);
    struct pq *q = &pqs[v];
    if (level_of(t) == l)
        return v;
    if ((all_locked && q->locking) || (v == me && !q->locking)) {
        struct level *lv = &q->lv[l];
        if (!lv->v || lv->v[(uint32_t)(uintptr_t)L(t)->data & lv->mask] != t)
            return -1; /* a thief took it and has not rewritten its flags yet (grab) */
        lv_unlink(q, t, l);
        lv_push_back(q, t, level_of(t), 0);
    } else {
        ask(q, P_RESORT);
    }
    return v;
}

static void thread_prio_changed_prio(struct weft_uthread *t, int old)
{
    int me = weft_vcore_id();
    int lt = level_of(t);
    go_mixed(); /* two levels in use: the old one and lt */
    if (me >= 0 && t == weft_self()) {
        /* The caller changed itself: it runs here. Lower than what waits
         * here now: give way (weft_setprio's return is the safe point). */
        struct pq *q = &pqs[me];
        atomic_store_explicit(&q->cur, lt, memory_order_relaxed);
        if (lt < old - WEFT_PRIO_MIN && demand(q, NONE) > lt)
            weft_vcore_preempt(me);
        return;
    }
    /* t is queued, being queued, in a next slot or an inbox, running, or
     * blocked. With every lock held no queue operation is under way; a
     * queue whose owner does not lock is re-sorted by its owner. */
    int v = -1;
    if (atomic_load_explicit(&nup, memory_order_relaxed) > 1 || me < 0 || !pqs[me].online) {
        for (int i = 0; i < npq; i++)
            qlock(&pqs[i].lock);
        v = move_queued(t, me, true);
        for (int i = npq - 1; i >= 0; i--)
            qunlock(&pqs[i].lock);
        /* Queued on an owner that did not lock at that moment, or in
         * flight to one: it re-sorts. */
        if (v < 0)
            for (int i = 0; i < npq; i++)
                if (pqs[i].online && !pqs[i].locking)
                    ask(&pqs[i], P_RESORT);
    } else {
        v = move_queued(t, me, false); /* we own the only online vcore's queues */
    }
    /* Raised above what its vcore runs (queued there, or in its next slot):
     * preempt it. (t's link.vcore is its runner's to write: not read.) */
    int w = v;
    for (int i = 0; w < 0 && i < npq; i++)
        if (next_of(&pqs[i]) == t || front_of(&pqs[i]) == t)
            w = i;
    if (w >= 0 && lt > old - WEFT_PRIO_MIN &&
        lt > atomic_load_explicit(&pqs[w].cur, memory_order_relaxed) && (preempting() || w == me))
        weft_vcore_preempt(w);
}

static void vcore_up_prio(int id)
{
    struct pq *q = &pqs[id];
    qlock(&q->lock);
    weft_spin_lock(&q->inbox_lock);
    q->online = true;
    weft_spin_unlock(&q->inbox_lock);
    qunlock(&q->lock);
    atomic_store_explicit(&q->cur, NONE, memory_order_relaxed);
    q->board = weft_board_attached();
    if (q->board)
        go_mixed();
    q->published = NONE;
    atomic_fetch_add_explicit(&nup, 1, memory_order_seq_cst);
    set_mode(q); /* and slow */
    for (int v = 0; v < npq; v++)
        if (v != id && pqs[v].online) {
            ask(&pqs[v], P_MODE);
            weft_vcore_poke(v);
        }
}

static void vcore_down_prio(int id)
{
    struct pq *q = &pqs[id];
    struct weft_ulist out = { NULL, NULL };
    qlock(&q->lock);
    weft_spin_lock(&q->inbox_lock);
    q->online = false;
    out = q->inbox;
    q->inbox.head = q->inbox.tail = NULL;
    weft_spin_unlock(&q->inbox_lock);
    for (uint64_t b = bits_of(q); b; b = bits_of(q)) {
        int l = top_of(b);
        struct weft_uthread *t = lv_pop(q, l);
        weft_ulist_push(&out, t);
    }
    if (q->ovf.head) {
        if (out.tail)
            L(out.tail)->next = q->ovf.head;
        else
            out.head = q->ovf.head;
        out.tail = q->ovf.tail;
        q->ovf.head = q->ovf.tail = NULL;
    }
    qunlock(&q->lock);
    struct weft_uthread *n = next_of(q), *f = front_of(q);
    next_set(q, NULL);
    front_set(q, NULL);
    q->ns.budget = q->armed = 0; /* our last decision was made */
    if (f) {
        L(f)->next = out.head;
        out.head = f;
    }
    if (n) {
        L(n)->next = out.head;
        out.head = n;
    }
    atomic_exchange_explicit(&q->pending, 0, memory_order_seq_cst);
    atomic_store_explicit(&q->cur, NONE, memory_order_relaxed);
    if (q->board)
        publish(q, id, NONE);
    atomic_fetch_sub_explicit(&nup, 1, memory_order_seq_cst);
    for (int v = 0; v < npq; v++)
        if (v != id && pqs[v].online) {
            ask(&pqs[v], P_MODE);
            weft_vcore_poke(v);
        }
    for (struct weft_uthread *t = out.head, *nx; t; t = nx) {
        nx = L(t)->next;
        push_away(target(t), t); /* online ones: the releaser lowered the count first */
    }
}

static int init_prio(int nvcores)
{
    /* pqs is set only in a fork child (fini clears it): the parent's. Not
     * ours to use or free; kept reachable for leak checkers. */
    if (pqs)
        parents_pqs = pqs;
    pqs = aligned_alloc(64, sizeof *pqs * (size_t)nvcores);
    if (!pqs)
        return ENOMEM;
    for (int i = 0; i < nvcores; i++) {
        struct pq *q = &pqs[i];
        q->ns = (struct weft_next_slot){ NULL, 0, 0 };
        q->armed = 0;
        q->chain = 0;
        q->fronted = NULL;
        q->fronted_lv = 0;
        q->front_runs = 0;
        q->front = NULL;
        q->front_lv = 0;
        q->slow_tick = SLOW_EVERY;
        q->board = false;
        q->slow = false;
        q->published = NONE;
        q->poke_victim = -1;
        q->look_at = i;
        q->watch_tick = q->poke_looks = 0;
        q->poke_decisions = 0;
        atomic_init(&q->lock, 0);
        q->locking = false;
        q->online = false;
        atomic_init(&q->bits, 0);
        for (int l = 0; l < NLEVELS; l++) {
            q->lv[l] = (struct level){ .v = NULL, .mask = 0, .tag = F_RAN | F_AT(i, l) };
            q->seen[l] = (struct seen){ NULL, 0 };
        }
        q->ovf = (struct weft_ulist){ NULL, NULL };
        atomic_init(&q->cur, NONE);
        atomic_init(&q->ceding, false);
        atomic_init(&q->want_steal, false);
        atomic_init(&q->pending, 0);
        q->inbox_lock = (weft_spinlock_t)WEFT_SPINLOCK_INIT;
        q->inbox = (struct weft_ulist){ NULL, NULL };
    }
    npq = nvcores;
    atomic_init(&nup, 0);
    atomic_init(&rr, 0);
    long long ms = 0;
    weft_config_get("WEFT_PRIO_AGING_MS", &ms); /* 0..3600000; unset: 0, never */
    aging_ns = (uint64_t)ms * 1000000u;
    atomic_init(&mixed, aging_ns != 0); /* aging moves uthreads between levels */
    for (int i = 0; i < nvcores && !aging_ns; i++)
        weft_vcore_next_slot_set(i, &pqs[i].ns);
    return 0;
}

static void fini_prio(void)
{
    for (int i = 0; i < npq; i++)
        for (int l = 0; l < NLEVELS; l++)
            free(pqs[i].lv[l].v);
    free(pqs);
    pqs = NULL;
    npq = 0;
}

/* reclaim_prio(): t is taken back if it waits in next or the front slot,
 * which only we write (a stack-copy uthread joined before it ran: see
 * sched.h). */
static int reclaim_prio(int me, struct weft_uthread *t)
{
    struct pq *q = &pqs[me];
    if (next_of(q) == t)
        next_set(q, NULL);
    else if (front_of(q) == t)
        front_set(q, NULL);
    else
        return 0;
    return 1;
}

const struct weft_sched_ops weft__sched_prio = {
    .name = "prio",
    .init = init_prio,
    .fini = fini_prio,
    .sched_entry = sched_entry_prio,
    .thread_runnable = thread_runnable_prio,
    .thread_paused = thread_paused_prio,
    .take_local = take_local_prio,
    .poked = poked_prio,
    .thread_prio_changed = thread_prio_changed_prio,
    .should_preempt = should_preempt_prio,
    .vcore_up = vcore_up_prio,
    .vcore_down = vcore_down_prio,
    .reclaim = reclaim_prio,
    .take_yield = take_yield_prio,
};
