/*
 * yield_fifo — weft_yield puts the caller at the back of its vcore's queue.
 *
 * Proves: N uthreads pinned to one vcore, spawned in order by a uthread on
 * that vcore, run strictly round-robin (0,1,..,N-1,0,1,..) while they yield,
 * and never leave their vcore. When there are two vcores, two such groups
 * run at once (vcore 0 and vcore 1), each keeping its own strict order. At
 * one vcore the same holds for unpinned uthreads; for BIG of them, more
 * than ws's rings hold, once all have run (till then the spawned ones, in
 * the woken ring, and those that yielded take turns by ws's chain bound):
 * from the third round on each BIG entries repeat the BIG before them (the
 * paused ring's spill, behind it, keeps the order, and a yield queues the
 * yielder there itself).
 */
#include "check.h"

#include <stdlib.h>

#define N 8
#define ROUNDS 200
#define BIG 3000              /* > ws's RING (1024) */
#define BIG_ROUNDS 20

struct group {
    int vcore;
    unsigned flags;           /* WEFT_PINNED or 0 */
    int n, rounds;            /* members, yields each */
    atomic_int next;          /* next free slot in log */
    int *log;                 /* n * rounds entries */
    atomic_int wrong_vcore;   /* times a member ran elsewhere */
};

struct member {
    struct group *g;
    int index;
};

static void *member_main(void *arg)
{
    struct member *m = arg;
    struct group *g = m->g;
    for (int r = 0; r < g->rounds; r++) {
        if ((g->flags & WEFT_PINNED) && weft_vcore_id() != g->vcore)
            atomic_fetch_add(&g->wrong_vcore, 1);
        int slot = atomic_fetch_add(&g->next, 1);
        g->log[slot] = m->index;
        weft_yield();
    }
    return NULL;
}

/* The group leader runs on the group's vcore and spawns the members there,
 * without yielding in between, so they queue in index order. */
static void *leader_main(void *arg)
{
    struct group *g = arg;
    struct member *ms = malloc(sizeof *ms * (size_t)g->n);
    weft_t *t = malloc(sizeof *t * (size_t)g->n);
    CHECK(ms && t, "no memory for %d members", g->n);
    for (int i = 0; i < g->n; i++) {
        ms[i] = (struct member){ g, i };
        t[i] = spawn_ex(member_main, &ms[i], g->flags, g->vcore, NULL);
    }
    for (int i = 0; i < g->n; i++)
        join(t[i]);
    free(ms);
    free(t);
    return NULL;
}

/* check_group(): g's log is strict round robin: entry k is member k % n;
 * with settle, from entry 2n on: the n entries before it fix an order,
 * and from then on each member runs again after every other one still
 * running has run once (a simulated FIFO; a member leaves it after its
 * last round). */
static void check_group(struct group *g, const char *what, bool settle)
{
    int total = g->n * g->rounds;
    CHECK(atomic_load(&g->next) == total, "%s: %d log entries", what, atomic_load(&g->next));
    CHECK(atomic_load(&g->wrong_vcore) == 0, "%s: pinned members ran %d times off vcore %d",
          what, atomic_load(&g->wrong_vcore), g->vcore);
    int *runs = calloc((size_t)g->n, sizeof *runs);
    int *fifo = malloc(sizeof *fifo * (size_t)(g->n + 1)), head = 0, len = 0, cap = g->n + 1;
    CHECK(runs && fifo, "no memory");
    int from = settle ? 2 * g->n : 0;
    for (int k = 0; k < from; k++)
        runs[g->log[k]]++;
    for (int k = from - g->n; settle && k < from; k++)
        if (runs[g->log[k]] < g->rounds)
            fifo[(head + len++) % cap] = g->log[k];
    for (int k = from; k < total; k++) {
        int want = settle ? (len ? fifo[head] : -1) : k % g->n;
        if (g->log[k] != want) {
            fprintf(stderr, "%s: log around entry %d:", what, k);
            for (int j = k < 16 ? 0 : k - 16; j < k + 16 && j < total; j++)
                fprintf(stderr, " %d", g->log[j]);
            fputc('\n', stderr);
            CHECK(0, "%s: entry %d is %d, strict round-robin wants %d", what, k,
                  g->log[k], want);
        }
        if (settle) {
            head = (head + 1) % cap;
            len--;
            if (++runs[want] < g->rounds)
                fifo[(head + len++) % cap] = want;
        }
    }
    CHECK(len == 0, "%s: %d members never finished", what, len);
    free(runs);
    free(fifo);
}

/* group_init() readies g for n members yielding rounds times each. */
static void group_init(struct group *g, int vcore, unsigned flags, int n, int rounds)
{
    free(g->log);
    *g = (struct group){ .vcore = vcore, .flags = flags, .n = n, .rounds = rounds };
    g->log = calloc((size_t)n * (size_t)rounds, sizeof *g->log);
    CHECK(g->log != NULL, "no memory for the log");
}

static struct group groups[2];

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    CHECK_RC(weft_init(NULL), 0);
    int nv = weft_num_vcores();
    int ngroups = nv >= 2 ? 2 : 1;

    check_phase("pinned groups");
    weft_t leaders[2];
    for (int i = 0; i < ngroups; i++) {
        group_init(&groups[i], i, WEFT_PINNED, N, ROUNDS);
        leaders[i] = spawn_ex(leader_main, &groups[i], WEFT_PINNED, i, "leader");
    }
    for (int i = 0; i < ngroups; i++)
        join(leaders[i]);
    check_group(&groups[0], "pinned group on vcore 0", false);
    if (ngroups == 2)
        check_group(&groups[1], "pinned group on vcore 1", false);

    if (nv == 1) {
        check_phase("unpinned, one vcore");
        group_init(&groups[0], 0, 0, N, ROUNDS);
        in_uthread(leader_main, &groups[0]);
        check_group(&groups[0], "unpinned group at 1 vcore", false);

        check_phase("unpinned, one vcore, more than a ring");
        group_init(&groups[0], 0, 0, BIG, BIG_ROUNDS);
        in_uthread(leader_main, &groups[0]);
        check_group(&groups[0], "3000 unpinned at 1 vcore", true);
    }
    fprintf(stderr, "yield_fifo: ok (%d vcores, %d groups)\n", nv, ngroups);
    weft_shutdown();
    return 0;
}
