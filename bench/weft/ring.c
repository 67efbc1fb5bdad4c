/*
 * ring.c — the ring benchmark (contract: issue 4's ring spec): R = T/N rings
 * of N uthreads pass one token around, M rounds; messages per second.
 *
 *   weft_ring --n N --threads T --rounds M [--sync park|condvar]
 *
 * In round k the uthread with index k % N in its ring sends 1 to its right
 * neighbour, every other one relays what it got from its left plus one, and
 * the originator checks that N comes back. Each uthread sends M messages.
 *
 * Mailbox, one slot per uthread, with the semantics of a channel of capacity
 * one: a receive waits while the slot is empty, a send waits while it is
 * full. (Sends do find it full: the originator of round k+1 relays round k's
 * token and at once sends its own, so a ring briefly holds two tokens.)
 *   --sync park (default, impl=weft): the slot is an atomic word, 0 = empty.
 *     Send: CAS the value into the right neighbour's slot, weft_unpark() it;
 *     if the slot is full, mark it WAITING and weft_park() until the
 *     receiver, which empties it with an exchange, sees the mark and unparks
 *     its left neighbour. Receive: weft_park() until the own slot is
 *     non-zero, take it. weft_park() keeps one token, so a wake-up meant for
 *     another wait (or one that arrived while the slot was already seen full)
 *     makes a later park return at once: every wait loops on its slot,
 *     never on the park.
 *   --sync condvar (impl=weft-condvar): value + full flag under a
 *     weft_mutex_t, one weft_cond_t for "not empty" (the receiver waits) and
 *     one for "not full" (the sender waits); each side signals after
 *     unlocking, unconditionally, as the textbook bounded buffer does.
 *
 * Placement (--placement): vcores come from WEFT_VCORES (default: all CPUs;
 * --workers is rejected, as for Go's GOMAXPROCS).
 *   default (impl=weft): weft_spawn with no attributes, as a user writes it:
 *     the runtime places the uthreads (spawned from main, they go to the
 *     shared injection queue and the vcores take shares of it; wake-ups then
 *     gather each ring on its waker's vcore, stealing spreads the rest).
 *   placed (impl=weft-placed): ring r is spawned on vcore r % vcores
 *     (WEFT_ON_VCORE), which no peer can express: the natural placement of
 *     rings whose uthreads only talk to each other.
 * Stacks are the runtime default (WEFT_STACK_SIZE, 256 KiB, committed
 * lazily). After the run it prints, per message, the run-wide atomic RMWs
 * the vcores counted (weft_stats shared_rmw) and the share of decisions
 * that were direct hand-offs.
 *
 * Timing (the one boundary of bench/README.md's ring contract, the same in
 * every implementation): main (a plain kernel thread, not a uthread) spawns
 * every uthread; each counts itself in on a weft_wg_t (`ready`) and blocks in
 * its first wait: the originator of round 0 of each ring (index 0) on a gate
 * token in its own mailbox, every other uthread on its empty mailbox. Main
 * waits until all T are in, then starts the clock and opens the gate by
 * sending the token to ring 0's originator; each originator passes it on to
 * the originators of rings 2r+1 and 2r+2 before its first send (a binary
 * fan-out, so opening the gate is spread over the vcores instead of R
 * wake-ups from main). The uthread that receives the last message of its
 * ring counts the ring done; the one that counts the last ring takes the end
 * time itself and wakes main (a weft_wg_t): every uthread has then sent its M
 * messages. Every uthread then waits for a release token in its own mailbox
 * instead of returning, so no uthread exits inside the timed span. Untimed
 * afterwards: main sends every uthread its release token, joins them all
 * (each returns its send count) and checks the sends (T*M) and that no
 * originator ever saw a value other than N. No warm-up: each uthread has run
 * once, up to its first wait, before the clock starts.
 *
 * Exit: 0 measured, 1 FAIL, 2 bad command line, 75 a spawn failed (LIMIT).
 */
#include "bench.h"
#include "ring_args.h"

#include <limits.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <unistd.h>
#include <weft/weft.h>
#include <weft/sched.h>

/* Slot words: 0 empty; else a value (1..N, or GATE) in the low 31 bits, plus
 * WAITING when the sender found it full and parks until it is emptied. */
#define WAITING    0x80000000u
#define GATE_TOKEN 0x7fffffffu   /* the gate's message: values on the ring are 1..N */
#define RELEASE_TOKEN 0x7ffffffeu /* after the run: leave (see "Timing") */

/* One uthread's mailbox. Rings are laid out one after another, each padded
 * to whole cache lines, so neighbouring rings (on different vcores) share no
 * line. */
struct park_box {
    weft_t self;              /* written by main before the gate opens */
    _Atomic uint32_t slot;    /* see WAITING */
};

struct cond_box {
    weft_t self;
    weft_mutex_t m;
    weft_cond_t nonempty;     /* the receiver waits here */
    weft_cond_t nonfull;      /* the sender waits here */
    uint32_t val;             /* guarded by m */
    int full;                 /* guarded by m */
};

enum sync_kind { SYNC_PARK, SYNC_CONDVAR };

static struct {
    enum sync_kind sync;
    size_t n;                 /* threads per ring */
    size_t threads;           /* T */
    size_t rings;             /* R = T / N */
    uint64_t rounds;          /* M */
    size_t box_size;          /* sizeof the box kind */
    size_t ring_stride;       /* bytes per ring, a multiple of 64 */
    char *boxes;
    weft_wg_t ready;          /* uthreads not yet at their first wait */
    atomic_size_t rings_left; /* rings not yet finished */
    _Atomic uint64_t end_ns;  /* taken by the uthread that finished the last ring */
    weft_wg_t finished;       /* 1 until then */
    atomic_uint_fast64_t bad; /* originator receipts != N */
} g;

static inline void *box_at(size_t ring, size_t i)
{
    return g.boxes + ring * g.ring_stride + i * g.box_size;
}

/* ---- park / unpark mailbox ------------------------------------------------ */

/* park_send() puts v into to's slot, waiting (parked) while the slot is full,
 * then wakes to. A full slot is normal: the originator of round k+1 relays
 * round k's token and at once sends its own, before its right neighbour took
 * the first. The receiver that empties a slot marked WAITING unparks its left
 * neighbour, the only one that sends to it (the gate token comes from
 * elsewhere, but always finds the slot empty: nothing else can be sent to an
 * originator before it has passed the gate). */
static inline void park_send(struct park_box *to, uint32_t v)
{
    uint32_t cur = 0;
    for (;;) {
        if (cur == 0) {
            if (atomic_compare_exchange_weak_explicit(&to->slot, &cur, v, memory_order_release,
                                                      memory_order_relaxed))
                break;
            continue; /* cur: what is there */
        }
        if (!(cur & WAITING) &&
            !atomic_compare_exchange_weak_explicit(&to->slot, &cur, cur | WAITING,
                                                   memory_order_relaxed, memory_order_relaxed))
            continue;
        weft_park(); /* until the receiver empties it (or a stray token: re-check) */
        cur = atomic_load_explicit(&to->slot, memory_order_relaxed);
    }
    weft_unpark(to->self);
}

/* park_recv() waits (parked) for a value in me's slot and takes it. */
static inline uint32_t park_recv(struct park_box *me, struct park_box *left)
{
    while (atomic_load_explicit(&me->slot, memory_order_relaxed) == 0)
        weft_park();
    uint32_t v = atomic_exchange_explicit(&me->slot, 0, memory_order_acquire);
    if (v & WAITING)
        weft_unpark(left->self);
    return v & ~WAITING;
}

/* ---- mutex + condvar mailbox ---------------------------------------------- */

static inline void cond_send(struct cond_box *to, uint32_t v)
{
    weft_mutex_lock(&to->m);
    while (to->full)
        weft_cond_wait(&to->nonfull, &to->m);
    to->val = v;
    to->full = 1;
    weft_mutex_unlock(&to->m);
    weft_cond_signal(&to->nonempty);
}

static inline uint32_t cond_recv(struct cond_box *me, struct cond_box *left)
{
    (void)left;
    weft_mutex_lock(&me->m);
    while (!me->full)
        weft_cond_wait(&me->nonempty, &me->m);
    uint32_t v = me->val;
    me->full = 0;
    weft_mutex_unlock(&me->m);
    weft_cond_signal(&me->nonfull);
    return v;
}

/* ---- the ring ---------------------------------------------------------------- */

/* The mailbox calls for kind k; k is a constant wherever they are used. */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE void box_send(enum sync_kind k, void *to, uint32_t v)
{
    if (k == SYNC_PARK)
        park_send(to, v);
    else
        cond_send(to, v);
}

ALWAYS_INLINE uint32_t box_recv(enum sync_kind k, void *me, void *left)
{
    return k == SYNC_PARK ? park_recv(me, left) : cond_recv(me, left);
}

/* ring_member() is one uthread of the ring: the protocol of the spec.
 * Returns its send count. */
ALWAYS_INLINE void *ring_member(void *arg, enum sync_kind k)
{
    size_t idx = (size_t)(uintptr_t)arg, n = g.n, r = idx / n, i = idx % n;
    uint64_t m = g.rounds, sends = 0, bad = 0;
    void *me = box_at(r, i), *right = box_at(r, (i + 1) % n), *left = box_at(r, (i + n - 1) % n);

    weft_wg_done(&g.ready);
    if (i == 0) { /* originator of round 0: wait at the gate, pass it on */
        if (box_recv(k, me, left) != GATE_TOKEN)
            bad++;
        for (size_t c = 2 * r + 1; c <= 2 * r + 2 && c < g.rings; c++)
            box_send(k, box_at(c, 0), GATE_TOKEN);
    }
    size_t orig = 0; /* round % n, kept without a division */
    for (uint64_t round = 0; round < m; round++) {
        if (i == orig) {
            box_send(k, right, 1);
            sends++;
            if (box_recv(k, me, left) != n)
                bad++;
        } else {
            uint32_t v = box_recv(k, me, left);
            box_send(k, right, v + 1);
            sends++;
        }
        if (++orig == n)
            orig = 0;
    }
    if (i == (m - 1) % n && /* it received the ring's last message */
        atomic_fetch_sub(&g.rings_left, 1) == 1) {
        atomic_store(&g.end_ns, bench_now_ns());
        weft_wg_done(&g.finished);
    }
    if (box_recv(k, me, left) != RELEASE_TOKEN) /* untimed: wait to be let go */
        bad++;
    if (bad)
        atomic_fetch_add(&g.bad, bad);
    return (void *)(uintptr_t)sends;
}

static void *park_thread(void *arg)
{
    return ring_member(arg, SYNC_PARK);
}

static void *cond_thread(void *arg)
{
    return ring_member(arg, SYNC_CONDVAR);
}

/* ---- command line ------------------------------------------------------------ */

static const struct ring_cli cli = {
    .usage = "--n N --threads T --rounds M [--sync park|condvar] [--placement default|placed]"
             "   (vcores: WEFT_VCORES)",
    .extra_opt = "--sync",
    .extra_dflt = "park",
    .extra2_opt = "--placement",
    .extra2_dflt = "default",
    .no_workers = "%s: weft takes its vcores from WEFT_VCORES, not --workers",
};

int main(int argc, char **argv)
{
    struct ring_args ra;
    ring_args_parse(argc, argv, &cli, &ra);
    g.n = ra.n;
    g.threads = ra.threads;
    g.rounds = ra.rounds;
    if (strcmp(ra.extra, "park") == 0)
        g.sync = SYNC_PARK;
    else if (strcmp(ra.extra, "condvar") == 0)
        g.sync = SYNC_CONDVAR;
    else
        ring_usage(argv[0], &cli, "bad value for %s (park or condvar)", "--sync");
    bool placed;
    if (strcmp(ra.extra2, "default") == 0)
        placed = false;
    else if (strcmp(ra.extra2, "placed") == 0)
        placed = true;
    else
        ring_usage(argv[0], &cli, "bad value for %s (default or placed)", "--placement");
    g.rings = g.threads / g.n;

    const char *impl = g.sync == SYNC_PARK ? (placed ? "weft-placed" : "weft")
                                           : (placed ? "weft-condvar-placed" : "weft-condvar");
    void *(*fn)(void *) = g.sync == SYNC_PARK ? park_thread : cond_thread;
    g.box_size = g.sync == SYNC_PARK ? sizeof(struct park_box) : sizeof(struct cond_box);
    g.ring_stride = (g.n * g.box_size + 63) & ~(size_t)63;
    g.boxes = aligned_alloc(64, g.rings * g.ring_stride);
    if (!g.boxes) {
        fprintf(stderr, "LIMIT mailboxes (%zu bytes): %s after 0 of %zu threads\n",
                g.rings * g.ring_stride, strerror(ENOMEM), g.threads);
        return 75;
    }
    memset(g.boxes, 0, g.rings * g.ring_stride);
    if (g.sync == SYNC_CONDVAR)
        for (size_t r = 0; r < g.rings; r++)
            for (size_t i = 0; i < g.n; i++) {
                struct cond_box *b = box_at(r, i);
                bench_check_rc(weft_mutex_init(&b->m, WEFT_MUTEX_PLAIN));
                bench_check_rc(weft_cond_init(&b->nonempty));
                bench_check_rc(weft_cond_init(&b->nonfull));
            }

    int rc = weft_init(NULL); /* vcores: WEFT_VCORES or all */
    if (rc)
        bench_fail("weft_init: %s", strerror(rc));
    int nv = weft_num_vcores();
    bench_check_rc(weft_wg_add(&g.ready, (int)g.threads)); /* T <= INT_MAX */
    bench_check_rc(weft_wg_add(&g.finished, 1));
    atomic_store(&g.rings_left, g.rings);

    /* Spawn everything (untimed). Placed: ring r starts on vcore r % nv. */
    for (size_t r = 0; r < g.rings; r++) {
        weft_attr_t attr = { 0 };
        if (placed)
            attr = (weft_attr_t){ .flags = WEFT_ON_VCORE, .vcore = (int)(r % (size_t)nv) };
        for (size_t i = 0; i < g.n; i++) {
            size_t idx = r * g.n + i;
            weft_t *self = (weft_t *)box_at(r, i); /* self is the first field of both */
            rc = weft_spawn(self, &attr, fn, (void *)(uintptr_t)idx);
            if (rc) {
                fprintf(stderr, "LIMIT weft_spawn: %s after %zu of %zu threads\n",
                        strerror(rc), idx, g.threads);
                fflush(stdout);
                /* The spawned uthreads wait for messages that will never come:
                 * leave without weft_shutdown(), which would wait for them. */
                _exit(75);
            }
        }
    }

    struct weft_vcore_stats st0[256], st1[256];
    int nst = nv < 256 ? nv : 256;
    bench_check_rc(weft_wg_wait(&g.ready)); /* every uthread is at its first wait */
    for (int v = 0; v < nst; v++)
        bench_check_rc(weft_stats(v, &st0[v]));
    uint64_t t0 = bench_now_ns();
    if (g.sync == SYNC_PARK)
        park_send(box_at(0, 0), GATE_TOKEN);
    else
        cond_send(box_at(0, 0), GATE_TOKEN);
    bench_check_rc(weft_wg_wait(&g.finished));
    uint64_t t1 = atomic_load(&g.end_ns);
    uint64_t rmw = 0, dec = 0, hand = 0, copies = 0, copied = 0, fwd = 0;
    for (int v = 0; v < nst; v++) {
        bench_check_rc(weft_stats(v, &st1[v]));
        rmw += st1[v].shared_rmw - st0[v].shared_rmw;
        dec += st1[v].decisions - st0[v].decisions;
        hand += st1[v].handoffs - st0[v].handoffs;
        copies += st1[v].stack_copies - st0[v].stack_copies;
        copied += st1[v].stack_copy_bytes - st0[v].stack_copy_bytes;
        fwd += st1[v].stack_forwards - st0[v].stack_forwards;
    }
    /* Untimed: let every uthread go (every mailbox is empty now). */
    for (size_t r = 0; r < g.rings; r++)
        for (size_t i = 0; i < g.n; i++) {
            if (g.sync == SYNC_PARK)
                park_send(box_at(r, i), RELEASE_TOKEN);
            else
                cond_send(box_at(r, i), RELEASE_TOKEN);
        }

    uint64_t sends = 0, want = (uint64_t)g.threads * g.rounds, short_threads = 0;
    for (size_t r = 0; r < g.rings; r++)
        for (size_t i = 0; i < g.n; i++) {
            void *res;
            bench_check_rc(weft_join(*(weft_t *)box_at(r, i), &res));
            sends += (uintptr_t)res;
            short_threads += (uintptr_t)res != g.rounds;
        }
    weft_shutdown();

    if (atomic_load(&g.bad))
        bench_fail("%s ring: %llu times an originator got a value other than n=%zu back",
                   impl, (unsigned long long)atomic_load(&g.bad), g.n);
    if (sends != want || short_threads)
        bench_fail("%s ring: %llu sends, want %llu (%llu threads did not send %llu)", impl,
                   (unsigned long long)sends, (unsigned long long)want,
                   (unsigned long long)short_threads, (unsigned long long)g.rounds);

    double secs = (double)(t1 - t0) / 1e9;
    char param[64];
    snprintf(param, sizeof param, "n=%zu,threads=%zu", g.n, g.threads);
    bench_result("ring", impl, param, (double)want / (secs > 0 ? secs : 1e-9), "msg/s");
    bench_note(impl, "n=%zu threads=%zu rounds=%llu seconds=%.6f messages=%llu", g.n, g.threads,
               (unsigned long long)g.rounds, secs, (unsigned long long)want);
    if (placed)
        bench_note(impl, "vcores=%d ring r on vcore r%%%d (WEFT_ON_VCORE)", nv, nv);
    else
        bench_note(impl, "vcores=%d default placement", nv);
    bench_note(impl, "shared_rmw_per_msg=%.4f handoff_share=%.3f decisions_per_msg=%.3f",
               (double)rmw / (double)want, dec ? (double)hand / (double)dec : 0.0,
               (double)dec / (double)want);
    if (copies)
        bench_note(impl, "stack_copies_per_msg=%.3f bytes_per_copy=%.0f forwards_per_msg=%.4f",
                   (double)copies / (double)want, (double)copied / (double)copies,
                   (double)fwd / (double)want);
    free(g.boxes);
    return 0;
}
