/*
 * yieldwork.h — what the yield-pass benchmark's two programs share
 * (bench/weft/yieldwork.c, bench/peers/kernel/yieldwork.c): the seed's two
 * workloads, a small real program (sort), their checks, the command line and
 * the RESULT line.
 *
 * The workloads (count and chase after the EPFL report that seeded issue 6),
 * each split evenly between T threads (total work fixed, whatever T):
 *
 *   count  every thread increments its own counter (a 64-byte struct of its
 *          own, written through a volatile pointer: one load, add and store
 *          per iteration at any -O) `work / T` times; checked: the final
 *          value.
 *   chase  every thread walks one shared, read-only doubly linked list of
 *          YW_NODES nodes linked in a random order (32-byte nodes: 128 KiB,
 *          in L2), from its own start node (node order[i * nodes / T]),
 *          `work / T` steps, following `next` for a lap (nodes steps) and
 *          `prev` for the next lap, and so on; checked: the node reached,
 *          against the one its position in the order says it must be.
 *   sort   every thread fills an array of its own with YW_SORT_N random
 *          32-bit keys (its own xorshift state, seeded per thread) and sorts
 *          it with the quicksort below (median-of-three pivot, insertion
 *          sort at YW_SORT_SMALL keys or fewer, recursion on the smaller part
 *          and a loop on the larger: a recursive function, so the pass
 *          instruments its entry as well as its loops), again and again
 *          until it has sorted `work / T` elements (its last array may be
 *          shorter). An iteration is one element sorted; the time includes
 *          filling the arrays and checking them. Checked after every sort:
 *          the array is non-decreasing and its keys' sum and xor are those
 *          of the keys filled in (else the run fails at once); at the end,
 *          every thread sorted exactly its share.
 *
 * The inner loops call nothing (sort calls only itself). With
 * `--yield-every K` (the weft program only) count and chase are cut into
 * chunks of K iterations with a weft_yield() between two chunks (otherwise
 * one chunk), and sort yields between two arrays once K or more elements
 * were sorted since its last yield. Both programs take
 *
 *   <program> count|chase|sort [--threads T] [--work N] [...]
 *
 * create every thread first, open a start gate, and time until the last
 * thread has finished (each thread stamps its own finish); then
 *
 *   RESULT bench=yieldpass impl=<impl> param=<prog>,threads=<T>,<opt>
 *          value=<ns> unit=ns/iter total_s=<s> first_s=<s> work=<N>[ <extra>]
 *
 * value = the total time ÷ the iterations done (N, work rounded down to a
 * multiple of T), so that runs given different amounts of work compare;
 * total_s the time from opening the gate to the last finish, first_s to
 * the first; <opt> the -O level the program was compiled at (YW_OPT).
 */
#ifndef WEFT_BENCH_YIELDWORK_H
#define WEFT_BENCH_YIELDWORK_H

#include "bench.h"
#include "opts.h"

#ifndef YW_OPT
#define YW_OPT "O2"          /* set by bench/CMakeLists.txt: "O0" or "O2" */
#endif

#define YW_NODES 4096u
#define YW_MAX_THREADS 100000u
#define YW_SORT_N 4096u      /* keys of one array (16 KiB) */
#define YW_SORT_SMALL 16u    /* insertion sort at or below this many */

enum yw_prog { YW_COUNT, YW_CHASE, YW_SORT };

/* ---- count ----------------------------------------------------------------- */

struct yw_counter {
    volatile uint64_t v;
    char pad[64 - sizeof(uint64_t)];
} __attribute__((aligned(64)));

/* yw_count() adds n to *c, one increment at a time; it calls nothing. */
static inline void yw_count(struct yw_counter *c, uint64_t n)
{
    volatile uint64_t *p = &c->v;
    for (uint64_t i = 0; i < n; i++)
        *p += 1;
}

/* ---- chase ----------------------------------------------------------------- */

struct yw_node {
    struct yw_node *link[2];  /* [0] next, [1] prev */
    uint32_t id;
    char pad[32 - 2 * sizeof(void *) - sizeof(uint32_t)];
};

struct yw_list {
    struct yw_node *nodes;    /* YW_NODES, 64-byte aligned */
    uint32_t *order;          /* order[k]: the node at position k of the ring */
    uint32_t *pos;            /* pos[id]: the position of node id */
};

/* Where one walker is: its node, the steps taken in the current lap, the
 * direction of the lap (0 next, 1 prev). */
struct yw_walk {
    struct yw_node *p;
    uint32_t k, d;
};

/* Not a constant to the compiler. */
static volatile uint64_t yw_seed = 0x2545f4914f6cdd1du;

static inline uint64_t yw_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* yw_list_make() links YW_NODES nodes in a random order (Fisher-Yates). */
static void yw_list_make(struct yw_list *l)
{
    size_t n = YW_NODES;
    l->nodes = aligned_alloc(64, n * sizeof *l->nodes);
    l->order = malloc(n * sizeof *l->order);
    l->pos = malloc(n * sizeof *l->pos);
    if (!l->nodes || !l->order || !l->pos)
        bench_fail("chase: no memory for the list");
    uint64_t x = yw_seed;
    for (size_t k = 0; k < n; k++)
        l->order[k] = (uint32_t)k;
    for (size_t k = n - 1; k > 0; k--) {
        size_t j = (size_t)(yw_rand(&x) % (k + 1));
        uint32_t t = l->order[k];
        l->order[k] = l->order[j];
        l->order[j] = t;
    }
    for (size_t k = 0; k < n; k++) {
        struct yw_node *v = &l->nodes[l->order[k]];
        v->id = l->order[k];
        v->link[0] = &l->nodes[l->order[(k + 1) % n]];
        v->link[1] = &l->nodes[l->order[(k + n - 1) % n]];
        l->pos[l->order[k]] = (uint32_t)k;
    }
}

static void yw_list_free(struct yw_list *l)
{
    free(l->nodes);
    free(l->order);
    free(l->pos);
}

/* yw_start() is thread i's (of t) start node. */
static inline struct yw_walk yw_start(const struct yw_list *l, size_t i, size_t t)
{
    struct yw_walk w = { &l->nodes[l->order[(uint64_t)i * YW_NODES / t]], 0, 0 };
    return w;
}

/* yw_chase() takes n steps; it calls nothing. */
static inline void yw_chase(struct yw_walk *w, uint64_t n)
{
    struct yw_node *p = w->p;
    uint32_t k = w->k, d = w->d;
    for (uint64_t i = 0; i < n; i++) {
        p = p->link[d];
        if (++k == YW_NODES) {
            k = 0;
            d ^= 1;
        }
    }
    w->p = p;
    w->k = k;
    w->d = d;
}

/* yw_chase_expected() is the node n steps from start, computed from the
 * positions: whole laps come back to the start, and the last, partial lap
 * goes forward (an even number of whole laps before it) or back. */
static inline uint32_t yw_chase_expected(const struct yw_list *l, uint32_t start, uint64_t n)
{
    uint64_t laps = n / YW_NODES, r = n % YW_NODES, p = l->pos[start];
    p = laps % 2 == 0 ? (p + r) % YW_NODES : (p + YW_NODES - r) % YW_NODES;
    return l->order[p];
}

/* ---- sort ------------------------------------------------------------------ */

/* yw_insertion() sorts a[0..n-1] by insertion. */
static inline void yw_insertion(uint32_t *a, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint32_t v = a[i];
        size_t j = i;
        for (; j > 0 && a[j - 1] > v; j--)
            a[j] = a[j - 1];
        a[j] = v;
    }
}

/* yw_quicksort() sorts a[0..n-1]: Hoare's partition around the median of
 * the first, middle and last keys, recursion on the smaller part and a loop
 * on the larger (at most log2 n frames deep), insertion sort at or below
 * YW_SORT_SMALL keys. */
static void yw_quicksort(uint32_t *a, size_t n)
{
    while (n > YW_SORT_SMALL) {
        size_t mid = n / 2;
        uint32_t t;
        if (a[mid] < a[0]) {
            t = a[mid]; a[mid] = a[0]; a[0] = t;
        }
        if (a[n - 1] < a[mid]) {
            t = a[n - 1]; a[n - 1] = a[mid]; a[mid] = t;
            if (a[mid] < a[0]) {
                t = a[mid]; a[mid] = a[0]; a[0] = t;
            }
        }
        uint32_t pivot = a[mid];
        size_t i = 0, j = n - 1;         /* a[0] <= pivot <= a[n - 1]: sentinels */
        for (;;) {
            while (a[++i] < pivot)
                ;
            while (a[--j] > pivot)
                ;
            if (i >= j)
                break;
            t = a[i]; a[i] = a[j]; a[j] = t;
        }
        size_t left = j + 1;             /* a[0..j] <= pivot <= a[j+1..n-1] */
        if (left < n - left) {
            yw_quicksort(a, left);
            a += left;
            n -= left;
        } else {
            yw_quicksort(a + left, n - left);
            n = left;
        }
    }
    yw_insertion(a, n);
}

/* yw_sort_one() fills a[0..n-1] from *x, sorts it and checks it (or fails
 * the run: thread i's array number k). */
static inline void yw_sort_one(uint32_t *a, size_t n, uint64_t *x, size_t i, uint64_t k)
{
    uint64_t sum = 0;
    uint32_t bits = 0;
    for (size_t e = 0; e < n; e++) {
        a[e] = (uint32_t)(yw_rand(x) >> 32);
        sum += a[e];
        bits ^= a[e];
    }
    yw_quicksort(a, n);
    uint64_t sum2 = a[0];
    uint32_t bits2 = a[0], bad = 0;
    for (size_t e = 1; e < n; e++) {
        bad += a[e - 1] > a[e];
        sum2 += a[e];
        bits2 ^= a[e];
    }
    if (bad || sum2 != sum || bits2 != bits)
        bench_fail("sort: thread %zu, array %llu of %zu keys: %s", i, (unsigned long long)k, n,
                   bad ? "not in order after sorting" : "the keys changed while sorting");
}

/* ---- the run ------------------------------------------------------------------- */

/* Per thread, one cache line or more of its own. */
struct yw_thread {
    struct yw_counter counter;
    struct yw_walk walk;
    uint32_t start_id;
    uint32_t *keys;           /* sort: the thread's array */
    uint64_t rng;             /* sort: its xorshift state */
    uint64_t sorted;          /* sort: elements sorted */
    uint64_t finish;          /* absolute ns; 0 = not finished */
} __attribute__((aligned(64)));

struct yw_run {
    enum yw_prog prog;
    const char *prog_name;
    uint64_t threads, work, per_thread, yield_every;
    struct yw_list list;
    uint32_t *keys;           /* sort: every thread's array, one block */
    struct yw_thread *th;
    void (*yield)(void);      /* between two chunks, or NULL */
    uint64_t t0;              /* the gate opened */
};

/* yw_parse() reads "count|chase|sort" and the options common to both
 * programs (opts holds --threads and --work first; the program's own after
 * them), or exits 2. */
static void yw_parse(struct yw_run *r, int argc, char **argv, struct bench_opt *opts,
                     size_t nopts, const char *usage)
{
    static const char *const names[] = { [YW_COUNT] = "count", [YW_CHASE] = "chase",
                                         [YW_SORT] = "sort" };
    size_t p = 0;
    while (argc >= 2 && p < sizeof names / sizeof names[0] && strcmp(argv[1], names[p]) != 0)
        p++;
    if (argc < 2 || p == sizeof names / sizeof names[0]) {
        fprintf(stderr, "%s: the first argument must be count, chase or sort\nusage: %s %s\n",
                argv[0], argv[0], usage);
        exit(2);
    }
    r->prog = (enum yw_prog)p;
    r->prog_name = argv[1];
    argv[1] = argv[0];
    bench_opts_parse(argc - 1, argv + 1, usage, opts, nopts);
    if (r->work < r->threads)
        bench_fail("yieldwork: --work %llu is less than one iteration per thread",
                   (unsigned long long)r->work);
    r->per_thread = r->work / r->threads;
}

/* yw_setup() allocates the threads' state (and the list for chase, the
 * arrays for sort: touched here, so that no page fault is timed). */
static void yw_setup(struct yw_run *r)
{
    r->th = aligned_alloc(64, r->threads * sizeof *r->th);
    if (!r->th)
        bench_fail("yieldwork: no memory for %llu threads", (unsigned long long)r->threads);
    memset(r->th, 0, r->threads * sizeof *r->th);
    if (r->prog == YW_CHASE) {
        yw_list_make(&r->list);
        for (uint64_t i = 0; i < r->threads; i++) {
            r->th[i].walk = yw_start(&r->list, i, r->threads);
            r->th[i].start_id = r->th[i].walk.p->id;
        }
    }
    if (r->prog == YW_SORT) {
        size_t n = r->per_thread < YW_SORT_N ? (size_t)r->per_thread : YW_SORT_N;
        size_t stride = (n + 15) / 16 * 16;          /* 64-byte aligned arrays */
        r->keys = aligned_alloc(64, r->threads * stride * sizeof *r->keys);
        if (!r->keys)
            bench_fail("sort: no memory for %llu arrays of %zu keys",
                       (unsigned long long)r->threads, n);
        memset(r->keys, 0, r->threads * stride * sizeof *r->keys);
        for (uint64_t i = 0; i < r->threads; i++) {
            r->th[i].keys = r->keys + i * stride;
            r->th[i].rng = (yw_seed ^ (i + 1) * 0x9e3779b97f4a7c15u) | 1;
        }
    }
}

/* yw_free() frees what yw_setup() allocated. */
static void yw_free(struct yw_run *r)
{
    if (r->prog == YW_CHASE)
        yw_list_free(&r->list);
    free(r->keys);
    free(r->th);
}

/* yw_sort_work() is thread i's sorting: arrays of YW_SORT_N keys (the last
 * one shorter if its share ends there), a yield between two arrays once
 * yield_every or more elements were sorted since the last one. */
static inline void yw_sort_work(struct yw_run *r, size_t i)
{
    struct yw_thread *t = &r->th[i];
    uint64_t since = 0;
    for (uint64_t left = r->per_thread, k = 0; left; k++) {
        size_t n = left < YW_SORT_N ? (size_t)left : YW_SORT_N;
        yw_sort_one(t->keys, n, &t->rng, i, k);
        t->sorted += n;
        left -= n;
        since += n;
        if (left && r->yield && since >= r->yield_every) {
            r->yield();
            since = 0;
        }
    }
}

/* yw_work() is thread i's whole work, then its finish stamp. */
static inline void yw_work(struct yw_run *r, size_t i)
{
    struct yw_thread *t = &r->th[i];
    if (r->prog == YW_SORT) {
        yw_sort_work(r, i);
        t->finish = bench_now_ns();
        return;
    }
    uint64_t every = r->yield_every ? r->yield_every : r->per_thread;
    for (uint64_t left = r->per_thread; left;) {
        uint64_t k = left < every ? left : every;
        if (r->prog == YW_COUNT)
            yw_count(&t->counter, k);
        else
            yw_chase(&t->walk, k);
        left -= k;
        if (left && r->yield)
            r->yield();
    }
    t->finish = bench_now_ns();
}

/* yw_check() checks every thread's result and finish stamp (or fails the
 * run) and returns the first and last finish, ns from the gate. */
static void yw_check(const struct yw_run *r, const char *impl, uint64_t *first, uint64_t *last)
{
    uint64_t bad = 0, lo = UINT64_MAX, hi = 0;
    for (uint64_t i = 0; i < r->threads; i++) {
        const struct yw_thread *t = &r->th[i];
        if (r->prog == YW_COUNT)
            bad += t->counter.v != r->per_thread;
        else if (r->prog == YW_CHASE)
            bad += t->walk.p->id != yw_chase_expected(&r->list, t->start_id, r->per_thread);
        else
            bad += t->sorted != r->per_thread;
        if (t->finish < r->t0)
            bench_fail("%s %s: thread %llu has no finish time", impl, r->prog_name,
                       (unsigned long long)i);
        lo = t->finish < lo ? t->finish : lo;
        hi = t->finish > hi ? t->finish : hi;
    }
    if (bad)
        bench_fail("%s %s: %llu of %llu threads ended with a wrong %s", impl, r->prog_name,
                   (unsigned long long)bad, (unsigned long long)r->threads,
                   r->prog == YW_COUNT ? "count" : r->prog == YW_CHASE ? "node"
                   : "number of elements sorted");
    *first = lo - r->t0;
    *last = hi - r->t0;
}

/* yw_report() checks the run (yw_check) and prints the RESULT line (extra
 * appended as is) and a NOTE. */
static void yw_report(const struct yw_run *r, const char *impl, const char *extra)
{
    uint64_t first, last;
    yw_check(r, impl, &first, &last);
    uint64_t iters = r->per_thread * r->threads;
    printf("RESULT bench=yieldpass impl=%s param=%s,threads=%llu,%s value=%.4f unit=ns/iter "
           "total_s=%.4f first_s=%.4f work=%llu%s\n", impl, r->prog_name,
           (unsigned long long)r->threads, YW_OPT, (double)last / (double)iters,
           (double)last / 1e9, (double)first / 1e9, (unsigned long long)iters, extra);
    fflush(stdout);
}

#endif /* WEFT_BENCH_YIELDWORK_H */
