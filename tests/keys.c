/*
 * keys — thread keys (weft_key_*):
 *  1. errors: EINVAL for a NULL key pointer, a key that does not exist (never
 *     made, deleted, out of range); get of those is NULL; EAGAIN once all
 *     WEFT_KEYS_MAX keys exist, and a delete frees one again;
 *  2. a deleted key's values are never seen through a new key that reuses
 *     its number; no destructor runs for a deleted key;
 *  3. 1 000 uthreads each set their own values under two keys, yield and
 *     sleep (so they move between vcores at WEFT_VCORES > 1) and find their
 *     own values at every step;
 *  4. destructors: run once per thread with its non-NULL value, not for NULL
 *     values, also after weft_exit; a destructor that sets the value again
 *     is called again, at most WEFT_DESTRUCTOR_ITERATIONS times; a
 *     destructor may block (sleep) and set other keys;
 *  5. kernel threads (main, a pthread) have their own values; a pthread's
 *     destructors run when it exits.
 */
#include "check.h"

static atomic_int dtor_calls;
static void count_dtor(void *v)
{
    CHECK(v != NULL, "destructor called with NULL");
    atomic_fetch_add(&dtor_calls, 1);
}

static void *case_errors(void *arg)
{
    (void)arg;
    check_phase("errors");
    CHECK_RC(weft_key_create(NULL, NULL), EINVAL);
    CHECK_RC(weft_key_setspecific(WEFT_KEYS_MAX, (void *)1), EINVAL);
    CHECK(weft_key_getspecific(WEFT_KEYS_MAX) == NULL, "out of range");
    weft_key_t k;
    CHECK_RC(weft_key_create(&k, NULL), 0);
    CHECK(weft_key_getspecific(k) == NULL, "a new key is NULL");
    CHECK_RC(weft_key_setspecific(k, (void *)7), 0);
    CHECK(weft_key_getspecific(k) == (void *)7, "get after set");
    CHECK_RC(weft_key_delete(k), 0);
    CHECK_RC(weft_key_delete(k), EINVAL);
    CHECK_RC(weft_key_setspecific(k, (void *)1), EINVAL);
    CHECK(weft_key_getspecific(k) == NULL, "a deleted key's value");
    return (void *)1;
}

static void *case_reuse(void *arg)
{
    (void)arg;
    check_phase("reuse of a deleted key's number");
    weft_key_t all[WEFT_KEYS_MAX];
    int n = 0;
    while (n < WEFT_KEYS_MAX && weft_key_create(&all[n], count_dtor) == 0)
        n++;
    CHECK(n > WEFT_KEYS_MAX - 16, "only %d keys could be made", n);
    weft_key_t extra;
    CHECK_RC(weft_key_create(&extra, NULL), EAGAIN);
    CHECK_RC(weft_key_setspecific(all[5], (void *)55), 0);
    CHECK_RC(weft_key_delete(all[5]), 0);
    weft_key_t again;
    CHECK_RC(weft_key_create(&again, NULL), 0);
    CHECK(again == all[5], "the freed number %u was not reused (%u)", all[5], again);
    CHECK(weft_key_getspecific(again) == NULL, "the deleted key's value shows through");
    CHECK_RC(weft_key_delete(again), 0);
    for (int i = 0; i < n; i++)
        if (i != 5)
            CHECK_RC(weft_key_delete(all[i]), 0);
    return (void *)1;
}

#define NT SCALE(1000, 200)
static weft_key_t ka, kb;
static atomic_int mine_ok;

static void *own_values(void *arg)
{
    uintptr_t me = (uintptr_t)arg;
    CHECK_RC(weft_key_setspecific(ka, (void *)(me * 2 + 1)), 0);
    CHECK_RC(weft_key_setspecific(kb, (void *)(me * 3 + 1)), 0);
    for (int i = 0; i < 10; i++) {
        if (i % 3 == 2)
            weft_sleep_ns(100000);
        else
            weft_yield();
        CHECK(weft_key_getspecific(ka) == (void *)(me * 2 + 1), "thread %lu lost value a", (unsigned long)me);
        CHECK(weft_key_getspecific(kb) == (void *)(me * 3 + 1), "thread %lu lost value b", (unsigned long)me);
    }
    atomic_fetch_add(&mine_ok, 1);
    if (me % 2)
        weft_exit(NULL); /* destructors run on this path too */
    return NULL;
}

static void case_many(void)
{
    check_phase("1000 uthreads, own values");
    atomic_store(&dtor_calls, 0);
    CHECK_RC(weft_key_create(&ka, count_dtor), 0);
    CHECK_RC(weft_key_create(&kb, count_dtor), 0);
    static weft_t t[NT];
    for (uintptr_t i = 0; i < NT; i++)
        t[i] = spawn(own_values, (void *)i);
    for (int i = 0; i < NT; i++)
        join(t[i]);
    CHECK(atomic_load(&mine_ok) == NT, "ok %d of %d", atomic_load(&mine_ok), NT);
    CHECK(atomic_load(&dtor_calls) == 2 * NT, "destructors ran %d times, want %d",
          atomic_load(&dtor_calls), 2 * NT);
    CHECK_RC(weft_key_delete(ka), 0);
    CHECK_RC(weft_key_delete(kb), 0);
}

/* Destructor rounds: kr's destructor sets the value again every time. */
static weft_key_t kr, kother, knull;
static atomic_int rounds, other_calls;
static void again_dtor(void *v)
{
    atomic_fetch_add(&rounds, 1);
    weft_sleep_ns(1000); /* may block */
    CHECK_RC(weft_key_setspecific(kr, v), 0);
    if (atomic_load(&rounds) == 2)
        CHECK_RC(weft_key_setspecific(kother, (void *)9), 0);
}
static void other_dtor(void *v)
{
    CHECK(v == (void *)9, "other value %p", v);
    atomic_fetch_add(&other_calls, 1);
}
static void null_dtor(void *v)
{
    (void)v;
    CHECK(0, "a destructor ran for a NULL value");
}

static void *set_rounds(void *arg)
{
    (void)arg;
    CHECK_RC(weft_key_setspecific(kr, (void *)1), 0);
    CHECK_RC(weft_key_setspecific(knull, (void *)1), 0);
    CHECK_RC(weft_key_setspecific(knull, NULL), 0);
    return NULL;
}

static void case_rounds(void)
{
    check_phase("destructor rounds");
    CHECK_RC(weft_key_create(&kr, again_dtor), 0);
    CHECK_RC(weft_key_create(&kother, other_dtor), 0);
    CHECK_RC(weft_key_create(&knull, null_dtor), 0);
    join(spawn(set_rounds, NULL));
    CHECK(atomic_load(&rounds) == WEFT_DESTRUCTOR_ITERATIONS, "the destructor ran %d times, want %d",
          atomic_load(&rounds), WEFT_DESTRUCTOR_ITERATIONS);
    CHECK(atomic_load(&other_calls) == 1, "a value set by a destructor: %d calls", atomic_load(&other_calls));
}

/* Kernel threads. */
static weft_key_t kk;
static atomic_int kt_dtor;
static void kt_dtor_fn(void *v)
{
    CHECK(v == (void *)42, "pthread's value %p", v);
    atomic_fetch_add(&kt_dtor, 1);
}
static void *kt_main(void *arg)
{
    (void)arg;
    CHECK(weft_key_getspecific(kk) == NULL, "a new pthread sees main's value");
    CHECK_RC(weft_key_setspecific(kk, (void *)42), 0);
    CHECK(weft_key_getspecific(kk) == (void *)42, "pthread get");
    return NULL;
}
static void *peek_kk(void *arg)
{
    (void)arg;
    CHECK(weft_key_getspecific(kk) == NULL, "a uthread sees main's value");
    return NULL;
}

static void case_kernel_threads(void)
{
    check_phase("kernel threads");
    CHECK_RC(weft_key_create(&kk, kt_dtor_fn), 0);
    CHECK_RC(weft_key_setspecific(kk, (void *)41), 0);
    join_pthread(start_pthread(kt_main, NULL));
    CHECK(atomic_load(&kt_dtor) == 1, "the pthread's destructor ran %d times", atomic_load(&kt_dtor));
    CHECK(weft_key_getspecific(kk) == (void *)41, "main's value");
    join(spawn(peek_kk, NULL));
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    CHECK(in_uthread(case_errors, NULL) == (void *)1, "errors");
    CHECK(case_errors(NULL) == (void *)1, "errors from main");
    CHECK(in_uthread(case_reuse, NULL) == (void *)1, "reuse");
    case_many();
    case_rounds();
    case_kernel_threads();
    weft_shutdown();
    printf("keys: ok\n");
    return 0;
}
