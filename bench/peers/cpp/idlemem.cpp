// idlemem.cpp — memory per idle thread (bench/README.md, "Memory per idle
// thread"; the C programs' side is bench/common/idlemem.h) for Boost.Fiber
// and C++20 coroutines, on one thread (the driver pins it to CPU 0):
//
//   idlemem fiber|fiber-pooled|coro --threads T
//
//   fiber         impl=boost.fiber: T fibers with Boost's default stack
//                 allocator, fixedsize_stack of stack_traits::default_size()
//                 (malloc'd, touched only at the top), round_robin scheduler.
//   fiber-pooled  impl=boost.fiber-pooled: the same with a
//                 pooled_fixedsize_stack of the same size (stacks carved from
//                 chunks of 32, kept for reuse).
//   coro          impl=c++20-coro: T stackless coroutines (coro::task,
//                 bench/peers/cpp/coro.hpp's scheduler); a frame is what the
//                 compiler allocates with operator new, once per coroutine.
//                 Stackless: a floor, not a peer.
//
// Each thread counts its arrival and blocks on one shared wait: a fiber on a
// boost::fibers::condition_variable (with its mutex and a released flag), a
// coroutine on a coro::event. The last to arrive records the time. Main (the
// main fiber; for coro, the code around scheduler::run()) reads the resident
// set (/proc/self/statm) before the first create and when all T are blocked,
// then wakes everyone (notify_all; event::set), joins every fiber (checks
// every task done) and checks that each ran to completion exactly once.
// Bookkeeping (the fiber/task handles, a counter per thread) is allocated and
// touched before the first reading.
//
//   RESULT bench=idlemem impl=<impl> param=threads=<T> value=<B/thread>
//          unit=B/thread create_ns=<ns/thread> rss_before=<B> rss_after=<B>
//          vsz_per_thread=<B> [stack=<fiber stack bytes>]
//
// Exit: 0 measured; 1 FAIL; 2 bad command line; 75 "LIMIT ..." when an
// allocation failed while creating (std::bad_alloc); 77 a Boost mode in a
// build without Boost.
#include "bench.hpp"
#include "coro.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#ifndef IDLEMEM_NO_BOOST
#include <boost/fiber/all.hpp>
#endif

namespace {

struct mem {
    std::uint64_t vsz = 0, rss = 0;
};

mem read_mem()
{
    unsigned long long size = 0, resident = 0;
    FILE *f = std::fopen("/proc/self/statm", "r");
    if (!f || std::fscanf(f, "%llu %llu", &size, &resident) != 2)
        bench::fail(std::string("idlemem: cannot read /proc/self/statm: ") + std::strerror(errno));
    std::fclose(f);
    const std::uint64_t page = std::uint64_t(sysconf(_SC_PAGESIZE));
    return mem{size * page, resident * page};
}

std::uint64_t now_ns()
{
    return std::uint64_t(
        std::chrono::duration_cast<bench::nanoseconds>(bench::clock::now().time_since_epoch())
            .count());
}

[[noreturn]] void limit(const std::string &what, const std::string &why, std::uint64_t made,
                        std::uint64_t threads)
{
    std::fflush(stdout);
    std::fprintf(stderr, "LIMIT %s: %s after %llu of %llu threads\n", what.c_str(), why.c_str(),
                 (unsigned long long)made, (unsigned long long)threads);
    std::fflush(stderr);
    std::_Exit(75);   // the threads made so far are blocked for good
}

[[noreturn]] void usage(const char *prog, const std::string &why)
{
    std::fprintf(stderr, "%s: %s\nusage: %s fiber|fiber-pooled|coro --threads T\n", prog,
                 why.c_str(), prog);
    std::exit(2);
}

void report(const std::string &impl, std::uint64_t threads, mem before, mem after,
            std::uint64_t create_ns, const std::string &extra)
{
    const double t = double(threads);
    std::printf("RESULT bench=idlemem impl=%s param=threads=%llu value=%.1f unit=B/thread "
                "create_ns=%.1f rss_before=%llu rss_after=%llu vsz_per_thread=%.0f%s\n",
                impl.c_str(), (unsigned long long)threads,
                (double(after.rss) - double(before.rss)) / t, double(create_ns) / t,
                (unsigned long long)before.rss, (unsigned long long)after.rss,
                (double(after.vsz) - double(before.vsz)) / t, extra.c_str());
    std::fflush(stdout);
}

void check(const std::string &impl, const std::vector<std::uint32_t> &ran)
{
    std::uint64_t wrong = 0, first = 0;
    for (std::uint64_t i = 0; i < ran.size(); ++i)
        if (ran[i] != 1 && wrong++ == 0)
            first = i;
    if (wrong)
        bench::fail(impl + " idlemem: " + std::to_string(wrong) + " of " +
                    std::to_string(ran.size()) +
                    " threads did not run to completion exactly once (thread " +
                    std::to_string(first) + " ran " + std::to_string(ran[first]) + " times)");
}

void check_none_ran(const std::string &impl, const std::vector<std::uint32_t> &ran)
{
    for (std::uint64_t i = 0; i < ran.size(); ++i)
        if (ran[i])
            bench::fail(impl + " idlemem: thread " + std::to_string(i) +
                        " went past its wait before it was woken");
}

// ---- C++20 coroutines -------------------------------------------------------

struct coro_state {
    std::uint64_t threads, arrived = 0, t_last = 0;
    std::vector<std::uint32_t> ran;
    coro::event wake;
};

coro::task<void> idle_coro(coro_state &st, std::uint64_t i)
{
    if (++st.arrived == st.threads)
        st.t_last = now_ns();
    co_await st.wake;
    st.ran[i]++;
}

void run_coro(std::uint64_t threads)
{
    const std::string impl = "c++20-coro";
    coro_state st{threads, 0, 0, std::vector<std::uint32_t>(threads, 0), {}};
    std::vector<coro::task<void>> tasks(threads);   // empty handles, touched now
    coro::scheduler sched;

    const mem before = read_mem();
    const std::uint64_t t0 = now_ns();
    std::uint64_t made = 0;
    try {
        for (; made < threads; ++made)
            tasks[made] = sched.spawn(idle_coro(st, made));
    } catch (const std::bad_alloc &) {
        limit("coroutine frame", std::strerror(ENOMEM), made, threads);
    }
    sched.run();   // every coroutine runs to its co_await on the event
    if (st.arrived != threads)
        bench::fail(impl + " idlemem: " + std::to_string(st.arrived) + " of " +
                    std::to_string(threads) + " coroutines reached the wait");
    const mem after = read_mem();
    const std::uint64_t create_ns = st.t_last - t0;

    check_none_ran(impl, st.ran);
    st.wake.set();
    sched.run();
    for (std::uint64_t i = 0; i < threads; ++i)
        if (!tasks[i].done())
            bench::fail(impl + " idlemem: coroutine " + std::to_string(i) + " did not finish");
    check(impl, st.ran);
    tasks.clear();
    report(impl, threads, before, after, create_ns, "");
}

// ---- Boost.Fiber --------------------------------------------------------------

#ifndef IDLEMEM_NO_BOOST
namespace bf = boost::fibers;

struct fiber_state {
    std::uint64_t threads, arrived = 0, t_last = 0;
    std::vector<std::uint32_t> ran;
    bf::mutex m;
    bf::condition_variable wake, all_arrived;
    bool released = false;
};

void idle_fiber(fiber_state &st, std::uint64_t i)
{
    std::unique_lock<bf::mutex> lk(st.m);
    if (++st.arrived == st.threads) {
        st.t_last = now_ns();
        st.all_arrived.notify_one();
    }
    st.wake.wait(lk, [&st] { return st.released; });
    lk.unlock();
    st.ran[i]++;
}

void run_fiber(std::uint64_t threads, bool pooled)
{
    const std::string impl = pooled ? "boost.fiber-pooled" : "boost.fiber";
    const std::size_t stack = boost::context::stack_traits::default_size();
    fiber_state st{threads, 0, 0, std::vector<std::uint32_t>(threads, 0), {}, {}, {}, false};
    std::vector<bf::fiber> fibers(threads);   // empty handles, touched now
    bf::pooled_fixedsize_stack pool(stack);   // allocates nothing until the first stack

    const mem before = read_mem();
    const std::uint64_t t0 = now_ns();
    std::uint64_t made = 0;
    try {
        for (; made < threads; ++made)
            fibers[made] = pooled ? bf::fiber(std::allocator_arg, pool, idle_fiber, std::ref(st), made)
                                  : bf::fiber(idle_fiber, std::ref(st), made);
    } catch (const std::bad_alloc &) {
        limit("fiber creation", std::strerror(ENOMEM), made, threads);
    } catch (const std::system_error &e) {
        limit("fiber creation", e.code().message(), made, threads);
    }
    {
        std::unique_lock<bf::mutex> lk(st.m);   // the main fiber waits: the others run
        st.all_arrived.wait(lk, [&st] { return st.arrived == st.threads; });
    }
    const mem after = read_mem();
    const std::uint64_t create_ns = st.t_last - t0;

    check_none_ran(impl, st.ran);
    {
        std::lock_guard<bf::mutex> lk(st.m);
        st.released = true;
    }
    st.wake.notify_all();
    for (auto &f : fibers)
        f.join();
    check(impl, st.ran);
    fibers.clear();
    report(impl, threads, before, after, create_ns, " stack=" + std::to_string(stack));
}
#endif

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2)
        usage(argv[0], "missing mode");
    const std::string mode = argv[1];
    std::string val;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads" && i + 1 < argc)
            val = argv[++i];
        else if (a.rfind("--threads=", 0) == 0)
            val = a.substr(10);
        else
            usage(argv[0], "unexpected argument " + a);
    }
    if (val.empty() || val.size() > 9 || val.find_first_not_of("0123456789") != std::string::npos ||
        std::stoull(val) == 0)
        usage(argv[0], "--threads: want 1..10^8, got '" + val + "'");
    const std::uint64_t threads = std::stoull(val);
    if (threads > 100000000)
        usage(argv[0], "--threads: want 1..10^8, got '" + val + "'");

    if (mode == "coro") {
        run_coro(threads);
    } else if (mode == "fiber" || mode == "fiber-pooled") {
#ifndef IDLEMEM_NO_BOOST
        run_fiber(threads, mode == "fiber-pooled");
#else
        std::fprintf(stderr, "idlemem: built without Boost.Fiber\n");
        return 77;
#endif
    } else {
        usage(argv[0], "bad mode " + mode);
    }
    return 0;
}
