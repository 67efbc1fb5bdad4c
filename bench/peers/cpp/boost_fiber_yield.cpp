// boost_fiber_yield.cpp — nanoseconds per boost::this_fiber::yield() with 2,
// 100 and 10 000 fibers on one thread (pinned to CPU 0), default round_robin
// scheduler and default stacks.
//
// Same shape as bench/weft/yield.c: the main fiber creates the workers (they
// run only once it blocks), takes the start time and joins them; each worker
// yields n times and counts handovers, which must be (nearly) all yields.
#include "bench.hpp"

#include <boost/fiber/all.hpp>

#include <vector>

namespace {

struct yield_run {
    int nthreads;

    bench::nanoseconds operator()(std::uint64_t n) const
    {
        int last = -1;                 // the worker that ran last (one thread: no races)
        std::uint64_t handovers = 0, done = 0;
        std::vector<boost::fibers::fiber> workers;
        workers.reserve(nthreads);
        for (int id = 0; id < nthreads; ++id)
            workers.emplace_back([&, id] {
                for (std::uint64_t i = 0; i < n; ++i) {
                    boost::this_fiber::yield();
                    if (last != id) {
                        last = id;
                        ++handovers;
                    }
                    ++done;
                }
            });
        auto t0 = bench::clock::now();
        for (auto &w : workers)
            w.join();
        auto t1 = bench::clock::now();

        const std::uint64_t total = n * std::uint64_t(nthreads);
        if (done != total)
            bench::fail("boost.fiber yield: " + std::to_string(done) + " yields done, " +
                        std::to_string(total) + " asked");
        if (handovers + 2 * std::uint64_t(nthreads) < total)
            bench::fail("boost.fiber yield: only " + std::to_string(handovers) + " of " +
                        std::to_string(total) + " yields switched fiber");
        return t1 - t0;
    }
};

} // namespace

int main()
{
    bench::pin_self(0);
    bench::note("boost.fiber", "one thread pinned to CPU 0, round_robin scheduler");
    for (int nthreads : {2, 100, 10000}) {
        // 10 000 fibers: start the warm-up small (each run creates them all).
        auto s = bench::measure(yield_run{nthreads}, nthreads >= 10000 ? 10 : 1000,
                                (1u << 30) / nthreads);
        bench::result("yield", "boost.fiber", "threads=" + std::to_string(nthreads),
                      s.per_iter_ns() / nthreads, "ns/yield");
    }
}
