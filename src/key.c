/*
 * key.c — thread keys (the parlib thesis's DTLS; POSIX's pthread_key_t):
 * weft_key_create/delete/getspecific/setspecific, destructors at exit.
 *
 * The key table is process-wide: each key has a sequence number, odd while
 * the key exists, bumped by create and by delete (so a value stored under a
 * deleted key is never seen through a key that reuses its slot). A thread's
 * values live in a two-level table of (sequence, value) slots, allocated on
 * first set: a uthread's hangs off its struct weft_uthread (`specific`), a
 * kernel thread's off a __thread pointer. get compares the slot's sequence
 * with the key's: two loads and a compare after finding the thread.
 *
 * Destructors run when a uthread finishes (uthread_finish, before it leaves
 * its stack: they may block) and when a kernel thread that set a value exits
 * (through one C-library key of weft's own), up to WEFT_DESTRUCTOR_ITERATIONS
 * rounds while destructors keep setting values, as POSIX asks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

#define PER_BLOCK 32
#define NBLOCKS (WEFT_KEYS_MAX / PER_BLOCK)

static struct {
    _Atomic uintptr_t seq;           /* odd: the key exists; bumped by create and delete */
    void (*_Atomic dtor)(void *);    /* set by create */
} keys[WEFT_KEYS_MAX];

struct slot {
    uintptr_t seq;                   /* the key's sequence when the value was set */
    void *value;
};

/* A thread's values; owned by the thread. */
struct weft__specific {
    struct slot *block[NBLOCKS];
};

static __thread struct weft__specific *kt_values; /* a kernel thread's values */
static pthread_key_t kt_key;                      /* runs them out at its exit */
static pthread_once_t kt_once = PTHREAD_ONCE_INIT;
static int kt_key_err;

int weft_key_create(weft_key_t *key, void (*destructor)(void *))
{
    if (!key)
        return EINVAL;
    for (unsigned k = 0; k < WEFT_KEYS_MAX; k++) {
        uintptr_t s = atomic_load_explicit(&keys[k].seq, memory_order_relaxed);
        if ((s & 1) == 0 &&
            atomic_compare_exchange_strong_explicit(&keys[k].seq, &s, s + 1, memory_order_acq_rel,
                                                    memory_order_relaxed)) {
            atomic_store_explicit(&keys[k].dtor, destructor, memory_order_release);
            *key = k;
            return 0;
        }
    }
    return EAGAIN;
}

int weft_key_delete(weft_key_t key)
{
    if (key >= WEFT_KEYS_MAX)
        return EINVAL;
    uintptr_t s = atomic_load_explicit(&keys[key].seq, memory_order_relaxed);
    if ((s & 1) == 0 ||
        !atomic_compare_exchange_strong_explicit(&keys[key].seq, &s, s + 1, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return EINVAL;
    return 0;
}

/* values(): where the caller's values hang. */
static struct weft__specific **values(void)
{
    struct weft_uthread *ut = weft_self();
    return ut ? (struct weft__specific **)&ut->specific : &kt_values;
}

void *weft_key_getspecific(weft_key_t key)
{
    if (key >= WEFT_KEYS_MAX)
        return NULL;
    struct weft__specific *v = *values();
    struct slot *b = v ? v->block[key / PER_BLOCK] : NULL;
    if (!b)
        return NULL;
    struct slot *s = &b[key % PER_BLOCK];
    return s->seq == atomic_load_explicit(&keys[key].seq, memory_order_relaxed) ? s->value : NULL;
}

static void kt_exit(void *v);
static void kt_key_make(void)
{
    kt_key_err = weft__sys.pthread_key_create(&kt_key, kt_exit);
}

int weft_key_setspecific(weft_key_t key, const void *value)
{
    if (key >= WEFT_KEYS_MAX)
        return EINVAL;
    uintptr_t seq = atomic_load_explicit(&keys[key].seq, memory_order_acquire);
    if ((seq & 1) == 0)
        return EINVAL;
    struct weft__specific **vp = values();
    if (!*vp) {
        if (value == NULL)
            return 0; /* nothing to store */
        bool kernel_thread = vp == &kt_values;
        if (kernel_thread) {
            weft__sys.pthread_once(&kt_once, kt_key_make);
            if (kt_key_err)
                return kt_key_err;
        }
        struct weft__specific *v = calloc(1, sizeof *v);
        if (!v)
            return ENOMEM;
        if (kernel_thread && weft__sys.pthread_setspecific(kt_key, v) != 0) {
            free(v);
            return ENOMEM;
        }
        *vp = v;
    }
    struct slot **bp = &(*vp)->block[key / PER_BLOCK];
    if (!*bp) {
        if (value == NULL)
            return 0;
        if (!(*bp = calloc(PER_BLOCK, sizeof **bp)))
            return ENOMEM;
    }
    struct slot *s = &(*bp)[key % PER_BLOCK];
    s->seq = seq;
    s->value = (void *)value;
    return 0;
}

/* run_out() runs the destructors of v's live values (rounds, as POSIX), then
 * frees v. Destructors may set values again (through *vp, which stays set
 * until the last round is over). */
static void run_out(struct weft__specific **vp)
{
    struct weft__specific *v = *vp;
    for (int round = 0; round < WEFT_DESTRUCTOR_ITERATIONS; round++) {
        bool ran = false;
        for (int b = 0; b < NBLOCKS; b++) {
            for (int i = 0; v->block[b] && i < PER_BLOCK; i++) {
                struct slot *s = &v->block[b][i];
                unsigned k = (unsigned)(b * PER_BLOCK + i);
                if (!s->value || s->seq != atomic_load_explicit(&keys[k].seq, memory_order_acquire))
                    continue;
                void *val = s->value;
                s->value = NULL;
                void (*dtor)(void *) = atomic_load_explicit(&keys[k].dtor, memory_order_acquire);
                if (dtor) {
                    dtor(val);
                    ran = true;
                }
            }
        }
        if (!ran)
            break;
    }
    *vp = NULL;
    for (int b = 0; b < NBLOCKS; b++)
        free(v->block[b]);
    free(v);
}

void weft__keys_exit(struct weft_uthread *ut)
{
    run_out((struct weft__specific **)&ut->specific);
}

static void kt_exit(void *v)
{
    kt_values = v;
    run_out(&kt_values);
}

