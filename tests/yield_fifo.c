/*
 * yield_fifo — weft_yield puts the caller at the back of its vcore's queue.
 *
 * Proves: N uthreads pinned to one vcore, spawned in order by a uthread on
 * that vcore, run strictly round-robin (0,1,..,N-1,0,1,..) while they yield,
 * and never leave their vcore. When there are two vcores, two such groups
 * run at once (vcore 0 and vcore 1), each keeping its own strict order. At
 * one vcore the same holds for unpinned uthreads.
 */
#include "check.h"

#define N 8
#define ROUNDS 200

struct group {
    int vcore;
    unsigned flags;           /* WEFT_PINNED or 0 */
    atomic_int next;          /* next free slot in log */
    int log[N * ROUNDS];
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
    for (int r = 0; r < ROUNDS; r++) {
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
    struct member ms[N];
    weft_t t[N];
    for (int i = 0; i < N; i++) {
        ms[i] = (struct member){ g, i };
        t[i] = spawn_ex(member_main, &ms[i], g->flags, g->vcore, NULL);
    }
    for (int i = 0; i < N; i++)
        join(t[i]);
    return NULL;
}

static void check_group(struct group *g, const char *what)
{
    CHECK(atomic_load(&g->next) == N * ROUNDS, "%s: %d log entries", what,
          atomic_load(&g->next));
    CHECK(atomic_load(&g->wrong_vcore) == 0, "%s: pinned members ran %d times off vcore %d",
          what, atomic_load(&g->wrong_vcore), g->vcore);
    for (int k = 0; k < N * ROUNDS; k++) {
        if (g->log[k] != k % N) {
            fprintf(stderr, "%s: log around entry %d:", what, k);
            for (int j = k < 16 ? 0 : k - 16; j < k + 16 && j < N * ROUNDS; j++)
                fprintf(stderr, " %d", g->log[j]);
            fputc('\n', stderr);
            CHECK(0, "%s: entry %d is %d, strict round-robin wants %d", what, k,
                  g->log[k], k % N);
        }
    }
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
        groups[i].vcore = i;
        groups[i].flags = WEFT_PINNED;
        leaders[i] = spawn_ex(leader_main, &groups[i], WEFT_PINNED, i, "leader");
    }
    for (int i = 0; i < ngroups; i++)
        join(leaders[i]);
    check_group(&groups[0], "pinned group on vcore 0");
    if (ngroups == 2)
        check_group(&groups[1], "pinned group on vcore 1");

    if (nv == 1) {
        check_phase("unpinned, one vcore");
        memset(&groups[0], 0, sizeof groups[0]);
        in_uthread(leader_main, &groups[0]);
        check_group(&groups[0], "unpinned group at 1 vcore");
    }
    fprintf(stderr, "yield_fifo: ok (%d vcores, %d groups)\n", nv, ngroups);
    weft_shutdown();
    return 0;
}
