/*
 * shutdown_race — calls from outside kernel threads racing weft_shutdown().
 *
 * Proves: across many weft_init/weft_shutdown cycles, kernel threads that
 * hammer weft_spawn, weft_alarm_start/stop, weft_vcore_notify and
 * weft_stats meanwhile get only their documented results (0, or ESHUTDOWN /
 * EAGAIN / EINVAL / EBUSY while a shutdown runs), never a crash (before the
 * fix: a spawn or alarm start that passed the running check used the vcores
 * after shutdown freed them, and home_of divided by zero); and nothing is
 * lost: every spawn that returned 0 ran, every alarm start that returned 0
 * either fired or was stopped or dropped by the shutdown.
 */
#include "check.h"

#define CYCLES SCALE(150, 40)
#define HAMMERS 3
#define EV_TYPE (WEFT_EV_USER + 3)

static atomic_int stop_hammers;
static atomic_long spawned, ran, notified, handled;

static void *noop(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ran, 1);
    return NULL;
}

static void on_event(unsigned type, uintptr_t payload, void *arg)
{
    (void)type;
    (void)payload;
    (void)arg;
    atomic_fetch_add(&handled, 1);
}

static void alarm_cb(weft_alarm_t *a)
{
    (void)a;
}

static void *hammer(void *arg)
{
    int who = (int)(intptr_t)arg;
    weft_alarm_t al;
    weft_alarm_init(&al, alarm_cb);
    weft_attr_t da = { .flags = WEFT_DETACHED };
    for (unsigned i = 0; !atomic_load(&stop_hammers); i++) {
        switch ((i + (unsigned)who) % 4) {
        case 0: {
            int rc = weft_spawn(NULL, &da, noop, NULL);
            CHECK(rc == 0 || rc == ESHUTDOWN, "weft_spawn: %d (%s)", rc, check_errname(rc));
            if (rc == 0)
                atomic_fetch_add(&spawned, 1);
            break;
        }
        case 1: {
            int rc = weft_alarm_set_rel(&al, 10000);
            CHECK(rc == 0, "weft_alarm_set_rel: %d", rc);
            rc = weft_alarm_start(&al);
            CHECK(rc == 0 || rc == ESHUTDOWN, "weft_alarm_start: %d (%s)", rc, check_errname(rc));
            weft_alarm_stop(&al); /* must leave it idle: reused next time */
            break;
        }
        case 2: {
            int rc = weft_vcore_notify(0, EV_TYPE, 1);
            CHECK(rc == 0 || rc == EAGAIN || rc == EINVAL, "weft_vcore_notify: %d (%s)", rc,
                  check_errname(rc));
            if (rc == 0)
                atomic_fetch_add(&notified, 1);
            break;
        }
        case 3: {
            struct weft_vcore_stats st;
            int rc = weft_stats(0, &st);
            CHECK(rc == 0 || rc == EINVAL, "weft_stats: %d", rc);
            break;
        }
        }
    }
    weft_alarm_stop(&al);
    return NULL;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    CHECK_RC(weft_event_register(EV_TYPE, on_event, NULL), 0);
    pthread_t h[HAMMERS];
    for (int i = 0; i < HAMMERS; i++)
        h[i] = start_pthread(hammer, (void *)(intptr_t)i);
    for (int c = 0; c < CYCLES; c++) {
        int rc = weft_init(NULL);
        CHECK(rc == 0 || rc == EBUSY, "cycle %d: weft_init: %d", c, rc); /* EBUSY: a spawn
                                                                           * started it */
        struct timespec ts = { 0, (long)(c % 5) * 200000 };
        nanosleep(&ts, NULL);
        weft_shutdown();
    }
    atomic_store(&stop_hammers, 1);
    for (int i = 0; i < HAMMERS; i++)
        join_pthread(h[i]);
    weft_shutdown(); /* a late spawn may have started it again */
    CHECK(atomic_load(&ran) == atomic_load(&spawned), "%ld spawns returned 0 but %ld ran",
          atomic_load(&spawned), atomic_load(&ran));
    CHECK(atomic_load(&spawned) > 0, "no spawn got through in %d cycles", CYCLES);
    fprintf(stderr, "shutdown_race: ok (%d cycles; %ld spawns ran, %ld of %ld events handled)\n",
            CYCLES, atomic_load(&ran), atomic_load(&handled), atomic_load(&notified));
    return 0;
}
