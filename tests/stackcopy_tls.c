/*
 * stackcopy_tls.c — stack-copy uthreads with per-uthread TLS
 * (WEFT_TLS_UTHREAD): a stack-copy uthread has no stack of its own to carve
 * its TLS area from, so it gets one from the heap; its __thread values and
 * errno survive every switch out, on any vcore, and an inline-joined child
 * (run on its joiner's stack) has its own TLS, the joiner's back after it.
 * Sanitizer builds refuse the TLS mode (checked, as tests/tls does).
 */
#include "check.h"

#include <weft/sync.h>

static __thread long mine = -1;
static __thread char buf[5000]; /* more than a page */

#define NT SCALE(400, 100)

static void *worker(void *arg)
{
    long i = (long)(uintptr_t)arg;
    CHECK(mine == -1, "a new uthread's __thread value is %ld, not its initial -1", mine);
    mine = i;
    memset(buf, (int)(i & 0xff), sizeof buf);
    for (int r = 0; r < 20; r++) {
        errno = (int)(i % 100) + 1;
        switch (r % 3) {
        case 0: weft_yield(); break;
        case 1: CHECK_RC(weft_sleep_ns(10000), 0); break;
        default: CHECK_RC(weft_unpark(weft_self()), 0); CHECK_RC(weft_park(), 0); weft_yield(); break;
        }
        CHECK(errno == (int)(i % 100) + 1, "uthread %ld: errno %d", i, errno);
        CHECK(mine == i, "uthread %ld sees __thread value %ld", i, mine);
        CHECK(buf[0] == (char)(i & 0xff) && buf[sizeof buf - 1] == (char)(i & 0xff),
              "uthread %ld: its __thread array changed", i);
    }
    return (void *)(uintptr_t)(i + 1);
}

static void *child(void *arg)
{
    CHECK(mine == -1, "an inline child sees its joiner's __thread value %ld", mine);
    mine = 1000 + (long)(uintptr_t)arg;
    CHECK_RC(weft_sleep_ns(5000), 0); /* switches out, maybe moves */
    CHECK(mine == 1000 + (long)(uintptr_t)arg, "the child's __thread value after a sleep");
    return (void *)(uintptr_t)mine;
}

static void *joiner(void *arg)
{
    mine = 7;
    weft_attr_t a = { .flags = WEFT_STACK_COPY };
    for (int k = 0; k < 50; k++) {
        weft_t t;
        CHECK_RC(weft_spawn(&t, &a, child, (void *)(uintptr_t)k), 0);
        void *r;
        CHECK_RC(weft_join(t, &r), 0);
        CHECK(r == (void *)(uintptr_t)(1000 + k), "child %d returned %p", k, r);
        CHECK(mine == 7, "the joiner's __thread value became %ld", mine);
    }
    return arg;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    struct weft_config cfg = { .tls = WEFT_TLS_UTHREAD };
    int r = weft_init(&cfg);
#ifdef WEFT_TEST_SANITIZED
    CHECK_RC(r, ENOTSUP); /* documented: sanitizer runtimes keep per-thread state in TLS */
    printf("stackcopy_tls: refused in a sanitizer build, as documented\n");
    return 0;
#endif
    CHECK_RC(r, 0);
    weft_t *t = calloc(NT, sizeof *t);
    CHECK(t != NULL, "calloc");
    weft_attr_t a = { .flags = WEFT_STACK_COPY };
    for (long i = 0; i < NT; i++)
        CHECK_RC(weft_spawn(&t[i], &a, worker, (void *)(uintptr_t)i), 0);
    for (long i = 0; i < NT; i++)
        CHECK(join(t[i]) == (void *)(uintptr_t)(i + 1), "worker %ld", i);
    weft_attr_t own = { .flags = WEFT_STACK_OWN };
    weft_t j;
    CHECK_RC(weft_spawn(&j, &own, joiner, (void *)1), 0);
    CHECK(join(j) == (void *)1, "ordinary joiner");
    CHECK_RC(weft_spawn(&j, &a, joiner, (void *)2), 0);
    CHECK(join(j) == (void *)2, "stack-copy joiner");
    printf("stackcopy_tls: ok (%d vcores, %d stack-copy uthreads with TLS of their own)\n",
           weft_num_vcores(), NT);
    free(t);
    weft_shutdown();
    return 0;
}
