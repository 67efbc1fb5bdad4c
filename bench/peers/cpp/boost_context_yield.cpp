// boost_context_yield.cpp — the physical floor for a yield: bare
// boost::context::fiber switches, no scheduler, one thread pinned to CPU 0.
//
//   threads=2    main and one fiber resume each other (ping-pong); each
//                resume is one yield: 1 context switch per yield.
//   threads=100, threads=10000
//                main resumes 100 (10 000) fibers round-robin and each
//                resumes main back: one yield of a worker is worker -> main
//                -> next worker, 2 context switches per yield, the shape of a
//                scheduler loop with nothing in it.
// Both sides count their resumes and the counts are checked.
//
// Timing (the one boundary of every yield program, bench/README.md): every
// fiber is created and resumed once, untimed, up to its first switch back
// to main (it is then "ready, waiting at the gate": suspended, stack
// touched); the clock runs from main's first timed resume to the return of
// its last one. After the clock stops, main resumes every fiber once more so
// that its loop ends (untimed): no fiber ends inside the timed span.
#include "bench.hpp"

#include <boost/context/fiber.hpp>

#include <vector>

namespace ctx = boost::context;

namespace {

// Ping-pong between main and one fiber; 2n yields (n each way).
bench::nanoseconds pingpong(std::uint64_t n)
{
    std::uint64_t fiber_yields = 0, main_yields = 0;
    ctx::fiber f{[&](ctx::fiber &&back) {
        back = std::move(back).resume();   // ready: wait for the first timed resume
        for (std::uint64_t i = 0; i < n; ++i) {
            ++fiber_yields;
            back = std::move(back).resume();
        }
        return std::move(back);
    }};
    f = std::move(f).resume();   // untimed: the fiber starts and comes back
    auto t0 = bench::clock::now();
    for (std::uint64_t i = 0; i < n; ++i) {
        ++main_yields;
        f = std::move(f).resume();
    }
    auto t1 = bench::clock::now();
    f = std::move(f).resume();   // let the fiber's loop end (untimed)
    if (f || fiber_yields != n || main_yields != n)
        bench::fail("boost.context ping-pong: fiber yielded " + std::to_string(fiber_yields) +
                    ", main " + std::to_string(main_yields) + ", asked " + std::to_string(n));
    return t1 - t0;
}

// Round-robin over nthreads fibers from main; nthreads * n worker yields.
bench::nanoseconds round_robin(int nthreads, std::uint64_t n)
{
    std::uint64_t yields = 0;
    std::vector<ctx::fiber> workers;
    workers.reserve(nthreads);
    for (int id = 0; id < nthreads; ++id)
        workers.emplace_back([&](ctx::fiber &&back) {
            back = std::move(back).resume();   // ready: wait for the first timed resume
            for (std::uint64_t i = 0; i < n; ++i) {
                ++yields;
                back = std::move(back).resume();
            }
            return std::move(back);
        });
    for (auto &w : workers)   // untimed: every fiber starts and comes back
        w = std::move(w).resume();
    auto t0 = bench::clock::now();
    for (std::uint64_t i = 0; i < n; ++i)
        for (auto &w : workers)
            w = std::move(w).resume();
    auto t1 = bench::clock::now();
    for (auto &w : workers) {   // let every loop end (untimed)
        w = std::move(w).resume();
        if (w)
            bench::fail("boost.context round-robin: a worker did not finish");
    }
    if (yields != n * std::uint64_t(nthreads))
        bench::fail("boost.context round-robin: " + std::to_string(yields) + " yields, asked " +
                    std::to_string(n * std::uint64_t(nthreads)));
    return t1 - t0;
}

} // namespace

int main()
{
    bench::pin_self(0);
    bench::note("boost.context", "one thread pinned to CPU 0; threads=2: main<->fiber ping-pong "
                                 "(1 switch/yield); threads=100 and 10000: round-robin from main "
                                 "(2 switches/yield)");
    auto s = bench::measure(pingpong, 1000, 1u << 30);
    bench::result("yield", "boost.context", "threads=2", s.per_iter_ns() / 2, "ns/yield");

    s = bench::measure([](std::uint64_t n) { return round_robin(100, n); }, 1000, 1u << 24);
    bench::result("yield", "boost.context", "threads=100", s.per_iter_ns() / 100, "ns/yield");

    // 10 000 fibers: start the warm-up small (each run creates them all).
    s = bench::measure([](std::uint64_t n) { return round_robin(10000, n); }, 10, 1u << 16);
    bench::result("yield", "boost.context", "threads=10000", s.per_iter_ns() / 10000, "ns/yield");
}
