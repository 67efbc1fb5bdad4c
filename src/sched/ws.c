/*
 * ws.c — the default scheduler: per-vcore run queues with work stealing.
 *
 * Written only against <weft/sched.h>, like an application's scheduler. The
 * models are Go's runq/runnext (runtime/proc.go) and tokio's local queue and
 * LIFO slot: the steady state of local work writes no cache line that
 * another vcore writes.
 *
 * Where a runnable uthread goes (thread_runnable, thread_paused):
 *  - woken by a uthread running on vcore v (or by its blocking callback,
 *    such as an exiting uthread waking its joiner, when nothing else is
 *    queued on v; else the back of v's woken ring): v's `next` slot (the waker's
 *    vcore, wherever the uthread ran before: a woken uthread follows its
 *    waker, so communicating uthreads gather on one vcore and their
 *    hand-offs stay local). No kick: the waker usually blocks next and v
 *    runs it at once; waking another vcore for it would only make that one
 *    spin. What it displaces waits in v's `prev` slot, if that is free,
 *    ahead of the woken ring, provided v is the only vcore or its woken ring
 *    holds others (thieves have those to take); else it goes to the back
 *    of the woken ring with a kick (a thief may run it at once). Like next,
 *    prev is the owner's: thieves only look at it (a poke moves it to the
 *    woken ring). A uthread that wakes two and blocks (a relay passing two
 *    tokens on, a producer and its consumers) so runs both before anything
 *    older, and a group of uthreads that keep waking each other runs on
 *    while its state is in the cache, instead of taking its turn behind
 *    every other group (a ring of 8 uthreads among 10 000 at one vcore:
 *    about 4 cache misses per message without prev, 5x the messages/s
 *    with it; 2.5x at two vcores).
 *    Bounded: every PREV_RUNS-th uthread taken from prev goes to the back
 *    of the woken ring instead, and prev counts in the woken ring's chain
 *    below; so while a group keeps next and prev filled, the woken ring's
 *    front waits up to PREV_RUNS x (NEXT_CHAIN + 1) decisions (544), where
 *    without prev it waited NEXT_CHAIN + 1. Go's runnext (a chain of it shares one time slice) and tokio's
 *    LIFO slot keep such a group together too: their rings' rates at one
 *    CPU do not fall from 10^3 to 10^4 tasks, while tokio's current-thread
 *    runtime, without a LIFO slot, falls 3x.
 *  - spawned by a uthread on v: v's `next` slot if it is free (a spawner
 *    that joins at once hands v to the child), else the back of v's woken
 *    ring (spawns start in spawn order); with a kick either way: if the
 *    spawner runs on instead of blocking, the spinner woken steals the
 *    child, or pokes next loose (below).
 *  - made runnable in vcore context of v (alarms, events, the poller): the
 *    back of v's woken ring, in the order they come, with a kick: an idle
 *    vcore may steal them at once.
 *  - paused (weft_yield, preemption): the back of v's paused ring (with one
 *    vcore and only the paused ring queued, a yield's take_yield pops its
 *    front and pushes the yielder in one step).
 *  - from a kernel thread that is not a vcore: the injection queue, shared
 *    by all vcores, with a kick.
 *  - WEFT_PINNED to v, or spawned with WEFT_ON_VCORE for v, from anywhere
 *    but v: v's inbox (a locked list v drains into its queues), and v is
 *    woken; thieves may take the unpinned ones from it.
 *    Pinned uthreads queued on their own vcore wait in its private pinned
 *    list: they never enter a ring, so thieves never see them.
 *
 * What a vcore runs next (take_local, also the first step of sched_entry):
 * its inbox is drained into the rings; every 61st decision the injection
 * queue comes first (Go's schedtick % 61: outside work cannot starve; the
 * runtime's own runs from `next`, below, do not count, and at most
 * NEXT_CHAIN of them come between two of ours);
 * pinned uthreads alternate with the rest; then `next`, at most NEXT_CHAIN
 * decisions in a row (two uthreads waking each other cannot starve the
 * rings); then `prev` (see above) and the woken ring, at most NEXT_CHAIN
 * decisions in a row counted together with `next` (then one paused uthread
 * runs: wake-ups cannot starve the paused, and a woken uthread never queues
 * behind the CPU-bound uthreads preemption keeps rotating); then the paused
 * ring, `prev`, the woken ring; then the injection queue. `next`'s runs
 * count in both chains, so when its chain ends the woken one is spent too:
 * there `prev` and the woken ring take turns with the paused ring, one
 * decision each time (two uthreads waking each other beside one that
 * yields in a loop run 16 decisions, then one paused, 16, then one woken;
 * without the turns every break went to the paused ring and a uthread woken
 * by an alarm, or displaced into `prev`, waited for as long as the three
 * ran: tests/starve).
 *
 * Rings. Each is a bounded circular buffer (RING slots) with a head and a
 * tail counter. Only the owner pushes: it stores the slot and then the tail
 * (release), no RMW. The owner takes from the head with a CAS, since thieves
 * take from there too; with one vcore there are no thieves and plain stores
 * do. A thief copies about half of the victim's ring (woken first, else
 * paused) into its own empty ring and claims them with one CAS on the
 * victim's head (Go's runqgrab). What does not fit in a ring waits in its
 * spill, an array only the owner touches, in order behind the ring's
 * uthreads; the owner refills the ring from it when the ring runs empty,
 * so thieves see the oldest uthreads of a long queue. A spill is invisible
 * to thieves: one that finds nothing else treats a busy vcore whose
 * `spilled` flag is up like one with a stuck `next` (below) and pokes it,
 * and the owner refills its rings from the spill there (ops->poked), so
 * spilled uthreads never wait for the end of one long-running uthread. (Go moves half a full
 * runq to its global queue instead; with tens of thousands of uthreads
 * per vcore that reorders them and walks cold uthreads on every move.)
 *
 * `next` is the owner's alone: read and written with plain (relaxed) loads
 * and stores, never an RMW, and thieves never take it. It is also the
 * runtime's next slot (struct weft_next_slot, <weft/sched.h>): the runtime
 * puts a uthread woken here by a uthread running here, which last ran here,
 * into it without calling thread_runnable (the common case of that op), and
 * takes it for a block here without calling take_local, within the budget
 * take_local left (see next_of below): the common hand-off makes no call
 * into this file. A uthread could
 * therefore wait there while its vcore runs one uthread for long. A
 * spinning thief that finds nothing else to steal watches such a vcore, and
 * if its decision count has not moved between two looks WATCH_EVERY rounds
 * apart (about 15 us), asks it
 * with weft_vcore_poke() to move `next` to its woken ring (ops->poked, run
 * on that vcore in vcore context, interrupting the long-running uthread):
 * Go's rule that runnext is stolen only in the last pass and after backing
 * off, without making the owner pay for it. A vcore about to park takes
 * a last look (last_looks); after the last one parked, the runtime's
 * watcher (src/vcore.c) pokes a busy vcore whose run count stood still for
 * 10 ms. A look reads two lines the
 * busy vcore writes at every decision (next, its decision count), so each
 * costs it a cache miss: looking every 16th round (4 looks before a poke)
 * made a spawn + join loop on the other vcore 12 % slower than looking every
 * 128th, for a poke about 10 us later (a uthread spawned behind a hog ran
 * after 51 us, median, and 62 us now).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include <weft/sched.h>

#define RING 1024u           /* slots per ring, a power of two */
#define RING_MASK (RING - 1)
#define NEXT_CHAIN 16        /* decisions in a row from next (and next + woken) */
#define PREV_RUNS 32         /* runs from prev per trip to the back of the woken ring */
#define INJECT_EVERY 61      /* decisions between looks at the injection queue */
#define WATCH_EVERY 128      /* a thief looks at a victim's next every 128th round */
#define POKE_LOOKS 1         /* looks after the first that find next stuck: a poke */
#define LAST_LOOK_NS 20000   /* a parking vcore's wait to see if a next is stuck */
#define WS_RAN 1u            /* sched_flags: picked to run before */

typedef struct weft_uthread *_Atomic slot_t;


/* A ring's overflow: what does not fit, in order behind the ring's own
 * uthreads, owned by the ring's vcore alone (a circular array that grows).
 * It refills the ring as the ring drains, so thieves always find the
 * oldest RING uthreads there. */
struct spill {
    struct weft_uthread **v;
    uint32_t head, n, cap;           /* cap a power of two, or 0 */
};

enum { W = 0, P = 1 };               /* the woken (and new) ring, the paused ring */

struct vq {
    /* Owned by this vcore (thieves read next, relaxed, to decide on a poke). */
    struct weft_next_slot ns;        /* next (ns.t), run by the runtime itself within
                                        ns.budget (arm/settle); ns.ask: the inbox is not
                                        empty, written under inbox_lock */
    unsigned armed;                  /* ns.budget as arm() set it */
    unsigned chain;                  /* decisions in a row taken from next */
    unsigned wchain;                 /* decisions in a row taken from next or the woken ring */
    bool woken_turn;                 /* with wchain spent at the end of next's chain: prev
                                        and the woken ring's turn (else the paused ring's) */
    struct weft_uthread *_Atomic prev; /* what a wake-up displaced from next (thieves
                                        read it, relaxed, to decide on a poke) */
    unsigned prev_runs;              /* runs from prev since its last trip to the back */
    unsigned inject_tick;            /* decisions until the injection queue comes first */
    uint32_t head_seen[2];           /* head[c] as last read here (heads only grow: a
                                        push that finds room by it has room) */
    bool pin_turn;                   /* the pinned list's turn to run */
    struct weft_ulist pinned;        /* pinned here and queued here */
    struct spill spill[2];           /* overflow of ring W, ring P */
    int poke_victim;                 /* as a thief: the vcore whose stuck next we watch */
    unsigned watch_tick;             /* steal rounds, to pace the looks at next */
    unsigned poke_looks;             /* looks that found it not moved */
    uint64_t poke_decisions;         /* its decision count when we started watching */
    /* Ring c holds slots head[c] .. tail[c] - 1 of buf[c]. The heads and
     * the tails on lines of their own: thieves CAS a head (the owner too,
     * taking), and the owner's push, which writes a tail and reads only its
     * own copy of the head (head_seen), must not wait for a line that
     * thieves fight over (with 8 vcores stealing the spawns of one, spawn +
     * join took 0.6x the time it took with one line). */
    _Alignas(64) _Atomic uint32_t head[2]; /* oldest queued: the owner and thieves advance it */
    _Alignas(64) _Atomic uint32_t tail[2]; /* next free slot: written by the owner only */
    _Atomic bool spilled;            /* a spill holds uthreads (owner writes; thieves
                                        that find the rings empty poke for a refill) */
    _Atomic bool inbox_stealable;    /* inbox holds unpinned uthreads (placed at spawn),
                                        which thieves may take: here, on a line thieves
                                        read anyway (ring_len), not on inbox_lock's, which
                                        a thief polling every round would take from the
                                        owner and the wakers of its pinned uthreads;
                                        written under inbox_lock */
    /* Other vcores push here. */
    _Alignas(64) weft_spinlock_t inbox_lock;
    struct weft_ulist inbox;         /* guarded by inbox_lock; not empty: ns.ask */
    _Alignas(64) slot_t buf[2][RING];/* the rings' slots */
};

static struct vq *vqs;               /* one per vcore; fixed between init and fini */
static int nvq;
static struct vq *volatile parents_vqs;      /* a fork child's copy of the parent's vqs (init_ws) */
static bool solo;                    /* one vcore: no thieves, no RMW on the rings */

/* The injection queue: work from outside kernel threads, and overflow. */
static struct {
    weft_spinlock_t lock;            /* l */
    struct weft_ulist l;             /* guarded by lock */
    _Atomic unsigned len;            /* written under lock, read anywhere */
} __attribute__((aligned(64))) inj;

static inline struct weft_sched_link *L(struct weft_uthread *t)
{
    return weft_uthread_link(t);
}

static inline bool pinned(struct weft_uthread *t)
{
    return L(t)->flags & WEFT_PINNED;
}

/* next: the owner's plain access (an atomic only for thieves' looks). It is
 * the runtime's next slot too (struct weft_next_slot): a wake-up here by a
 * uthread of one that last ran here fills it without thread_runnable (what
 * it displaces comes with by_uthread 3), and a block here takes it without
 * take_local while ns.budget lasts and ns.ask is clear. arm() sets the
 * budget at the end of take_local to what take_local would allow in a row
 * from next (its chain; none with a pinned uthread here, whose turns come
 * in take_slow; ns.ask stands for the inbox and is looked at each time);
 * settle(), first in each decision of ours, counts the runs the runtime
 * made meanwhile as decisions from next, as take_local's own. A budget
 * left from an earlier arm() never allows more than the chain does now:
 * only take_rings lowers the allowance (its chain counts up), and it runs
 * inside take_local, which arms again. The injection queue's turn counts
 * our own decisions only (every INJECT_EVERY-th, so at most NEXT_CHAIN
 * runs from the slot between two). */
static inline struct weft_uthread *next_of(struct vq *q)
{
    return __atomic_load_n(&q->ns.t, __ATOMIC_RELAXED);
}

static inline void next_set(struct vq *q, struct weft_uthread *t)
{
    __atomic_store_n(&q->ns.t, t, __ATOMIC_RELAXED);
}

static inline void settle(struct vq *q)
{
    unsigned used = q->armed - q->ns.budget;
    if (__builtin_expect(used != 0, 0)) {
        q->chain += used;
        q->wchain += used;
        q->armed = q->ns.budget;
    }
}

static inline void arm(struct vq *q)
{
    q->ns.budget = q->armed = !q->pinned.head && q->chain < NEXT_CHAIN ? NEXT_CHAIN - q->chain : 0;
}

/* disarm(): no runs from the slot until our next decision (a pinned
 * uthread queued here takes its turns in take_slow). */
static inline void disarm(struct vq *q)
{
    settle(q);
    q->ns.budget = q->armed = 0;
}

/* pinned_push() queues t, pinned here, on the private pinned list. */
static inline void pinned_push(struct vq *q, struct weft_uthread *t)
{
    weft_ulist_push(&q->pinned, t);
    disarm(q);
}

/* ---- the injection queue ------------------------------------------------------ */

/* inject_list() appends the n uthreads first..last (linked) to the queue. */
static void inject_list(struct weft_uthread *first, struct weft_uthread *last, unsigned n)
{
    L(last)->next = NULL;
    weft_spin_lock(&inj.lock);
    if (inj.l.tail)
        L(inj.l.tail)->next = first;
    else
        inj.l.head = first;
    inj.l.tail = last;
    atomic_store_explicit(&inj.len, atomic_load_explicit(&inj.len, memory_order_relaxed) + n,
                          memory_order_relaxed);
    weft_spin_unlock(&inj.lock);
}

/* ---- rings ------------------------------------------------------------------ */

static inline unsigned ring_len(struct vq *q, int c)
{
    return atomic_load_explicit(&q->tail[c], memory_order_acquire) -
           atomic_load_explicit(&q->head[c], memory_order_acquire);
}

/* ring_put() appends the n uthreads v[0..n) to the owner's ring c, which
 * has room for them. */
static void ring_put(struct vq *q, int c, struct weft_uthread *const *v, uint32_t n)
{
    uint32_t tl = atomic_load_explicit(&q->tail[c], memory_order_relaxed);
    for (uint32_t i = 0; i < n; i++)
        atomic_store_explicit(&q->buf[c][(tl + i) & RING_MASK], v[i], memory_order_relaxed);
    atomic_store_explicit(&q->tail[c], tl + n, memory_order_release); /* partner: ring_grab */
}

/* A spill's array is its own mapping (at least RING slots: 8 KiB), not
 * malloc's: a burst of tens of thousands of spawns grows it by doubling, and
 * malloc would keep every smaller array it outgrew committed in its arena
 * after the burst, memory that no parked uthread needs. */
static struct weft_uthread **spill_map(uint32_t cap)
{
    void *v = mmap(NULL, sizeof(struct weft_uthread *) * cap, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return v == MAP_FAILED ? NULL : v;
}

static void spill_unmap(struct spill *sp)
{
    if (sp->v)
        munmap(sp->v, sizeof *sp->v * sp->cap);
    *sp = (struct spill){ NULL, 0, 0, 0 };
}

/* spill_push() queues t behind everything in ring c and its spill. */
static __attribute__((noinline)) void spill_push(struct vq *q, int c, struct weft_uthread *t)
{
    struct spill *sp = &q->spill[c];
    if (sp->n == sp->cap) {
        uint32_t cap = sp->cap ? sp->cap * 2 : RING;
        struct weft_uthread **v = spill_map(cap);
        if (!v) { /* out of memory: the injection queue keeps it (a list) */
            inject_list(t, t, 1);
            return;
        }
        for (uint32_t i = 0; i < sp->n; i++)
            v[i] = sp->v[(sp->head + i) & (sp->cap - 1)];
        uint32_t n = sp->n;
        spill_unmap(sp);
        *sp = (struct spill){ v, 0, n, cap };
    }
    sp->v[(sp->head + sp->n++) & (sp->cap - 1)] = t;
    if (sp->n == 1)
        atomic_store_explicit(&q->spilled, true, memory_order_relaxed);
}

/* spill_refill() moves the oldest of ring c's spill into the ring. */
static __attribute__((noinline)) void spill_refill(struct vq *q, int c)
{
    struct spill *sp = &q->spill[c];
    uint32_t len = ring_len(q, c);
    uint32_t n = RING - len < sp->n ? RING - len : sp->n;
    struct weft_uthread *tmp[64];
    for (uint32_t done = 0; done < n;) {
        uint32_t k = n - done < 64 ? n - done : 64;
        for (uint32_t i = 0; i < k; i++)
            tmp[i] = sp->v[(sp->head + i) & (sp->cap - 1)];
        ring_put(q, c, tmp, k);
        sp->head = (sp->head + k) & (sp->cap - 1);
        sp->n -= k;
        done += k;
    }
    if (sp->n == 0 && sp->cap > 4 * RING) /* a burst is over: give its memory back */
        spill_unmap(sp);
    if (q->spill[W].n == 0 && q->spill[P].n == 0)
        atomic_store_explicit(&q->spilled, false, memory_order_relaxed);
}

/* q_push() queues t at the back of vcore q's ring c (its owner calls). */
static inline void q_push(struct vq *q, int c, struct weft_uthread *t)
{
    if (__builtin_expect(q->spill[c].n == 0, 1)) {
        uint32_t tl = atomic_load_explicit(&q->tail[c], memory_order_relaxed);
        if (__builtin_expect(tl - q->head_seen[c] >= RING, 0)) /* partner: a thief's CAS */
            q->head_seen[c] = atomic_load_explicit(&q->head[c], memory_order_acquire);
        if (__builtin_expect(tl - q->head_seen[c] < RING, 1)) {
            atomic_store_explicit(&q->buf[c][tl & RING_MASK], t, memory_order_relaxed);
            atomic_store_explicit(&q->tail[c], tl + 1, memory_order_release); /* partner: ring_grab */
            return;
        }
    }
    spill_push(q, c, t);
}

/* ring_prefetch() fetches the first line of the uthread in slot i (maybe
 * stale or empty: a prefetch never faults), which the owner takes next:
 * with many uthreads their structs are out of cache, and a switch waits
 * for the line (the saved stack pointer) of the one it resumes. */
static inline void ring_prefetch(slot_t *buf, uint32_t i)
{
    __builtin_prefetch(atomic_load_explicit(&buf[i & RING_MASK], memory_order_relaxed), 1);
}

/* ring_pop() takes the front of the owner's ring c, or NULL. */
static inline struct weft_uthread *ring_pop(struct vq *q, int c)
{
    _Atomic uint32_t *head = &q->head[c];
    slot_t *buf = q->buf[c];
    uint32_t tl = atomic_load_explicit(&q->tail[c], memory_order_relaxed);
    if (solo) {
        uint32_t h = atomic_load_explicit(head, memory_order_relaxed);
        if (h == tl)
            return NULL;
        atomic_store_explicit(head, h + 1, memory_order_relaxed);
        ring_prefetch(buf, h + 1);
        return atomic_load_explicit(&buf[h & RING_MASK], memory_order_relaxed);
    }
    uint32_t h = atomic_load_explicit(head, memory_order_acquire);
    for (;;) {
        if (h == tl)
            return NULL;
        struct weft_uthread *t = atomic_load_explicit(&buf[h & RING_MASK], memory_order_relaxed);
        if (atomic_compare_exchange_weak_explicit(head, &h, h + 1, memory_order_release,
                                                  memory_order_acquire))
            return t;
    }
}

/* q_pop() takes the front of vcore q's ring c (its owner calls), refilling
 * the ring from its spill when it runs empty (thieves see the ring, which
 * then holds the oldest RING uthreads). */
static inline struct weft_uthread *q_pop(struct vq *q, int c)
{
    struct weft_uthread *t = ring_pop(q, c);
    if (__builtin_expect(t == NULL, 0) && q->spill[c].n != 0) {
        spill_refill(q, c);
        t = ring_pop(q, c);
    }
    return t;
}

/* ring_grab() moves about half of victim v's ring c into the thief q's
 * ring c (empty, as the thief found nothing of its own) and returns the
 * first of them (not queued), or NULL. */
static struct weft_uthread *ring_grab(struct vq *v, struct vq *q, int c)
{
    slot_t *vbuf = v->buf[c], *qbuf = q->buf[c];
    uint32_t qt = atomic_load_explicit(&q->tail[c], memory_order_relaxed);
    uint32_t room = RING - ring_len(q, c);
    uint32_t n;
    struct weft_uthread *first;
    for (;;) {
        uint32_t h = atomic_load_explicit(&v->head[c], memory_order_acquire);
        uint32_t t = atomic_load_explicit(&v->tail[c], memory_order_acquire); /* partner: q_push */
        n = t - h;
        n -= n / 2;
        if (n == 0)
            return NULL;
        if (n > RING / 2)
            continue; /* head moved on between the two loads */
        if (n > room + 1)
            n = room + 1;
        first = atomic_load_explicit(&vbuf[h & RING_MASK], memory_order_relaxed);
        for (uint32_t i = 1; i < n; i++)
            atomic_store_explicit(&qbuf[(qt + i - 1) & RING_MASK],
                                  atomic_load_explicit(&vbuf[(h + i) & RING_MASK],
                                                       memory_order_relaxed),
                                  memory_order_relaxed);
        if (atomic_compare_exchange_strong_explicit(&v->head[c], &h, h + n, memory_order_acq_rel,
                                                    memory_order_relaxed))
            break;
    }
    if (n > 1)
        atomic_store_explicit(&q->tail[c], qt + n - 1, memory_order_release);
    weft_sched_note_shared(1);
    return first;
}

/* ---- taking work ------------------------------------------------------------ */

/* queue_here() queues t, runnable on vcore me (its own), at the back of the
 * ring its kind goes to (or the pinned list). */
static void queue_here(struct vq *q, struct weft_uthread *t, bool paused)
{
    if (pinned(t))
        pinned_push(q, t);
    else
        q_push(q, paused ? P : W, t);
}

/* inbox_drain() queues what other vcores pushed to us. */
static void inbox_drain(struct vq *q)
{
    weft_spin_lock(&q->inbox_lock);
    struct weft_uthread *t = q->inbox.head;
    q->inbox.head = q->inbox.tail = NULL;
    __atomic_store_n(&q->ns.ask, 0, __ATOMIC_RELAXED);
    if (atomic_load_explicit(&q->inbox_stealable, memory_order_relaxed))
        atomic_store_explicit(&q->inbox_stealable, false, memory_order_relaxed);
    weft_spin_unlock(&q->inbox_lock);
    weft_sched_note_shared(1);
    while (t) {
        struct weft_uthread *n = L(t)->next;
        queue_here(q, t, false);
        t = n;
    }
}

/* inject_take() takes a share of the injection queue: runs the first,
 * queues the rest on q's woken ring (which has room: it was empty, or the
 * share is small). */
static struct weft_uthread *inject_take(struct vq *q)
{
    unsigned len = atomic_load_explicit(&inj.len, memory_order_relaxed);
    if (!len)
        return NULL;
    weft_spin_lock(&inj.lock);
    len = atomic_load_explicit(&inj.len, memory_order_relaxed);
    unsigned n = len / (unsigned)nvq + 1;
    if (n > len)
        n = len;
    if (n > RING / 2)
        n = RING / 2;
    struct weft_uthread *first = inj.l.head, *last = first;
    for (unsigned i = 1; i < n; i++)
        last = L(last)->next;
    if (n) {
        inj.l.head = L(last)->next;
        if (!inj.l.head)
            inj.l.tail = NULL;
        atomic_store_explicit(&inj.len, len - n, memory_order_relaxed);
    }
    weft_spin_unlock(&inj.lock);
    weft_sched_note_shared(1);
    if (!n)
        return NULL;
    L(last)->next = NULL;
    for (struct weft_uthread *t = L(first)->next; t;) {
        struct weft_uthread *nx = L(t)->next;
        q_push(q, W, t);
        t = nx;
    }
    return first;
}

/* The owner's plain access to prev (an atomic only for thieves' looks). */
static inline struct weft_uthread *prev_of(struct vq *q)
{
    return atomic_load_explicit(&q->prev, memory_order_relaxed);
}

static inline void prev_set(struct vq *q, struct weft_uthread *t)
{
    atomic_store_explicit(&q->prev, t, memory_order_relaxed);
}

/* take_prev() takes prev (see the top of this file), unless this is
 * its PREV_RUNS-th run from there: then it goes to the back of the woken
 * ring instead, behind whatever waited there. */
static inline struct weft_uthread *take_prev(struct vq *q)
{
    struct weft_uthread *t = prev_of(q);
    if (!t)
        return NULL;
    prev_set(q, NULL);
    if (++q->prev_runs < PREV_RUNS)
        return t;
    q->prev_runs = 0;
    q_push(q, W, t);
    return NULL;
}

/* take_rings() is take()'s common part: next (within its chain), the
 * woken ring (within its chain), the paused ring, then the rest. */
static inline struct weft_uthread *take_rings(struct vq *q)
{
    struct weft_uthread *t = next_of(q);
    if (t && q->chain < NEXT_CHAIN) {
        next_set(q, NULL);
        q->chain++;
        q->wchain++;
        return t;
    }
    q->chain = 0;
    /* next's runs count in wchain too: when next's chain ends with wchain
     * spent as well, prev and the woken ring take turns with the paused
     * ring (woken_turn), or a pair waking each other beside a yielding
     * uthread would give every break of its chain to the paused ring. */
    if (q->wchain < NEXT_CHAIN || (q->woken_turn = !q->woken_turn)) {
        if ((t = take_prev(q)) != NULL || (t = q_pop(q, W)) != NULL) {
            q->wchain++;
            return t;
        }
    }
    q->wchain = 0;
    if ((t = q_pop(q, P)) != NULL || (t = take_prev(q)) != NULL || (t = q_pop(q, W)) != NULL)
        return t;
    if ((t = next_of(q)) != NULL) {
        next_set(q, NULL);
        return t;
    }
    return NULL;
}

/* take_slow() is take() when its inbox, the injection queue or a pinned
 * uthread may come first. */
static __attribute__((noinline)) struct weft_uthread *take_slow(struct vq *q)
{
    struct weft_uthread *t;
    if (__atomic_load_n(&q->ns.ask, __ATOMIC_RELAXED))
        inbox_drain(q);
    if (q->inject_tick == 0) {
        q->inject_tick = INJECT_EVERY;
        if ((t = inject_take(q)) != NULL)
            return t;
    }
    if (q->pinned.head && (q->pin_turn = !q->pin_turn))
        return weft_ulist_pop(&q->pinned);
    if ((t = take_rings(q)) != NULL || (t = weft_ulist_pop(&q->pinned)) != NULL)
        return t;
    return inject_take(q);
}

/* take() is take_local for vcore me: see the top of this file. */
static inline struct weft_uthread *take(int me)
{
    struct vq *q = &vqs[me];
    if (__builtin_expect(--q->inject_tick == 0, 0) || __builtin_expect(q->pinned.head != NULL, 0) ||
        __builtin_expect(__atomic_load_n(&q->ns.ask, __ATOMIC_RELAXED), 0))
        return take_slow(q);
    struct weft_uthread *t = take_rings(q);
    return t ? t : take_slow(q);
}

static __attribute__((noinline)) struct weft_uthread *take_local_slow(struct vq *q)
{
    struct weft_uthread *t = take_slow(q);
    if (t)
        L(t)->sched_flags |= WS_RAN; /* ours until it runs */
    return t;
}

/* take_local_ws() is take() with its two common cases inline and no stack
 * frame: next within its chain (a hand-off), or, with next and the woken
 * ring and its spill empty, the front of the paused ring (a yield; the
 * paused ring's own spill, behind it, refills it once it runs dry, in
 * take_slow). A uthread found in next or the paused ring has run before
 * (WS_RAN is set). */
static inline struct weft_uthread *take_local_q(struct vq *q)
{
    struct weft_uthread *t = next_of(q);
    if (__builtin_expect(--q->inject_tick == 0, 0) || __builtin_expect(q->pinned.head != NULL, 0) ||
        __builtin_expect(__atomic_load_n(&q->ns.ask, __ATOMIC_RELAXED), 0))
        return take_local_slow(q);
    if (t) {
        if (__builtin_expect(q->chain >= NEXT_CHAIN, 0))
            return take_local_slow(q);
        next_set(q, NULL);
        q->chain++;
        q->wchain++;
        return t;
    }
    if (solo && q->spill[W].n == 0 && !prev_of(q)) { /* W's spill and prev come before P's ring */
        uint32_t ph = atomic_load_explicit(&q->head[P], memory_order_relaxed);
        if (atomic_load_explicit(&q->head[W], memory_order_relaxed) ==
                atomic_load_explicit(&q->tail[W], memory_order_relaxed) &&
            ph != atomic_load_explicit(&q->tail[P], memory_order_relaxed)) {
            q->chain = q->wchain = 0;
            atomic_store_explicit(&q->head[P], ph + 1, memory_order_relaxed);
            ring_prefetch(q->buf[P], ph + 1);
            return atomic_load_explicit(&q->buf[P][ph & RING_MASK], memory_order_relaxed);
        }
    }
    return take_local_slow(q);
}

static __attribute__((noinline)) struct weft_uthread *take_local_ws(int me)
{
    struct vq *q = &vqs[me];
    settle(q);
    struct weft_uthread *t = take_local_q(q);
    arm(q);
    return t;
}

/* take_yield_ws() is take_local for a yield of self. With one vcore (no
 * thief can take from the rings) and nothing but the paused ring and its
 * spill queued (no next, woken ring or its spill, pinned list or inbox),
 * self goes to the back of the paused ring (or of its spill, behind it) as
 * the ring's front comes out: one step for take_local's pop and
 * thread_paused's push, made on the yielder's stack before the switch.
 * Else take_local. (Written out rather than ring_pop + q_push: with those a
 * yield took 20 instructions and 8 % more time; the conditions above
 * already rule out their other cases. With more uthreads than a ring holds
 * every yield used to take take_local and thread_paused's way, whose
 * callback runs on the successor's stack, lines out of cache: 10 000
 * yielders at one vcore, 140-190 ns a yield, against 43 with prio.) */
/* yield_pop() is take_yield_ws's step once it may: the paused ring's front
 * (at ph, not empty) taken, the decision counted. */
static inline struct weft_uthread *yield_pop(struct vq *q, uint32_t ph)
{
    q->inject_tick--;
    q->chain = q->wchain = 0; /* the slot runs since arm() (settle) end with them */
    q->armed = q->ns.budget;
    slot_t *buf = q->buf[P];
    struct weft_uthread *t = atomic_load_explicit(&buf[ph & RING_MASK], memory_order_relaxed);
    atomic_store_explicit(&q->head[P], ph + 1, memory_order_relaxed);
    ring_prefetch(buf, ph + 1);
    return t;
}

/* take_yield_spilled() is take_yield_ws with a spill behind the paused ring:
 * self goes to the spill's back. Out of line, so that the common case keeps
 * no frame. */
static __attribute__((noinline)) struct weft_uthread *take_yield_spilled(struct vq *q, uint32_t ph,
                                                                       struct weft_uthread *self,
                                                                       int *queued)
{
    struct weft_uthread *t = yield_pop(q, ph);
    spill_push(q, P, self); /* behind the spill, in order */
    *queued = 1;
    return t;
}

static struct weft_uthread *take_yield_ws(int me, struct weft_uthread *self, int *queued)
{
    struct vq *q = &vqs[me];
    if (solo && q->inject_tick > 1 && !pinned(self) && !q->pinned.head &&
        !next_of(q) && !prev_of(q) &&
        !__atomic_load_n(&q->ns.ask, __ATOMIC_RELAXED) &&
        q->spill[W].n == 0 &&
        atomic_load_explicit(&q->head[W], memory_order_relaxed) ==
            atomic_load_explicit(&q->tail[W], memory_order_relaxed)) {
        uint32_t ph = atomic_load_explicit(&q->head[P], memory_order_relaxed);
        uint32_t pt = atomic_load_explicit(&q->tail[P], memory_order_relaxed);
        if (ph != pt) { /* an empty ring with a spill: take_local refills it */
            if (__builtin_expect(q->spill[P].n != 0, 0))
                return take_yield_spilled(q, ph, self, queued);
            struct weft_uthread *t = yield_pop(q, ph);
            atomic_store_explicit(&q->buf[P][pt & RING_MASK], self, memory_order_relaxed);
            atomic_store_explicit(&q->tail[P], pt + 1, memory_order_relaxed);
            *queued = 1;
            return t;
        }
    }
    return take_local_ws(me);
}

/* hidden(): q's vcore holds uthreads no thief can take, in next, prev or a
 * spill: worth a poke if it runs one uthread for long. */
static inline bool hidden(struct vq *q)
{
    return next_of(q) || prev_of(q) ||
           atomic_load_explicit(&q->spilled, memory_order_relaxed);
}

/* watch_next() is a thief looking at victim v, which has nothing stealable
 * but a uthread in next: poke v if its decisions have not moved for
 * POKE_LOOKS of our looks (it runs one uthread all along). */
static void watch_next(struct vq *q, int v)
{
    if (q->poke_victim >= 0 && q->poke_victim != v)
        return; /* watching another */
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

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* last_looks() is a vcore about to park (steal() found nothing, from
 * `start` on): a uthread in a busy vcore's next may have nobody to watch
 * it once we sleep (a spinner gives up on its clock, and a spawn's or a
 * wake-up's kick is skipped while one spins). Note the decision counts of
 * up to LAST_LOOKS such vcores, wait LAST_LOOK_NS once, and poke those
 * that have not decided meanwhile: they are stuck on one uthread, and the
 * poked vcore kicks a parked one (perhaps us) to steal what it queued. A
 * vcore that decided runs its next soon. */
#define LAST_LOOKS 16
static void last_looks(int me, int start)
{
    int ids[LAST_LOOKS];
    uint64_t seen[LAST_LOOKS];
    int n = 0;
    for (int i = 0; i < nvq && n < LAST_LOOKS; i++) {
        int v = start + i < nvq ? start + i : start + i - nvq;
        if (v != me && hidden(&vqs[v]) && weft_vcore_busy(v)) {
            ids[n] = v;
            seen[n++] = weft_vcore_decisions(v);
        }
    }
    if (!n)
        return;
    uint64_t end = mono_ns() + LAST_LOOK_NS;
    while (mono_ns() < end)
        ;
    for (int i = 0; i < n; i++)
        if (weft_vcore_decisions(ids[i]) == seen[i] &&
            hidden(&vqs[ids[i]]) && weft_vcore_busy(ids[i]))
            weft_vcore_poke(ids[i]);
}

/* inbox_grab() takes the unpinned uthreads from v's inbox (placed there at
 * spawn for v, which has not got to them): runs the first, queues the rest
 * on q's woken ring. */
static struct weft_uthread *inbox_grab(struct vq *v, struct vq *q)
{
    struct weft_uthread *first = NULL, *t, *prev = NULL;
    weft_spin_lock(&v->inbox_lock);
    for (t = v->inbox.head; t;) {
        struct weft_uthread *n = L(t)->next;
        if (pinned(t)) {
            prev = t;
        } else {
            if (prev)
                L(prev)->next = n;
            else
                v->inbox.head = n;
            if (v->inbox.tail == t)
                v->inbox.tail = prev;
            if (!first)
                first = t;
            else
                q_push(q, W, t);
        }
        t = n;
    }
    __atomic_store_n(&v->ns.ask, v->inbox.head != NULL, __ATOMIC_RELAXED);
    atomic_store_explicit(&v->inbox_stealable, false, memory_order_relaxed); /* all taken */
    weft_spin_unlock(&v->inbox_lock);
    weft_sched_note_shared(1);
    return first;
}

/* steal(): every other vcore once, from a random one on: half of the first
 * ring found with work (woken first, then paused), or what was placed in
 * its inbox and not pinned. */
static struct weft_uthread *steal(int me)
{
    if (nvq < 2)
        return NULL;
    struct vq *q = &vqs[me];
    /* next and the decision count are written at every decision of their
     * owner: a thief that read them every round would take those lines
     * from a busy vcore all the time. */
    bool parking = weft_vcore_parking();
    bool look = !parking && ++q->watch_tick % WATCH_EVERY == 0; /* parking: last_looks() */
    int start = (int)(weft_sched_rand() % (unsigned)nvq);
    bool watched = false;
    for (int i = 0; i < nvq; i++) {
        int v = start + i < nvq ? start + i : start + i - nvq;
        if (v == me)
            continue;
        struct vq *vq = &vqs[v];
        struct weft_uthread *t = NULL;
        if (ring_len(vq, W))
            t = ring_grab(vq, q, W);
        if (!t && ring_len(vq, P))
            t = ring_grab(vq, q, P);
        if (!t && atomic_load_explicit(&vq->inbox_stealable, memory_order_relaxed))
            t = inbox_grab(vq, q);
        if (t)
            return t;
        if (look && hidden(vq) && weft_vcore_busy(v)) {
            watch_next(q, v);
            watched |= q->poke_victim == v;
        }
    }
    if (parking)
        last_looks(me, start);
    else if (look && !watched)
        q->poke_victim = -1;
    return NULL;
}

/* ---- the ops ------------------------------------------------------------------- */

static void sched_entry_ws(void)
{
    int me = weft_vcore_id();
    settle(&vqs[me]);
    struct weft_uthread *t = take(me);
    arm(&vqs[me]);
    if (!t)
        t = steal(me);
    if (!t)
        t = inject_take(&vqs[me]); /* once more: it may have filled meanwhile */
    if (t) {
        L(t)->sched_flags |= WS_RAN;
        weft_run_uthread(t);
    }
}

/* inbox_push() hands t to vcore v, which alone will run it (or queue it). */
static void inbox_push(int v, struct weft_uthread *t)
{
    struct vq *q = &vqs[v];
    weft_spin_lock(&q->inbox_lock);
    weft_ulist_push(&q->inbox, t);
    __atomic_store_n(&q->ns.ask, 1, __ATOMIC_RELAXED);
    if (!pinned(t) && !atomic_load_explicit(&q->inbox_stealable, memory_order_relaxed))
        atomic_store_explicit(&q->inbox_stealable, true, memory_order_relaxed);
    weft_spin_unlock(&q->inbox_lock);
    weft_sched_note_shared(1);
    weft_vcore_wake(v); /* only v looks at its inbox */
}

/* displaced() queues old, which a wake-up just moved out of next: in prev
 * if that is free and either no thief exists or thieves find others in the
 * woken ring (see the top of this file); else at the back of the woken
 * ring, where a thief may take it (a kick). */
static inline void displaced(struct vq *q, struct weft_uthread *old)
{
    if (!prev_of(q) && !pinned(old) && (solo || ring_len(q, W) > 0)) {
        prev_set(q, old);
        return;
    }
    queue_here(q, old, false);
    if (!solo)
        weft_vcore_kick_local();
}

/* runnable_slow() is thread_runnable_ws for everything but a uthread that
 * has run, is not pinned and is woken by a uthread on its own vcore. */
static __attribute__((noinline)) void runnable_slow(struct weft_uthread *t)
{
    struct weft_sched_link *l = L(t);
    int me = l->waker;
    /* Pinned elsewhere, or placed on a vcore at spawn (vcore set, never
     * run): that vcore's inbox. */
    if (l->vcore != me && l->vcore >= 0 &&
        ((l->flags & WEFT_PINNED) || !(l->sched_flags & WS_RAN))) {
        inbox_push(l->vcore, t);
        return;
    }
    if (me < 0) { /* a kernel thread that is not a vcore */
        inject_list(t, t, 1);
        weft_sched_note_shared(1);
        weft_vcore_kick(-1);
        return;
    }
    struct vq *q = &vqs[me];
    if (l->flags & WEFT_PINNED) { /* pinned here: only we may take it */
        pinned_push(q, t);
        return;
    }
    if (!l->by_uthread) {
        /* Vcore context: keep the order things come in (alarms, events). */
        q_push(q, W, t);
        if (!solo)
            weft_vcore_kick_local();
        return;
    }
    struct weft_uthread *old = next_of(q);
    if (!(l->sched_flags & WS_RAN)) {
        /* Spawned by a uthread running here: next if it is free, so a
         * spawner that blocks at once (spawn, then join) hands its vcore to
         * the child with no other vcore involved; else the back of the
         * woken ring, so spawns start in spawn order. A kick either way: if
         * the spawner runs on, the spinner it wakes steals the child, or
         * pokes next loose (Go's wakep() in newproc). WS_RAN from here on:
         * next is never stolen, so the child is ours until it runs. */
        l->sched_flags |= WS_RAN;
        if (old)
            q_push(q, W, t);
        else
            next_set(q, t);
        if (!solo)
            weft_vcore_kick_local();
        return;
    }
    if (l->by_uthread == 2 &&
        (old || prev_of(q) || ring_len(q, W) || q->spill[W].n)) {
        /* By a blocking callback (an exit waking its joiner) with other
         * work queued here: behind it, as from vcore context (a joiner of
         * many children finds the rest done when it runs). */
        q_push(q, W, t);
        if (!solo)
            weft_vcore_kick_local();
        return;
    }
    /* Woken by a uthread running here (or by its blocking callback with
     * nothing else queued here: not stealable meanwhile), having run
     * elsewhere before. */
    next_set(q, t);
    if (old)
        displaced(q, old);
}

static void thread_runnable_ws(struct weft_uthread *t)
{
    struct weft_sched_link *l = L(t);
    if (l->by_uthread == 3) { /* the runtime's slot wake-up displaced it */
        displaced(&vqs[l->waker], t);
        return;
    }
    /* The common case: woken by a uthread running on the vcore it last ran
     * on, not pinned: next, with no kick (see the top of this file). */
    if (__builtin_expect(l->vcore == l->waker && l->by_uthread == 1 &&
                         (l->sched_flags & WS_RAN) && !(l->flags & WEFT_PINNED), 1)) {
        struct vq *q = &vqs[l->waker];
        struct weft_uthread *old = next_of(q);
        next_set(q, t);
        if (__builtin_expect(old == NULL, 1))
            return;
        displaced(q, old);
        return;
    }
    runnable_slow(t);
}

static void thread_paused_ws(struct weft_uthread *t)
{
    struct vq *q = &vqs[L(t)->vcore]; /* vcore context of the vcore it ran on */
    bool kick = !solo && !pinned(t); /* read before t is queued: a thief may run it at once */
    queue_here(q, t, true);
    if (kick)
        weft_vcore_kick_local();
}

/* poked_ws(): a thief wants our next (or prev): make it stealable. */
static void poked_ws(void)
{
    struct vq *q = &vqs[weft_vcore_id()];
    struct weft_uthread *t = next_of(q);
    bool more = false;
    for (int c = W; c <= P; c++)
        if (q->spill[c].n && ring_len(q, c) < RING / 2) {
            spill_refill(q, c); /* make the spill stealable */
            more = true;
        }
    if (t) {
        next_set(q, NULL);
        queue_here(q, t, false);
        more = true;
    }
    if ((t = prev_of(q)) != NULL) {
        prev_set(q, NULL);
        queue_here(q, t, false);
        more = true;
    }
    if (more && !solo)
        weft_vcore_kick_local(); /* the poker may have parked since */
}

/* reclaim_ws(): t is taken back if it waits in next or prev, which only we
 * use. */
static int reclaim_ws(int me, struct weft_uthread *t)
{
    struct vq *q = &vqs[me];
    if (prev_of(q) == t) {
        prev_set(q, NULL);
        return 1;
    }
    if (next_of(q) != t)
        return 0;
    next_set(q, NULL);
    return 1;
}

static int init_ws(int nvcores)
{
    /* vqs is set only in a fork child (fini clears it): the parent's queues,
     * which its vcores may have been changing. Not ours to use or free; kept
     * reachable for leak checkers. */
    if (vqs)
        parents_vqs = vqs;
    vqs = aligned_alloc(64, sizeof *vqs * (size_t)nvcores);
    if (!vqs)
        return ENOMEM;
    for (int i = 0; i < nvcores; i++) {
        struct vq *q = &vqs[i];
        q->ns = (struct weft_next_slot){ NULL, 0, 0 };
        q->armed = 0;
        q->chain = q->wchain = 0;
        q->woken_turn = false;
        atomic_init(&q->prev, NULL);
        q->prev_runs = 0;
        q->inject_tick = INJECT_EVERY;
        q->pin_turn = false;
        q->pinned = (struct weft_ulist){ NULL, NULL };
        q->poke_victim = -1;
        q->watch_tick = 0;
        q->poke_looks = 0;
        q->poke_decisions = 0;
        for (int c = W; c <= P; c++) {
            atomic_init(&q->head[c], 0);
            atomic_init(&q->tail[c], 0);
            atomic_init(&q->spilled, false);
            q->head_seen[c] = 0;
            q->spill[c] = (struct spill){ NULL, 0, 0, 0 };
        }
        q->inbox_lock = (weft_spinlock_t)WEFT_SPINLOCK_INIT;
        q->inbox = (struct weft_ulist){ NULL, NULL };
        atomic_init(&q->inbox_stealable, false);
    }
    inj.lock = (weft_spinlock_t)WEFT_SPINLOCK_INIT;
    inj.l = (struct weft_ulist){ NULL, NULL };
    atomic_init(&inj.len, 0);
    nvq = nvcores;
    solo = nvcores == 1;
    for (int i = 0; i < nvcores; i++)
        weft_vcore_next_slot_set(i, &vqs[i].ns);
    return 0;
}

static void fini_ws(void)
{
    for (int i = 0; i < nvq; i++)
        for (int c = W; c <= P; c++)
            spill_unmap(&vqs[i].spill[c]);
    free(vqs);
    vqs = NULL;
    nvq = 0;
}

const struct weft_sched_ops weft__sched_ws = {
    .name = "ws",
    .init = init_ws,
    .fini = fini_ws,
    .sched_entry = sched_entry_ws,
    .thread_runnable = thread_runnable_ws,
    .thread_paused = thread_paused_ws,
    .take_local = take_local_ws,
    .poked = poked_ws,
    .reclaim = reclaim_ws,
    .take_yield = take_yield_ws,
};
