/*
 * offload.c — the offload pool: helper kernel threads for calls that cannot
 * be made non-blocking (regular-file open/fsync, getaddrinfo, anything).
 *
 * weft_offload() queues a job that lives on the caller's stack and parks the
 * caller with the job's spinlock held; weft__wait releases it only once the
 * uthread is saved, and the helper takes it before waking the caller, so the
 * wake can never come before the park (the parlib pattern again). Helpers
 * wait on a condition variable; a job that finds no idle helper starts one,
 * up to WEFT_OFFLOAD_THREADS (default 64); a helper idle for 2 s exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "poller.h"

#define IDLE_EXIT_NS 2000000000ull

struct job {
    void *(*fn)(void *);
    void *arg;
    void *result;                /* written by the helper before the wake */
    int err;                     /* errno as fn left it */
    uint32_t lock;               /* held by the caller until it is parked */
    struct weft__waiter w;
    struct job *next;            /* pool queue; guarded by pool.m */
};

static struct {
    pthread_mutex_t m;
    pthread_cond_t cv;           /* helpers wait here for jobs */
    struct job *head, *tail;     /* queued jobs; guarded by m */
    int nthreads, nidle;         /* guarded by m */
    int nqueued;                 /* jobs in the queue; guarded by m */
    int max;                     /* fixed after the first call */
} pool = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0, 0, 0 };

static pthread_once_t max_once = PTHREAD_ONCE_INIT;

static void read_max(void)
{
    pool.max = (int)weft__cfg_num(WEFT__CFG_OFFLOAD_THREADS, 64);
}

void weft__offload_forked(void)
{
    /* The helpers are not in the child, nor the uthreads their jobs wake. */
    weft__sys.pthread_mutex_init(&pool.m, NULL);
    weft__sys.pthread_cond_init(&pool.cv, NULL);
    pool.head = pool.tail = NULL;
    pool.nthreads = pool.nidle = pool.nqueued = 0;
}

static void *helper(void *unused)
{
    (void)unused;
    weft__sys.pthread_mutex_lock(&pool.m);
    for (;;) {
        while (!pool.head) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)(IDLE_EXIT_NS / 1000000000u);
            pool.nidle++;
            int r = weft__sys.pthread_cond_timedwait(&pool.cv, &pool.m, &ts);
            pool.nidle--;
            if (r == ETIMEDOUT && !pool.head) {
                pool.nthreads--;
                weft__sys.pthread_mutex_unlock(&pool.m);
                return NULL;
            }
        }
        struct job *j = pool.head;
        pool.nqueued--;
        pool.head = j->next;
        if (!pool.head)
            pool.tail = NULL;
        weft__sys.pthread_mutex_unlock(&pool.m);

        errno = 0;
        j->result = j->fn(j->arg);
        j->err = errno;
        weft__spin_lock(&j->lock); /* the caller is saved once we hold it */
        j->w.status = 0;
        weft__spin_unlock(&j->lock);
        weft__waiter_wake(&j->w); /* j may vanish now */

        weft__sys.pthread_mutex_lock(&pool.m);
    }
}

/* submit() queues j, starting a helper if none is idle; 0 or EAGAIN. */
static int submit(struct job *j)
{
    weft__sys.pthread_once(&max_once, read_max);
    weft__sys.pthread_mutex_lock(&pool.m);
    /* Idle helpers that have not yet taken a queued job are spoken for. */
    if (pool.nqueued >= pool.nidle && pool.nthreads < pool.max) {
        pthread_t t;
        pthread_attr_t a;
        weft__sys.pthread_attr_init(&a);
        weft__sys.pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        weft__sys.pthread_attr_setstacksize(&a, 256 * 1024);
        if (weft__sys.pthread_create(&t, &a, helper, NULL) == 0)
            pool.nthreads++;
        weft__sys.pthread_attr_destroy(&a);
        if (pool.nthreads == 0) {
            weft__sys.pthread_mutex_unlock(&pool.m);
            return EAGAIN;
        }
    }
    j->next = NULL;
    if (pool.tail)
        pool.tail->next = j;
    else
        pool.head = j;
    pool.tail = j;
    pool.nqueued++;
    weft__sys.pthread_cond_signal(&pool.cv);
    weft__sys.pthread_mutex_unlock(&pool.m);
    return 0;
}

int weft_offload(void *(*fn)(void *), void *arg, void **result)
{
    if (!fn)
        return EINVAL;
    if (!weft_self()) {
        void *r = fn(arg);
        if (result)
            *result = r;
        return 0;
    }
    /* The helper uses the job while we wait: a stack-copy uthread's goes
     * in the heap (its stack is somebody else's meanwhile). */
    struct job local = { 0 }, *j = &local;
    if (weft_self()->copy) {
        weft__sc_check(arg, "the argument of weft_offload()"); /* the helper reads it */
        if (!(j = calloc(1, sizeof *j)))
            return ENOMEM;
    }
    j->fn = fn;
    j->arg = arg;
    weft__waiter_init(&j->w);
    weft__spin_lock(&j->lock);
    int e = submit(j);
    if (e) {
        weft__spin_unlock(&j->lock);
    } else {
        weft__wait(&j->lock, NULL, &j->w, WEFT_FOREVER, WEFT_BLOCK_IO);
        if (result)
            *result = j->result;
        weft__set_errno(j->err);
    }
    if (j != &local)
        free(j);
    return e;
}
