/*
 * netpingpong.c — the cost of a wake-up through weft's netpoller: round-trip
 * nanoseconds of a one-byte ping-pong between two uthreads over two pipes,
 * through weft_read() / weft_write().
 *
 * A writes byte i into pipe a_to_b and reads the answer from b_to_a; B reads
 * it, writes back its complement. Every read finds its pipe empty first
 * (the other side has not answered yet), so every hop is a park on the
 * descriptor and a wake-up by the poller: one round trip = two poller
 * wake-ups, two parks, four system calls of payload. A checks every answer.
 *
 * Layout follows the runtime's vcore count (set WEFT_VCORES):
 *   1 vcore   both uthreads on vcore 0 (CPU 0)           param=cpus=0
 *   2+ vcores A WEFT_PINNED to vcore 0, B to vcore 1     param=cpus=0,1
 * The poller is the one weft picks (WEFT_POLLER=epoll | uring); the result
 * is named after the one actually in use (impl=weft-epoll, weft-io_uring).
 * If WEFT_POLLER asks for io_uring and weft runs something else, the program
 * exits 77 (skipped) rather than report the wrong poller under that name.
 *
 * Peers: bench/peers/kernel/pingpong.c, pipe variant (kernel threads in
 * blocking read(2)/write(2): both on CPU 0, on CPUs 0 and 1, and unpinned).
 */
#include "bench.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <unistd.h>
#include <weft/weft.h>
#include <weft/io.h>
#include <weft/sched.h>

static int a_to_b[2], b_to_a[2];   /* [0] read end, [1] write end */
static atomic_uint_fast64_t replies;   /* written by B only */
static int vcore_a, vcore_b;

static void check_vcore(int want, const char *who)
{
    int v = weft_vcore_id();
    if (v != want)
        bench_fail("weft netpingpong: %s is pinned to vcore %d but runs on vcore %d", who,
                   want, v);
}

static void *side_b(void *unused)
{
    (void)unused;
    unsigned char c;
    ssize_t r;
    check_vcore(vcore_b, "B");
    while ((r = weft_read(a_to_b[0], &c, 1)) == 1) {
        c = (unsigned char)~c;
        atomic_fetch_add(&replies, 1);
        ssize_t w = weft_write(b_to_a[1], &c, 1);
        if (w != 1)
            bench_fail("weft netpingpong: B weft_write returned %zd: %s", w, strerror(errno));
    }
    if (r < 0)
        bench_fail("weft netpingpong: B weft_read: %s", strerror(errno));
    check_vcore(vcore_b, "B");
    return NULL;   /* A closed its end */
}

static uint64_t run_a(void *unused, uint64_t n)
{
    (void)unused;
    uint64_t base = atomic_load(&replies), t0 = bench_now_ns();
    for (uint64_t i = 1; i <= n; i++) {
        unsigned char out = (unsigned char)i, in = 0;
        ssize_t w = weft_write(a_to_b[1], &out, 1);
        if (w != 1)
            bench_fail("weft netpingpong: A weft_write returned %zd: %s", w, strerror(errno));
        ssize_t r = weft_read(b_to_a[0], &in, 1);
        if (r != 1)
            bench_fail("weft netpingpong: A weft_read returned %zd: %s", r,
                       r < 0 ? strerror(errno) : "end of file");
        if (in != (unsigned char)~out)
            bench_fail("weft netpingpong: sent %#x, got back %#x", out, in);
        uint64_t got = atomic_load(&replies) - base;
        if (got != i)
            bench_fail("weft netpingpong: after round trip %llu, B has replied %llu times",
                       (unsigned long long)i, (unsigned long long)got);
    }
    return bench_now_ns() - t0;
}

struct outcome {
    struct bench_sample s;
    const char *poller;
};

static void *side_a(void *arg)
{
    struct outcome *o = arg;
    check_vcore(vcore_a, "A");
    o->s = bench_measure(run_a, NULL, 1000, 1u << 26);
    o->poller = weft_poller_name();
    check_vcore(vcore_a, "A");
    if (weft_close(a_to_b[1]) != 0)   /* B reads end-of-file and returns */
        bench_fail("weft netpingpong: weft_close: %s", strerror(errno));
    return NULL;
}

int main(void)
{
    bench_check_rc(weft_init(NULL));
    int nv = weft_num_vcores();
    vcore_a = 0;
    vcore_b = nv >= 2 ? 1 : 0;
    const char *param = nv >= 2 ? "cpus=0,1" : "cpus=0";

    if (pipe2(a_to_b, O_CLOEXEC) != 0 || pipe2(b_to_a, O_CLOEXEC) != 0)
        bench_fail("pipe2: %s", strerror(errno));

    weft_attr_t attr_a = { .flags = WEFT_PINNED, .vcore = vcore_a, .name = "netpp-a" };
    weft_attr_t attr_b = { .flags = WEFT_PINNED, .vcore = vcore_b, .name = "netpp-b" };
    weft_t ta, tb;
    struct outcome o = { { 0, 0 }, NULL };
    bench_check_rc(weft_spawn(&tb, &attr_b, side_b, NULL));
    bench_check_rc(weft_spawn(&ta, &attr_a, side_a, &o));
    bench_check_rc(weft_join(ta, NULL));
    bench_check_rc(weft_join(tb, NULL));
    weft_close(a_to_b[0]);
    weft_close(b_to_a[0]);
    weft_close(b_to_a[1]);

    const char *want = getenv("WEFT_POLLER");
    const char *poller = o.poller ? o.poller : "?";
    if (want && strcmp(want, "uring") == 0 && strcmp(poller, "io_uring") != 0) {
        fprintf(stderr, "SKIP WEFT_POLLER=uring but weft runs the %s poller (io_uring "
                "unavailable here?)\n", poller);
        weft_shutdown();
        return 77;
    }
    char impl[64];
    snprintf(impl, sizeof impl, "weft-%s", poller);
    bench_note(impl, "%s poller, %d vcore(s): A on vcore %d, B on vcore %d (WEFT_PINNED)",
               poller, nv, vcore_a, vcore_b);
    bench_result("netpingpong", impl, param, (double)o.s.ns / (double)o.s.iters,
                 "ns/roundtrip");
    weft_shutdown();
    return 0;
}
