// boost_fiber_spawn.cpp — nanoseconds per boost::fibers::fiber construction +
// join() of an empty fiber, from the main fiber, one thread (not pinned),
// default round_robin scheduler and default stack allocator. Each child
// stores its index and the parent checks it after the join.
#include "bench.hpp"

#include <boost/fiber/all.hpp>

int main()
{
    auto run = [](std::uint64_t n) {
        auto t0 = bench::clock::now();
        for (std::uint64_t i = 1; i <= n; ++i) {
            std::uint64_t got = 0;
            boost::fibers::fiber child([&got, i] { got = i; });
            child.join();
            if (got != i)
                bench::fail("boost.fiber spawn: child " + std::to_string(i) + " did not run");
        }
        return bench::nanoseconds(bench::clock::now() - t0);
    };
    auto s = bench::measure(run, 1000, 1u << 26);
    bench::result("spawn", "boost.fiber", "join=each", s.per_iter_ns(), "ns/spawn");
}
