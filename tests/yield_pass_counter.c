/*
 * yield_pass_counter — compiled with the yield pass in counter mode,
 * threshold 1000 (tests/CMakeLists.txt): one loop, one latch check per
 * iteration, for yield_pass's case (e).
 */
#include <stdatomic.h>

unsigned long count_latches(unsigned long n);

static atomic_ulong sink;

unsigned long count_latches(unsigned long n)
{
    unsigned long i;
    for (i = 0; i < n; i++)
        atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
    return i;
}
