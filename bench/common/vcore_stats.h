/*
 * vcore_stats.h — the weft programs of issue 5 print the runtime's per-vcore
 * counters (weft_stats(), <weft/event.h>) after a run: one NOTE per vcore,
 * and the totals as extra tokens of their RESULT line,
 *
 *   preempt_taken=<sum> preempt_deferred=<sum> longest_stretch_ms=<max>
 *
 * Call it while the runtime still runs (before weft_shutdown()).
 */
#ifndef WEFT_BENCH_VCORE_STATS_H
#define WEFT_BENCH_VCORE_STATS_H

#include "bench.h"

#include <weft/event.h>
#include <weft/sched.h>

/* bench_vcore_stats() prints the NOTEs and writes the totals' tokens, with a
 * leading space, into buf. */
static void bench_vcore_stats(const char *impl, char *buf, size_t size)
{
    uint64_t taken = 0, deferred = 0, stretch = 0;
    for (int v = 0; v < weft_num_vcores(); v++) {
        struct weft_vcore_stats st;
        bench_check_rc(weft_stats(v, &st));
        bench_note(impl, "vcore=%d decisions=%llu notifs=%llu events=%llu preempt_taken=%llu "
                   "preempt_deferred=%llu longest_stretch_ms=%.1f", v,
                   (unsigned long long)st.decisions, (unsigned long long)st.notifs,
                   (unsigned long long)st.events, (unsigned long long)st.preempt_taken,
                   (unsigned long long)st.preempt_deferred, (double)st.longest_stretch_ns / 1e6);
        taken += st.preempt_taken;
        deferred += st.preempt_deferred;
        stretch = st.longest_stretch_ns > stretch ? st.longest_stretch_ns : stretch;
    }
    snprintf(buf, size, " preempt_taken=%llu preempt_deferred=%llu longest_stretch_ms=%.1f",
             (unsigned long long)taken, (unsigned long long)deferred, (double)stretch / 1e6);
}

#endif /* WEFT_BENCH_VCORE_STATS_H */
