/*
 * oom_timer — a timed wait whose timer heap cannot grow fails with ENOMEM.
 *
 * Proves: when the vcore's alarm heap must grow and realloc fails,
 * weft_sleep_ns, weft_sem_timedwait, weft_mutex_timedlock,
 * weft_cond_timedwait and weft_alarm_start return ENOMEM at once (a timed
 * call never blocks without its timer), the process goes on, and the same
 * calls work again once memory is back. Before the fix weft printed "out of
 * memory for the timer heap" and aborted.
 *
 * realloc fails because the test defines it (forwarding to glibc's
 * __libc_realloc otherwise), at one vcore, before any alarm was ever armed
 * (the heap's first arm allocates it). Sanitizer builds own realloc: there
 * the test says so and checks nothing else.
 */
#include "check.h"

#ifndef WEFT_TEST_SANITIZED
static _Atomic int fail_realloc;

extern void *__libc_realloc(void *p, size_t n);

void *realloc(void *p, size_t n)
{
    if (atomic_load_explicit(&fail_realloc, memory_order_relaxed)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_realloc(p, n);
}

static void noop_cb(weft_alarm_t *a)
{
    (void)a;
}

static weft_mutex_t held;
static weft_sem_t release_holder;

static void *holder(void *arg)
{
    (void)arg;
    CHECK_RC(weft_mutex_lock(&held), 0);
    CHECK_RC(weft_sem_wait(&release_holder), 0); /* untimed: no alarm */
    CHECK_RC(weft_mutex_unlock(&held), 0);
    return NULL;
}

/* timed_calls() runs each timed call once, each timing out after wait_ns;
 * want: what each must return. Without memory the waits are long (10 s), so
 * a slow machine (the cross build under qemu) cannot see a deadline already
 * passed, which returns before arming anything. */
static void timed_calls(uint64_t wait_ns, int want_sleep, int want_timed, int want_alarm)
{
    uint64_t soon = weft_now_ns() + wait_ns;
    weft_sem_t s;
    weft_mutex_t m;
    weft_cond_t c;
    CHECK_RC(weft_sem_init(&s, 0), 0);
    CHECK_RC(weft_mutex_init(&m, WEFT_MUTEX_PLAIN), 0);
    CHECK_RC(weft_cond_init(&c), 0);
    weft_alarm_t a;
    weft_alarm_init(&a, noop_cb);
    CHECK_RC(weft_alarm_set_rel(&a, MS(1000)), 0);

    CHECK_RC(weft_sleep_ns(wait_ns), want_sleep);
    CHECK_RC(weft_sem_timedwait(&s, soon), want_timed);
    CHECK_RC(weft_mutex_timedlock(&held, soon), want_timed);
    CHECK_RC(weft_mutex_lock(&m), 0);
    CHECK_RC(weft_cond_timedwait(&c, &m, soon), want_timed);
    CHECK_RC(weft_mutex_unlock(&m), 0); /* held again after the timed wait, whatever it said */
    CHECK_RC(weft_alarm_start(&a), want_alarm);
    weft_alarm_stop(&a);
    CHECK_RC(weft_sem_destroy(&s), 0);
}

static void *body(void *arg)
{
    (void)arg;
    weft_t h = spawn(holder, NULL);
    while (weft_mutex_trylock(&held) == 0) { /* until the holder has it */
        CHECK_RC(weft_mutex_unlock(&held), 0);
        weft_yield();
    }
    check_phase("timed calls without memory");
    atomic_store(&fail_realloc, 1);
    uint64_t t0 = weft_now_ns();
    timed_calls(MS(10000), ENOMEM, ENOMEM, ENOMEM);
    uint64_t took = weft_now_ns() - t0;
    atomic_store(&fail_realloc, 0);
    CHECK(took < MS(5000), "the failed timed calls took %.1f ms (they waited)", (double)took / 1e6);
    check_phase("timed calls with memory back");
    timed_calls(MS(20), 0, ETIMEDOUT, 0);
    CHECK_RC(weft_sem_post(&release_holder), 0);
    join(h);
    return (void *)1;
}
#endif

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
#ifdef WEFT_TEST_SANITIZED
    fprintf(stderr, "oom_timer: sanitizer build (it owns realloc): nothing checked\n");
    return 0;
#else
    struct weft_config cfg = { .vcores = 1 };
    CHECK_RC(weft_init(&cfg), 0);
    CHECK_RC(weft_mutex_init(&held, WEFT_MUTEX_PLAIN), 0);
    CHECK_RC(weft_sem_init(&release_holder, 0), 0);
    CHECK(in_uthread(body, NULL) == (void *)1, "body");
    fprintf(stderr, "oom_timer: ok\n");
    weft_shutdown();
    return 0;
#endif
}
