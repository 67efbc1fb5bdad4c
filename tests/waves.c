/*
 * waves — 100 000 uthreads spawned and joined in waves of 1000.
 *
 * Proves: spawn/join scale without losing or mixing up a result: every
 * thread's result is its own (argument-derived) value, and stacks get reused
 * (100 000 guarded stacks would exceed vm.max_map_count otherwise). Half of the waves are driven from main, half from a
 * uthread; some threads yield, sleep or exit through weft_exit.
 */
#include "check.h"

#define WAVE 1000
#define NWAVES SCALE(100, 20)

static uintptr_t expect(uintptr_t x)
{
    return x * 2654435761u + 17;
}

static void *worker(void *arg)
{
    uintptr_t x = (uintptr_t)arg;
    if (x % 7 == 0)
        weft_yield();
    if (x % 101 == 0)
        weft_sleep_ns(10000);
    if (x % 13 == 0)
        weft_exit((void *)expect(x));
    return (void *)expect(x);
}

static weft_t wave_t[WAVE];

static void run_wave(int w)
{
    for (int i = 0; i < WAVE; i++) {
        uintptr_t x = (uintptr_t)w * WAVE + (uintptr_t)i;
        wave_t[i] = spawn(worker, (void *)x);
    }
    for (int i = 0; i < WAVE; i++) {
        uintptr_t x = (uintptr_t)w * WAVE + (uintptr_t)i;
        void *r = join(wave_t[i]);
        CHECK(r == (void *)expect(x), "wave %d thread %d: result %p, expected %p", w, i,
              r, (void *)expect(x));
    }
}

static void *driver(void *arg)
{
    int first = (int)(intptr_t)arg;
    for (int w = first; w < NWAVES; w += 2)
        run_wave(w);
    return NULL;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_phase("waves from main and from a uthread");
    driver((void *)0);           /* even waves from main */
    in_uthread(driver, (void *)1);   /* odd waves from a uthread */
    fprintf(stderr, "waves: ok (%d uthreads, %d vcores)\n", NWAVES * WAVE, weft_num_vcores());
    weft_shutdown();
    return 0;
}
