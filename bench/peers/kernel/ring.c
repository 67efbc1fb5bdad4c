/*
 * ring.c (kernel peer) — the ring benchmark with one pthread per ring member
 * (contract: issue 4's ring spec): R = T/N rings of N threads pass a token
 * around, M rounds; messages per second. impl=pthread.
 *
 *   kernel_ring --n N --threads T --rounds M
 *
 * In round k the thread with index k % N in its ring sends 1 to its right
 * neighbour, every other one relays what it got from its left plus one, and
 * the originator checks that N comes back. Each thread sends M messages.
 *
 * Mailbox: a value slot and two POSIX semaphores per thread, the textbook
 * one-slot bounded buffer: `full` (0 at start; the receiver waits on it) and
 * `empty` (1 at start; the sender waits on it). The second semaphore is
 * needed: the originator of round k+1 relays round k's token and at once
 * sends its own, before its right neighbour has taken the first, so a lone
 * semaphore plus a slot would overwrite a message. An uncontended sem_wait or
 * sem_post is a user-space atomic; a wait that blocks, and the post that
 * wakes it, are futex system calls.
 *
 * Threads: pthread_create() with default attributes (8 MiB stacks, committed
 * lazily), all spawned first (untimed), unpinned. They stop at the kernel's
 * limits: pid_max and threads-max, vm.max_map_count (a stack and its guard
 * are two mappings), RLIMIT_NPROC. A failed pthread_create() prints
 * "LIMIT pthread_create: <error> after k of T threads" and exits 75; the k
 * threads already created are all blocked in sem_wait() (none can move before
 * the gate opens), so exit() simply ends them with the process.
 *
 * Timing as weft/ring.c (the one boundary of bench/README.md's ring
 * contract): every thread counts itself in on `ready` (the last one posts a
 * semaphore main waits on) and blocks in its first wait: the originator of
 * round 0 of each ring (index 0) on a gate token in its own mailbox, the
 * others on their empty mailboxes. Main then starts the clock, sends the
 * token to ring 0's originator, and each originator passes it to the
 * originators of rings 2r+1 and 2r+2 before its first send. The thread that
 * receives a ring's last message decrements the rings-left counter; the one
 * that takes it to zero takes the end time itself and posts a semaphore main
 * waits on. Every thread then waits for a release token in its own mailbox
 * instead of exiting, so no thread exits inside the timed span. Untimed: main
 * sends every thread its release token, joins every thread (each returns its
 * send count) and checks the counts and that every originator got N back.
 *
 * Exit: 0 measured, 1 FAIL, 2 bad command line, 75 thread creation failed.
 */
#include "bench.h"
#include "ring_args.h"

#include <limits.h>
#include <semaphore.h>
#include <stdatomic.h>

#define GATE_TOKEN 0x7fffffffu   /* the gate's message: values on the ring are 1..N */
#define RELEASE_TOKEN 0x7ffffffeu /* after the run: exit (see "Timing") */

struct box {
    sem_t full;               /* a value is in val */
    sem_t empty;              /* val may be written */
    uint32_t val;             /* ordered by the semaphores */
};

static struct {
    size_t n, threads, rings;
    uint64_t rounds;
    size_t ring_stride;       /* bytes per ring, a multiple of 64 */
    char *boxes;
    pthread_t *tids;
    atomic_size_t not_ready;  /* threads not yet at their first wait */
    sem_t ready;              /* posted when not_ready reaches 0 */
    atomic_size_t rings_left;
    _Atomic uint64_t end_ns;  /* taken by the thread that finished the last ring */
    sem_t done;               /* posted when rings_left reaches 0 */
    atomic_uint_fast64_t bad; /* originator receipts != N */
} g;

static inline struct box *box_at(size_t ring, size_t i)
{
    return (struct box *)(void *)(g.boxes + ring * g.ring_stride + i * sizeof(struct box));
}

/* sem_wait() that retries after a signal; any other error is fatal. */
static inline void sem_take(sem_t *s)
{
    while (sem_wait(s) != 0)
        if (errno != EINTR)
            bench_fail("sem_wait: %s", strerror(errno));
}

static inline void sem_give(sem_t *s)
{
    if (sem_post(s) != 0)
        bench_fail("sem_post: %s", strerror(errno));
}

static inline void send(struct box *to, uint32_t v)
{
    sem_take(&to->empty);
    to->val = v;
    sem_give(&to->full);
}

static inline uint32_t recv(struct box *me)
{
    sem_take(&me->full);
    uint32_t v = me->val;
    sem_give(&me->empty);
    return v;
}

static void *ring_thread(void *arg)
{
    size_t idx = (size_t)(uintptr_t)arg, r = idx / g.n, i = idx % g.n, n = g.n;
    uint64_t m = g.rounds, sends = 0, bad = 0;
    struct box *me = box_at(r, i), *right = box_at(r, (i + 1) % n);

    if (atomic_fetch_sub(&g.not_ready, 1) == 1)
        sem_give(&g.ready);
    if (i == 0) { /* originator of round 0: wait at the gate, pass it on */
        if (recv(me) != GATE_TOKEN)
            bad++;
        for (size_t c = 2 * r + 1; c <= 2 * r + 2 && c < g.rings; c++)
            send(box_at(c, 0), GATE_TOKEN);
    }
    size_t orig = 0; /* k % n, kept without a division */
    for (uint64_t k = 0; k < m; k++) {
        if (i == orig) {
            send(right, 1);
            sends++;
            if (recv(me) != n)
                bad++;
        } else {
            uint32_t v = recv(me);
            send(right, v + 1);
            sends++;
        }
        if (++orig == n)
            orig = 0;
    }
    if (i == (m - 1) % n && atomic_fetch_sub(&g.rings_left, 1) == 1) {
        atomic_store(&g.end_ns, bench_now_ns());
        sem_give(&g.done);
    }
    if (recv(me) != RELEASE_TOKEN) /* untimed: wait to be let go */
        bad++;
    if (bad)
        atomic_fetch_add(&g.bad, bad);
    return (void *)(uintptr_t)sends;
}

static const struct ring_cli cli = {
    .usage = "--n N --threads T --rounds M",
    .no_workers = "%s: one kernel thread per ring member, there are no workers",
};

int main(int argc, char **argv)
{
    struct ring_args ra;
    ring_args_parse(argc, argv, &cli, &ra);
    g.n = ra.n;
    g.threads = ra.threads;
    g.rounds = ra.rounds;
    g.rings = g.threads / g.n;

    g.ring_stride = (g.n * sizeof(struct box) + 63) & ~(size_t)63;
    g.boxes = aligned_alloc(64, g.rings * g.ring_stride);
    g.tids = malloc(g.threads * sizeof *g.tids);
    if (!g.boxes || !g.tids) {
        fprintf(stderr, "LIMIT mailboxes: %s after 0 of %zu threads\n", strerror(ENOMEM),
                g.threads);
        return 75;
    }
    for (size_t r = 0; r < g.rings; r++)
        for (size_t i = 0; i < g.n; i++) {
            struct box *b = box_at(r, i);
            if (sem_init(&b->full, 0, 0) != 0 || sem_init(&b->empty, 0, 1) != 0)
                bench_fail("sem_init: %s", strerror(errno));
            b->val = 0;
        }
    if (sem_init(&g.done, 0, 0) != 0 || sem_init(&g.ready, 0, 0) != 0)
        bench_fail("sem_init: %s", strerror(errno));
    atomic_store(&g.rings_left, g.rings);
    atomic_store(&g.not_ready, g.threads);

    for (size_t idx = 0; idx < g.threads; idx++) {
        int rc = pthread_create(&g.tids[idx], NULL, ring_thread, (void *)(uintptr_t)idx);
        if (rc) {
            fprintf(stderr, "LIMIT pthread_create: %s after %zu of %zu threads\n", strerror(rc),
                    idx, g.threads);
            /* Every thread created is blocked in sem_wait() until the gate
             * opens, which it never will: leave, the kernel ends them. */
            exit(75);
        }
    }

    sem_take(&g.ready); /* every thread is at its first wait */
    uint64_t t0 = bench_now_ns();
    send(box_at(0, 0), GATE_TOKEN);
    sem_take(&g.done);
    uint64_t t1 = atomic_load(&g.end_ns);
    for (size_t idx = 0; idx < g.threads; idx++) /* untimed: every mailbox is empty now */
        send(box_at(idx / g.n, idx % g.n), RELEASE_TOKEN);

    uint64_t sends = 0, want = (uint64_t)g.threads * g.rounds, short_threads = 0;
    for (size_t idx = 0; idx < g.threads; idx++) {
        void *res;
        bench_check_rc(pthread_join(g.tids[idx], &res));
        sends += (uintptr_t)res;
        short_threads += (uintptr_t)res != g.rounds;
    }
    if (atomic_load(&g.bad))
        bench_fail("pthread ring: %llu times an originator got a value other than n=%zu back",
                   (unsigned long long)atomic_load(&g.bad), g.n);
    if (sends != want || short_threads)
        bench_fail("pthread ring: %llu sends, want %llu (%llu threads did not send %llu)",
                   (unsigned long long)sends, (unsigned long long)want,
                   (unsigned long long)short_threads, (unsigned long long)g.rounds);

    double secs = (double)(t1 - t0) / 1e9;
    char param[64];
    snprintf(param, sizeof param, "n=%zu,threads=%zu", g.n, g.threads);
    bench_result("ring", "pthread", param, (double)want / (secs > 0 ? secs : 1e-9), "msg/s");
    bench_note("pthread", "n=%zu threads=%zu rounds=%llu seconds=%.6f messages=%llu", g.n,
               g.threads, (unsigned long long)g.rounds, secs, (unsigned long long)want);
    free(g.boxes);
    free(g.tids);
    return 0;
}
