// bench.hpp — the C++ peers' side of the harness in bench/common/bench.h:
// the same RESULT/NOTE lines, the same warm-up-then-timed-run sizing
// (BENCH_TARGET_MS, default 400 ms), the same "fail loudly" rule.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <system_error>

namespace bench {

using clock = std::chrono::steady_clock;
using std::chrono::nanoseconds;

// fail() reports a benchmark that did not do what it was asked and exits 1.
[[noreturn]] inline void fail(const std::string &why)
{
    std::cout.flush();
    std::cerr << "FAIL " << why << std::endl;
    std::exit(1);
}

inline void result(const std::string &bench, const std::string &impl, const std::string &param,
                   double value, const std::string &unit)
{
    std::printf("RESULT bench=%s impl=%s param=%s value=%.3f unit=%s\n", bench.c_str(),
                impl.c_str(), param.c_str(), value, unit.c_str());
    std::fflush(stdout);
}

inline void note(const std::string &impl, const std::string &text)
{
    std::printf("NOTE impl=%s %s\n", impl.c_str(), text.c_str());
    std::fflush(stdout);
}

inline nanoseconds target()
{
    const char *s = std::getenv("BENCH_TARGET_MS");
    long ms = s ? std::strtol(s, nullptr, 10) : 0;
    return std::chrono::milliseconds(ms > 0 ? ms : 400);
}

struct sample {
    std::uint64_t iters;
    nanoseconds elapsed;
    double per_iter_ns() const { return double(elapsed.count()) / double(iters); }
};

// measure() warms up run(n) (doubling n from n0 until one run lasts 50 ms or
// n reaches max_iters), then does one timed run sized for target().
// run(n) performs n iterations, checks them, and returns their duration.
template <class Run>
sample measure(Run &&run, std::uint64_t n0, std::uint64_t max_iters)
{
    std::uint64_t n = n0 ? n0 : 1;
    nanoseconds took;
    for (;;) {
        took = run(n);
        if (took >= std::chrono::milliseconds(50) || n >= max_iters)
            break;
        n *= 2;
    }
    double per = double(std::max<std::int64_t>(took.count(), 1)) / double(n);
    double want = double(target().count()) / per;
    std::uint64_t timed = want < 1.0 ? 1 : std::uint64_t(want);
    if (timed > max_iters)
        timed = max_iters;
    return sample{timed, run(timed)};
}

// pin_self() pins the calling thread to cpu (as `taskset -c cpu`), or fails.
inline void pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set))
        fail("pthread_setaffinity_np: " + std::system_category().message(rc));
}

} // namespace bench
