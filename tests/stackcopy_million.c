/*
 * stackcopy_million.c — 10^6 stack-copy uthreads parked at once (10^5 in
 * sanitizer builds), then all woken, each checking the frame it parked in,
 * and joined: every one resumes exactly once with its own stack. Stress tier.
 */
#include "check.h"

#include <weft/event.h>
#include <weft/sync.h>

static size_t n;
static weft_t *h;
static uint8_t *ran;
static atomic_size_t arrived;
static atomic_int released;
static weft_wg_t all_in = WEFT_WG_INIT;

static void *idler(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    volatile size_t mine[8]; /* parked with it, checked when it resumes */
    for (int k = 0; k < 8; k++)
        mine[k] = i * 8 + (size_t)k;
    if (atomic_fetch_add(&arrived, 1) + 1 == n)
        CHECK_RC(weft_wg_done(&all_in), 0);
    while (!atomic_load_explicit(&released, memory_order_acquire))
        CHECK_RC(weft_park(), 0);
    for (int k = 0; k < 8; k++)
        CHECK(mine[k] == i * 8 + (size_t)k, "uthread %zu: its frame changed while parked", i);
    ran[i]++;
    return (void *)(i + 1);
}

static void *spawner(void *unused)
{
    (void)unused;
    weft_attr_t a = { .flags = WEFT_STACK_COPY };
    for (size_t i = 0; i < n; i++)
        CHECK_RC(weft_spawn(&h[i], &a, idler, (void *)(uintptr_t)i), 0);
    return NULL;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    /* Under TSan every uthread is a TSan fiber: with 10^5 of them alive on
     * two vcores TSan's own runtime hung about one run in three, inside its
     * slot reset (one thread in TraceSwitchPartImpl, the other waiting in
     * SlotAttachAndLock, neither in weft's code); 2*10^4 passed 32 of 32. */
    n = SCALE(1000000, TEST_TSAN ? 20000 : 100000);
    h = calloc(n, sizeof *h);
    ran = calloc(n, 1);
    CHECK(h && ran, "calloc");
    CHECK_RC(weft_init(NULL), 0);
    check_phase("spawning and parking");
    uint64_t t0 = weft_now_ns();
    CHECK_RC(weft_wg_add(&all_in, 1), 0);
    weft_t s = spawn(spawner, NULL);
    CHECK_RC(weft_wg_wait(&all_in), 0);
    join(s);
    uint64_t t1 = weft_now_ns();
    uint64_t copies = 0;
    for (int v = 0; v < weft_num_vcores(); v++) {
        struct weft_vcore_stats st;
        CHECK_RC(weft_stats(v, &st), 0);
        copies += st.stack_copies;
    }
    /* The last ones to count themselves in may not have parked yet. */
    CHECK(copies + (size_t)weft_num_vcores() >= n, "%zu parked uthreads but only %llu stack copies",
          n, (unsigned long long)copies);
    check_phase("waking and joining");
    atomic_store_explicit(&released, 1, memory_order_release);
    for (size_t i = 0; i < n; i++)
        CHECK_RC(weft_unpark(h[i]), 0);
    for (size_t i = 0; i < n; i++)
        CHECK(join(h[i]) == (void *)(i + 1), "uthread %zu returned the wrong value", i);
    for (size_t i = 0; i < n; i++)
        CHECK(ran[i] == 1, "uthread %zu resumed %d times", i, ran[i]);
    printf("stackcopy_million: ok (%zu uthreads, %d vcores, %.2f us each to spawn and park)\n", n,
           weft_num_vcores(), (double)(t1 - t0) / 1e3 / (double)n);
    weft_shutdown();
    free(h);
    free(ran);
    return 0;
}
