/*
 * stackcopy.c — stack-copying uthreads (WEFT_STACK_COPY): run stacks, the
 * copies of switched-out stacks, and the pools both come from.
 *
 * The idea is usched's (stackswap coroutines): a stack-copy uthread has no
 * stack of its own. It runs on a run stack, a guarded mapping shared by many
 * such uthreads; when it switches out, the part it uses, from its saved
 * stack pointer to the top, is copied to a buffer of that size, and copied
 * back to the same addresses when it runs again. A uthread that finishes
 * without ever switching out copies nothing. Idle, it costs its struct and
 * its copy (a few hundred bytes for a shallow stack), both from pools with
 * no mapping per uthread.
 *
 * Frames hold addresses of their own stack (saved frame pointers, pointers
 * to locals), so a started uthread can only resume on the run stack it
 * started on, at the same address. Run stacks therefore belong to no vcore:
 * a vcore *holds* one while it executes stack-copy uthreads on it, and any
 * vcore may take a run stack nobody holds to resume a uthread bound to it
 * (that is how such a uthread migrates). The protocol, holder a word per
 * run stack:
 *
 *   1. vcore v resumes t bound to R: if v holds R already, copy t in; else v
 *      lets go of what it holds and takes R with a CAS (-1 -> v). If another
 *      vcore w holds R, t goes to w instead (pinned to w for that one run,
 *      WEFT__SC_FORWARDED): w is executing on R, and runs t once R is free.
 *      A wake-up does the same ahead of time (weft__sc_wake): t is pinned
 *      to R's holder, so thieves do not take what they could only forward.
 *   2. A fresh t gets v's current fresh run stack and a new context at its
 *      top. v binds BIND_BATCH uthreads in a row to one run stack, then
 *      moves to another (a new one while there are fewer than RS_PER_VCORE
 *      per vcore, else the next free one): uthreads started together (a
 *      ring, a batch of connections) usually talk to each other, and those
 *      on one run stack run one at a time, so spreading the rest over many
 *      run stacks keeps migrations from finding theirs held elsewhere.
 *   3. t switches out on v: its stack is copied out (weft__sc_leave) before
 *      anything publishes it (the blocking callback, the park word), so a
 *      vcore that resumes it finds the copy complete; v keeps holding R.
 *   4. v lets go of R (a release store) when it runs an ordinary uthread, by
 *      the direct hand-off (after the blocking callback, which may read
 *      arguments on R) or from vcore context, and when it goes idle. So a
 *      vcore holds a run stack only while it runs stack-copy uthreads, which
 *      is bounded by their blocking or by preemption.
 * A vcore holds at most one run stack, so there are never more run stacks
 * than vcores that ran stack-copy uthreads at the same time.
 *
 * Copies and the structs of stack-copy uthreads come from size classes (64
 * bytes apart up to 1 KiB, then coarser up to 64 KiB; larger copies from
 * malloc): per vcore a LIFO cache per class (a copy freed by one uthread's
 * copy-in is the next one's copy-out, still in cache), behind it one locked
 * pool per class carved from mappings. The pools keep their memory for the
 * process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define RS_MAX       1024              /* run stacks at most */
#define RS_PER_VCORE 16                /* run stacks made before they are reused */
#define BIND_BATCH   64                /* fresh uthreads bound in a row to one run stack */
#define RS_GUARD     (64 * 1024)       /* below each run stack */
#define RS_MIN_SIZE  (2u * 1024 * 1024)
#define CACHE_MAX    256               /* per vcore and class */
#define BATCH        32                /* blocks moved between a vcore cache and a pool */
#define CHUNK_MIN    (64 * 1024)       /* a pool's first chunk; each next one is twice */
#define CHUNK_MAX    (32u << 20)       /* the largest */

size_t weft__sc_size = RS_MIN_SIZE;
bool weft__sc_default;
_Atomic int weft__sc_nstacks;          /* run stacks in rs_all */

static struct weft__runstack *rs_all[RS_MAX]; /* written under rs_lock, read anywhere */
static uint32_t rs_lock;               /* spinlock: adding to rs_all */

/* ---- size classes ------------------------------------------------------------ */

static int cls_of(size_t n)
{
    if (n <= 1024)
        return n ? (int)((n - 1) / 64) : 0;             /* 64 .. 1024 */
    if (n <= 4096)
        return 16 + (int)((n - 1025) / 256);            /* 1280 .. 4096 */
    if (n <= 16384)
        return 28 + (int)((n - 4097) / 1024);           /* 5120 .. 16384 */
    if (n <= 65536)
        return 40 + (int)((n - 16385) / 4096);          /* 20480 .. 65536 */
    return -1;
}

static size_t cls_size(int c)
{
    if (c < 16)
        return (size_t)(c + 1) * 64;
    if (c < 28)
        return 1024 + (size_t)(c - 15) * 256;
    if (c < 40)
        return 4096 + (size_t)(c - 27) * 1024;
    return 16384 + (size_t)(c - 39) * 4096;
}

/* One pool per class: a free list and the unused tail of its last chunk. */
static struct pool {
    uint32_t lock;                     /* spinlock: everything below */
    void *free;                        /* linked by first word */
    char *bump, *end;                  /* [bump, end): never handed out */
    char *faulted;                     /* [bump, faulted): committed ahead (populate()) */
    size_t chunk;                      /* size of the next chunk */
} pools[WEFT__SC_CLASSES];

/* populate() commits the next POPULATE bytes of a big pool's chunk in one
 * call instead of a page fault per page (a fault costs a microsecond or
 * more in a VM: page faults dominated the creation of millions of idle
 * uthreads, see the report's idle-memory section). Small pools fault page by page, committing nothing they
 * do not use. */
#define POPULATE (1u << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static void populate(struct pool *p, size_t sz)
{
    if (p->chunk < 4 * POPULATE || p->faulted >= p->bump + sz)
        return;
    char *from = p->faulted > p->bump ? p->faulted : p->bump;
    from = (char *)((uintptr_t)from & ~(uintptr_t)(4096 - 1));
    size_t len = (size_t)(p->end - from) < POPULATE ? (size_t)(p->end - from) : POPULATE;
    madvise(from, len, MADV_POPULATE_WRITE); /* advice: a refusal leaves it to page faults */
    p->faulted = from + len;
}

/* chunk_map() maps a pool's next chunk: twice the last (up to CHUNK_MAX),
 * so that a pool of millions of blocks takes few mappings while a small one
 * stays small. (Huge pages were tried: a fault that clears 2 MiB, with
 * compaction, made creation slower.) */
static char *chunk_map(struct pool *p, size_t sz, size_t *len)
{
    size_t chunk = p->chunk ? p->chunk : CHUNK_MIN;
    while (chunk < sz * 32)
        chunk *= 2;
    p->chunk = chunk < CHUNK_MAX ? chunk * 2 : CHUNK_MAX;
    char *m = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    *len = chunk;
    return m;
}

/* pool_take() moves up to want blocks of class c to *list; returns how many
 * (0: out of memory). */
static unsigned pool_take(int c, void **list, unsigned want)
{
    struct pool *p = &pools[c];
    size_t sz = cls_size(c);
    unsigned n = 0;
    weft__spin_lock(&p->lock);
    while (n < want && p->free) {
        void *b = p->free;
        p->free = *(void **)b;
        *(void **)b = *list;
        *list = b;
        n++;
    }
    while (n < want) {
        if ((size_t)(p->end - p->bump) < sz) { /* both NULL at first */
            size_t chunk;
            char *m = chunk_map(p, sz, &chunk);
            if (!m)
                break;
            p->bump = p->faulted = m;
            p->end = m + chunk;
        }
        populate(p, sz);
        void *b = p->bump;
        p->bump += sz;
        *(void **)b = *list;
        *list = b;
        n++;
    }
    weft__spin_unlock(&p->lock);
    return n;
}

/* pool_give() returns the n blocks of class c linked from list. */
static void pool_give(int c, void *list, void *last)
{
    struct pool *p = &pools[c];
    weft__spin_lock(&p->lock);
    *(void **)last = p->free;
    p->free = list;
    weft__spin_unlock(&p->lock);
}

/* cache_pop() takes the first block of the vcore's list of class c (not
 * empty); cache_push() puts b in front. */
static inline void *cache_pop(struct weft__sc_vcore *s, int c)
{
    void *b = s->cache[c];
    s->cache[c] = *(void **)b;
    s->ncache[c]--;
    return b;
}

static inline void cache_push(struct weft__sc_vcore *s, int c, void *b)
{
    *(void **)b = s->cache[c];
    s->cache[c] = b;
    s->ncache[c]++;
}

/* block_alloc_slow() is block_alloc() when the vcore's list of class c is
 * empty, when there is no vcore, or for sizes beyond the classes (c < 0). */
static WEFT__NOINLINE void *block_alloc_slow(struct weft__vcore *vc, size_t n, int c)
{
    if (c < 0)
        return malloc(n);
    if (!vc) {
        void *b = NULL;
        return pool_take(c, &b, 1) ? b : NULL;
    }
    struct weft__sc_vcore *s = &vc->sc;
    unsigned got = pool_take(c, &s->cache[c], BATCH);
    if (!got)
        return NULL;
    s->ncache[c] = (uint16_t)got;
    return cache_pop(s, c);
}

/* block_alloc() returns n bytes (n <= 64 KiB: a class block) or NULL; vc
 * is the caller's vcore, or NULL. The common case, a block from the
 * vcore's own list, keeps no register across a call. */
static inline void *block_alloc(struct weft__vcore *vc, size_t n)
{
    int c = cls_of(n);
    if (WEFT__UNLIKELY(c < 0 || !vc || !vc->sc.cache[c]))
        return block_alloc_slow(vc, n, c);
    return cache_pop(&vc->sc, c);
}

/* block_free_slow() is block_free() without a vcore, beyond the classes,
 * or when the vcore's list is full (its oldest BATCH go back to the pool). */
static WEFT__NOINLINE void block_free_slow(struct weft__vcore *vc, void *b, int c)
{
    if (c < 0) {
        free(b);
        return;
    }
    if (!vc) {
        pool_give(c, b, b);
        return;
    }
    struct weft__sc_vcore *s = &vc->sc;
    void *first = s->cache[c], *last = first;
    for (int i = 1; i < BATCH; i++)
        last = *(void **)last;
    s->cache[c] = *(void **)last;
    s->ncache[c] -= BATCH;
    pool_give(c, first, last);
    cache_push(s, c, b);
}

/* block_free() gives back a block of n bytes from block_alloc(); vc is the
 * caller's vcore, or NULL. */
static inline void block_free(struct weft__vcore *vc, void *b, size_t n)
{
    int c = cls_of(n);
    if (WEFT__UNLIKELY(c < 0 || !vc || vc->sc.ncache[c] >= CACHE_MAX)) {
        block_free_slow(vc, b, c);
        return;
    }
    cache_push(&vc->sc, c, b);
}

/* ---- uthread structs ---------------------------------------------------------- */

#define UT_SIZE ((sizeof(struct weft_uthread) + WEFT__CACHELINE - 1) & ~(size_t)(WEFT__CACHELINE - 1))
_Static_assert(UT_SIZE <= 1024, "a stack-copy uthread's struct comes from a small class");

struct weft_uthread *weft__sc_uthread_alloc(struct weft__vcore *vc)
{
    /* Not cleared (spawn_on sets what a uthread starts with), but for what
     * only a stack-copy uthread has and what stack.c's shells carry. */
    struct weft_uthread *t = block_alloc(vc, UT_SIZE);
    if (t) {
        t->copy = true;
        t->guarded = false;
        t->copy_buf = NULL;
        t->copy_len = 0;
        t->rs = NULL;
        t->map = NULL;
        t->map_size = 0;
        t->stack_lo = NULL;
        t->stack_size = 0;
        t->asked_size = 0;
        t->cache_next = NULL;
        t->sig_next = NULL;
        t->tls = NULL;
    }
    return t;
}

void weft__sc_uthread_free(struct weft__vcore *vc, struct weft_uthread *t)
{
    if (WEFT__UNLIKELY(t->tls != NULL))
        weft__tls_free(t); /* a per-uthread TLS area (WEFT_TLS=uthread) is the heap's */
    block_free(vc, t, UT_SIZE); /* finished: it holds no copy */
}

/* ---- run stacks ---------------------------------------------------------------- */

static bool rs_take(struct weft__runstack *r, int me)
{
    int free_ = -1;
    return atomic_compare_exchange_strong_explicit(&r->holder, &free_, me, memory_order_acquire,
                                                   memory_order_relaxed);
}

/* rs_new() maps a run stack already held by me, or returns NULL. */
static struct weft__runstack *rs_new(int me)
{
    struct weft__runstack *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    size_t size = weft__sc_size;
    r->map_size = size + RS_GUARD;
    r->map = mmap(NULL, r->map_size, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (r->map == MAP_FAILED) {
        free(r);
        return NULL;
    }
    if (mprotect(r->map, RS_GUARD, PROT_NONE) != 0) {
        munmap(r->map, r->map_size);
        free(r);
        return NULL;
    }
    r->lo = r->map + RS_GUARD;
    r->top = r->map + r->map_size;
    atomic_init(&r->holder, me);
#ifdef WEFT_VALGRIND
    r->vg_id = VALGRIND_STACK_REGISTER(r->lo, r->top);
#endif
    weft__spin_lock(&rs_lock);
    int n = atomic_load_explicit(&weft__sc_nstacks, memory_order_relaxed);
    if (n == RS_MAX) {
        weft__spin_unlock(&rs_lock);
        munmap(r->map, r->map_size);
        free(r);
        return NULL;
    }
    rs_all[n] = r;
    atomic_store_explicit(&weft__sc_nstacks, n + 1, memory_order_release); /* partner: readers */
    weft__spin_unlock(&rs_lock);
    return r;
}

void weft__sc_release(struct weft__vcore *vc)
{
    struct weft__sc_vcore *s = &vc->sc;
    if (!s->held)
        return;
    atomic_store_explicit(&s->held->holder, -1, memory_order_release); /* partner: rs_take */
    s->held = NULL;
}

/* hold() makes vc hold r if it can: true if it does. */
static bool hold(struct weft__vcore *vc, struct weft__runstack *r)
{
    struct weft__sc_vcore *s = &vc->sc;
    if (s->held == r)
        return true;
    weft__sc_release(vc);
    if (!rs_take(r, vc->id))
        return false;
    s->held = r;
    return true;
}

/* rs_for_fresh() is the run stack, held by vc, for a uthread that has not
 * run (protocol step 2). */
static struct weft__runstack *rs_for_fresh(struct weft__vcore *vc)
{
    struct weft__sc_vcore *s = &vc->sc;
    if (s->fresh && s->fresh_left && hold(vc, s->fresh)) {
        s->fresh_left--;
        return s->fresh;
    }
    weft__sc_release(vc);
    struct weft__runstack *r = NULL;
    int n = atomic_load_explicit(&weft__sc_nstacks, memory_order_acquire);
    int cap = RS_PER_VCORE * weft__rt.nvcores;
    if (n >= cap || n >= RS_MAX) { /* reuse: the next free one of the right size */
        for (int i = 0; i < n && !r; i++) {
            struct weft__runstack *c = rs_all[(s->rr++ + (unsigned)vc->id) % (unsigned)n];
            if ((size_t)(c->top - c->lo) >= weft__sc_size && rs_take(c, vc->id))
                r = c;
        }
    }
    if (!r)
        r = rs_new(vc->id);
    if (!r)
        weft__panic("no memory for a run stack of %zu KiB (stack-copy uthreads)",
                    weft__sc_size / 1024);
    s->held = s->fresh = r;
    s->fresh_left = BIND_BATCH - 1;
    return r;
}

/* ---- copying --------------------------------------------------------------------- */

#ifdef WEFT_ASAN
/* ASan's shadow of the run stack describes the frames on it (their
 * redzones): it goes out and comes back with the copy, and the run stack is
 * left unpoisoned behind a uthread that leaves. */
void __asan_get_shadow_mapping(size_t *shadow_scale, size_t *shadow_offset);
void __asan_unpoison_memory_region(const volatile void *addr, size_t size);
static uint8_t *shadow_of(const void *p)
{
    size_t scale, offset;
    __asan_get_shadow_mapping(&scale, &offset);
    return (uint8_t *)(((uintptr_t)p >> scale) + offset);
}
static size_t shadow_len(size_t len) { return len / 8; }
/* shadow_copy(): bytes to or from the shadow itself, which ASan's own memcpy
 * refuses to touch (volatile: no memcpy call of the compiler's making). */
__attribute__((no_sanitize("address"))) static void shadow_copy(void *dst, const void *src,
                                                                size_t n)
{
    volatile uint8_t *d = dst;
    const volatile uint8_t *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}
#else
static size_t shadow_len(size_t len) { (void)len; return 0; }
#endif

void weft__sc_leave(struct weft__vcore *vc, struct weft_uthread *ut)
{
    struct weft__runstack *r = ut->rs;
    if (ut->copy_flags & WEFT__SC_EXITING) { /* its stack is dead: nothing to keep */
#ifdef WEFT_ASAN
        if (r) /* its frames never returned: forget their redzones */
            __asan_unpoison_memory_region(ut->ctx.sp, (size_t)(r->top - (char *)ut->ctx.sp));
#endif
        return;
    }
    char *sp = ut->ctx.sp;
    if (WEFT__UNLIKELY(vc->sc.held != r || sp < r->lo || sp >= r->top))
        weft__panic("uthread %llu (stack-copy) switched out at %p, outside the run stack "
                    "%p..%p that vcore %d holds", (unsigned long long)ut->id, (void *)sp,
                    (void *)r->lo, (void *)r->top, vc->id);
    size_t len = (size_t)(r->top - sp);
    size_t sh = shadow_len(len);
    char *buf = block_alloc(vc, len + sh);
    if (WEFT__UNLIKELY(!buf))
        weft__panic("out of memory for the %zu-byte stack copy of uthread %llu", len + sh,
                    (unsigned long long)ut->id);
#ifdef WEFT_ASAN
    shadow_copy(buf + len, shadow_of(sp), sh);
    __asan_unpoison_memory_region(sp, len);
#endif
    memcpy(buf, sp, len);
    ut->copy_buf = buf;
    ut->copy_len = (uint32_t)len;
    weft__stat_add(&vc->st.sc_copies, 1);
    weft__stat_add(&vc->st.sc_bytes, len);
}

/* forward() hands t, dequeued by vc but bound to a run stack that vcore h
 * holds, to h (or, pinned to vc, back to vc's queue). */
static void forward(struct weft__vcore *vc, struct weft_uthread *t, int h)
{
    bool pinned = (t->link.flags & WEFT_PINNED) && !(t->copy_flags & WEFT__SC_FORWARDED);
    if (!pinned) {
        t->link.flags |= WEFT_PINNED;
        t->link.vcore = h;
        t->copy_flags |= WEFT__SC_FORWARDED;
    }
    weft__stat_add(&vc->st.sc_forwards, 1);
    atomic_store_explicit(&t->state, WEFT__BLOCKED, memory_order_relaxed);
    weft_uthread_runnable(t);
}

void weft__sc_wake(int me, struct weft_uthread *t)
{
    /* Pinned to the run stack's holder if another vcore holds it. Also to
     * the waker's own vcore, when that holds it, while there are fewer than
     * two run stacks per online vcore: the holder then seldom lets go of it,
     * and a thief could only hand the uthread back (forward). With a ring's
     * 16 uthreads on one run stack, the thieves' steals and forwards made
     * two vcores 4x slower than one. With more run stacks, which a vcore
     * holds in turn, a thief usually finds the run stack free, and stealing
     * is what spreads the work (pinning there halved the two-vcore ring at
     * 10^3-10^4 uthreads). */
    int h = atomic_load_explicit(&t->rs->holder, memory_order_relaxed);
    int online = atomic_load_explicit(&weft__rt.nonline, memory_order_relaxed);
    bool pin = h >= 0 && (h != me || (online > 1 &&
                                     atomic_load_explicit(&weft__sc_nstacks, memory_order_relaxed) <
                                         2 * online));
    if (pin && !(t->link.flags & WEFT_PINNED)) {
        t->link.flags |= WEFT_PINNED;
        t->link.vcore = h;
        t->copy_flags |= WEFT__SC_FORWARDED;
    }
}

bool weft__sc_enter(struct weft__vcore *vc, struct weft_uthread *t, void (*start)(void *))
{
    struct weft__runstack *r = t->rs;
    if (!r) { /* first run: any run stack, a fresh context at its top */
        r = rs_for_fresh(vc);
        /* atomic: a joiner may look at rs meanwhile (can_inline in uthread.c) */
        atomic_store_explicit(WEFT__ATOMIC(struct weft__runstack *, &t->rs), r,
                              memory_order_relaxed);
        t->map = r->map;
        t->stack_lo = r->lo;
        t->stack_size = (size_t)(r->top - r->lo);
        t->asked_size = t->stack_size;
        weft__ctx_make(&t->ctx, r->top, start, t);
        return true;
    }
    while (!hold(vc, r)) {
        int h = atomic_load_explicit(&r->holder, memory_order_relaxed);
        if (h >= 0) {
            if (h == vc->id)
                weft__panic("vcore %d holds run stack %p without knowing it", vc->id,
                            (void *)r->lo);
            forward(vc, t, h);
            return false;
        }
    }
    size_t len = t->copy_len, sh = shadow_len(len);
    char *sp = r->top - len;
    if (WEFT__UNLIKELY(sp != (char *)t->ctx.sp || !t->copy_buf))
        weft__panic("uthread %llu (stack-copy): its copy does not match its saved context",
                    (unsigned long long)t->id);
#ifdef WEFT_ASAN
    __asan_unpoison_memory_region(sp, len); /* whatever the last user left, then t's own */
#endif
    memcpy(sp, t->copy_buf, len);
#ifdef WEFT_ASAN
    shadow_copy(shadow_of(sp), t->copy_buf + len, sh);
#endif
    block_free(vc, t->copy_buf, len + sh);
    t->copy_buf = NULL;
    if (t->copy_flags & WEFT__SC_FORWARDED) {
        t->copy_flags &= (uint8_t)~WEFT__SC_FORWARDED;
        t->link.flags &= ~(unsigned)WEFT_PINNED;
    }
    return true;
}

/* ---- checks ----------------------------------------------------------------------- */

bool weft__sc_on_run_stack(const void *p, size_t n)
{
    int k = atomic_load_explicit(&weft__sc_nstacks, memory_order_acquire);
    const char *a = p;
    for (int i = 0; i < k; i++)
        if (a < rs_all[i]->top && a + n > rs_all[i]->map)
            return true;
    return false;
}

void weft__sc_check_slow(const void *p, const char *what)
{
    if (weft__sc_on_run_stack(p, 1))
        weft__panic("%s at %p is on the stack of a stack-copy uthread (WEFT_STACK_COPY): "
                    "such a stack is only valid while its uthread runs, and is somebody "
                    "else's while it waits; put it in the heap or in a static",
                    what, p);
}

/* ---- set-up ------------------------------------------------------------------------ */

void weft__sc_vcore_fini(struct weft__vcore *vc)
{
    weft__sc_release(vc);
    vc->sc.fresh = NULL;
    vc->sc.fresh_left = 0;
    for (int c = 0; c < WEFT__SC_CLASSES; c++) {
        void *first = vc->sc.cache[c];
        if (first) {
            void *last = first;
            while (*(void **)last)
                last = *(void **)last;
            pool_give(c, first, last);
        }
        vc->sc.cache[c] = NULL;
        vc->sc.ncache[c] = 0;
    }
}

void weft__sc_forked(void)
{
    /* The parent's run stacks and pools stay mapped (the caller may be
     * running on a run stack, and other threads were changing the pools),
     * unused: the child starts from nothing. */
    atomic_store_explicit(&weft__sc_nstacks, 0, memory_order_relaxed);
    rs_lock = 0;
    memset(pools, 0, sizeof pools);
}
