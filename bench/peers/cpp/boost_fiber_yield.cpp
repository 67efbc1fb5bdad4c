// boost_fiber_yield.cpp — nanoseconds per boost::this_fiber::yield() with 2,
// 100 and 10 000 fibers on one thread (pinned to CPU 0).
//
//   boost_fiber_yield [--stack pooled|fixed] [--algo rr|shared|ws]
//
// --stack and --algo are Boost's own tuning knobs (fiber_config.hpp); the
// defaults are the configuration measured best on the 2-CPU test machine
// (bench/README.md, "Boost.Fiber's configuration"): pooled stacks and the
// default round_robin. A NOTE line prints the configuration used.
//
// Timing (the one boundary of every yield program, bench/README.md; the
// shape of bench/weft/yield.c): the main fiber creates the workers; each
// counts itself in on `started` and waits at the start gate. When all are
// in, main takes the start time and opens the gate. Each worker yields n
// times and counts handovers (another fiber ran since its last turn), which
// must be (nearly) all yields; then it counts itself done, and the last one
// takes the end time and opens the `finished` gate main waits on. A finished
// worker waits at the release gate instead of ending, so no fiber ends (and
// frees its stack) inside the timed span; creation, the first run up to the
// gate, the ends and the joins are all untimed. Warm-up: bench::measure()'s
// doubling runs before the timed one, as in every yield program.
#include "bench.hpp"
#include "fiber_config.hpp"

#include <vector>

namespace {

namespace bf = boost::fibers;

struct yield_run {
    int nthreads;
    fibercfg::stacks *stacks;

    bench::nanoseconds operator()(std::uint64_t n) const
    {
        int last = -1;                 // the worker that ran last (one thread: no races)
        std::uint64_t handovers = 0, done = 0;
        int running = nthreads;        // workers not yet done with their yields
        bench::clock::time_point t1;
        fibercfg::countdown started{std::uint64_t(nthreads)};
        fibercfg::gate start, finished, release;
        std::vector<bf::fiber> workers;
        workers.reserve(nthreads);
        for (int id = 0; id < nthreads; ++id)
            workers.emplace_back(std::allocator_arg, stacks->get(), [&, id] {
                started.arrive();
                start.wait();
                std::uint64_t h = 0, i = 0;
                for (; i < n; ++i) {
                    boost::this_fiber::yield();
                    if (last != id) {
                        last = id;
                        ++h;
                    }
                }
                if (--running == 0) {
                    t1 = bench::clock::now();
                    finished.open();
                }
                release.wait();   // untimed from here
                handovers += h;
                done += i;
            });
        started.wait();
        auto t0 = bench::clock::now();
        start.open();
        finished.wait();
        release.open();
        for (auto &w : workers)
            w.join();

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

int main(int argc, char **argv)
{
    const fibercfg::config cfg =
        fibercfg::strip(argc, argv, {fibercfg::stack_kind::pooled, fibercfg::algo_kind::rr},
                        "boost_fiber_yield");
    if (argc != 1) {
        std::cerr << "usage: boost_fiber_yield [--stack pooled|fixed] [--algo rr|shared|ws]\n";
        return 2;
    }
    bench::pin_self(0);
    fibercfg::install(cfg.algo, 1);
    fibercfg::stacks stacks(cfg.stack);
    bench::note("boost.fiber", std::string("one thread pinned to CPU 0, stack=") +
                                   fibercfg::name(cfg.stack) + " algo=" + fibercfg::name(cfg.algo));
    for (int nthreads : {2, 100, 10000}) {
        // 10 000 fibers: start the warm-up small (each run creates them all).
        auto s = bench::measure(yield_run{nthreads, &stacks}, nthreads >= 10000 ? 10 : 1000,
                                (1u << 30) / nthreads);
        bench::result("yield", "boost.fiber", "threads=" + std::to_string(nthreads),
                      s.per_iter_ns() / nthreads, "ns/yield");
    }
}
