// ring.hpp — what every C++ ring peer shares (coro_bench ring,
// boost_fiber_ring): the command line, the LIMIT exit, the checks and the
// RESULT/NOTE lines of the ring benchmark (the contract is the ring spec of
// issue 4; bench/README.md lists the programs).
//
//   <program> [subcommand] --n N --threads T --rounds M [--workers W]
//
// N >= 2, T a positive multiple of N, M >= 1, W >= 1 where the program takes
// it. Anything else: a usage line naming the bad option on stderr, exit 2.
#pragma once

#include "bench.hpp"

#include <cerrno>
#include <cstring>
#include <string_view>

namespace ring {

struct args {
    std::uint64_t n = 0, threads = 0, rounds = 0;
    unsigned workers = 1;
    bool workers_given = false;
};

[[noreturn]] inline void usage(const std::string &prog, bool takes_workers, const std::string &why)
{
    std::cerr << prog << ": " << why << "\nusage: " << prog
              << " --n N --threads T --rounds M" << (takes_workers ? " [--workers W]" : "")
              << "\n  N >= 2, T a positive multiple of N, M >= 1"
              << (takes_workers ? ", W >= 1" : "") << "\n";
    std::exit(2);
}

// parse() reads argv[first..argc-1]. `--opt V` and `--opt=V` are both taken.
inline args parse(int argc, char **argv, int first, const std::string &prog, bool takes_workers)
{
    constexpr std::uint64_t max_threads = 100'000'000, max_rounds = 1'000'000'000'000ull;
    args a;
    bool have_n = false, have_t = false, have_m = false;
    for (int i = first; i < argc; ++i) {
        std::string_view arg = argv[i], name = arg, value;
        bool inline_value = false;
        if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string_view::npos) {
            name = arg.substr(0, eq);
            value = arg.substr(eq + 1);
            inline_value = true;
        }
        if (name != "--n" && name != "--threads" && name != "--rounds" && name != "--workers")
            usage(prog, takes_workers, "unknown argument '" + std::string(arg) + "'");
        if (name == "--workers" && !takes_workers)
            usage(prog, takes_workers,
                  "--workers: not taken here (single-threaded: one worker, always)");
        if (!inline_value) {
            if (i + 1 >= argc)
                usage(prog, takes_workers, std::string(name) + ": missing value");
            value = argv[++i];
        }
        // A decimal number, nothing else (no sign, no spaces, no suffix).
        std::uint64_t v = 0;
        bool ok = !value.empty();
        for (char c : value)
            if (c < '0' || c > '9')
                ok = false;
            else
                v = v * 10 + std::uint64_t(c - '0');
        if (!ok)
            usage(prog, takes_workers,
                  std::string(name) + ": '" + std::string(value) + "' is not a number");
        if (value.size() > 19)   // more than any limit below, and v may have wrapped
            usage(prog, takes_workers,
                  std::string(name) + ": '" + std::string(value) + "' is out of range");
        if (name == "--n") {
            if (v < 2 || v > max_threads)
                usage(prog, takes_workers, "--n: must be at least 2");
            a.n = v, have_n = true;
        } else if (name == "--threads") {
            if (v < 1 || v > max_threads)
                usage(prog, takes_workers,
                      "--threads: must be between 1 and " + std::to_string(max_threads));
            a.threads = v, have_t = true;
        } else if (name == "--rounds") {
            if (v < 1 || v > max_rounds)
                usage(prog, takes_workers,
                      "--rounds: must be between 1 and " + std::to_string(max_rounds));
            a.rounds = v, have_m = true;
        } else {
            if (v < 1 || v > 1024)
                usage(prog, takes_workers, "--workers: must be between 1 and 1024");
            a.workers = unsigned(v), a.workers_given = true;
        }
    }
    if (!have_n)
        usage(prog, takes_workers, "--n: missing");
    if (!have_t)
        usage(prog, takes_workers, "--threads: missing");
    if (!have_m)
        usage(prog, takes_workers, "--rounds: missing");
    if (a.threads % a.n != 0)
        usage(prog, takes_workers,
              "--threads: " + std::to_string(a.threads) + " is not a multiple of --n " +
                  std::to_string(a.n));
    if (a.threads > UINT64_MAX / a.rounds)
        usage(prog, takes_workers, "--rounds: threads*rounds overflows");
    return a;
}

// limit() reports a resource limit hit while creating the threads and exits
// 75 at once (_Exit: the threads made so far are blocked and stay so).
[[noreturn]] inline void limit(const std::string &what, const std::string &why,
                               std::uint64_t made, std::uint64_t threads)
{
    std::fflush(stdout);
    std::fprintf(stderr, "LIMIT %s: %s after %llu of %llu threads\n", what.c_str(), why.c_str(),
                 (unsigned long long)made, (unsigned long long)threads);
    std::fflush(stderr);
    std::_Exit(75);
}

inline std::string strerror_str(int err) { return std::strerror(err); }

// check() applies the spec's checks; report() prints RESULT and NOTE.
inline void check(const std::string &impl, const args &a, std::uint64_t sends,
                  std::uint64_t bad_returns, std::uint64_t finished)
{
    if (finished != a.threads)
        bench::fail(impl + " ring: " + std::to_string(finished) + " of " +
                    std::to_string(a.threads) + " threads finished");
    if (bad_returns != 0)
        bench::fail(impl + " ring: " + std::to_string(bad_returns) +
                    " rounds came back to their originator with a value other than n=" +
                    std::to_string(a.n));
    if (sends != a.threads * a.rounds)
        bench::fail(impl + " ring: " + std::to_string(sends) + " sends, expected threads*rounds=" +
                    std::to_string(a.threads * a.rounds));
}

inline void report(const std::string &impl, const args &a, bench::nanoseconds took)
{
    const double seconds = double(took.count()) / 1e9;
    const std::uint64_t messages = a.threads * a.rounds;
    bench::result("ring", impl,
                  "n=" + std::to_string(a.n) + ",threads=" + std::to_string(a.threads),
                  double(messages) / (seconds > 0 ? seconds : 1e-9), "msg/s");
    char buf[256];
    std::snprintf(buf, sizeof buf, "n=%llu threads=%llu rounds=%llu seconds=%.6f messages=%llu",
                  (unsigned long long)a.n, (unsigned long long)a.threads,
                  (unsigned long long)a.rounds, seconds, (unsigned long long)messages);
    bench::note(impl, buf);
}

} // namespace ring
