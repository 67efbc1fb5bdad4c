// fiber_config.hpp — what the Boost.Fiber peers (boost_fiber_ring,
// boost_fiber_yield) share: the tuning options a Boost user has, and the
// fiber-level gate and countdown of the one timing boundary
// (bench/README.md: every fiber is created and waits at a gate before the
// clock starts, and waits at a release gate after its work instead of
// ending, so no fiber ends inside the timed span).
//
//   --stack pooled|fixed   the fibers' stack allocator:
//       fixed   boost::fibers::fixedsize_stack (Boost's default): one
//               malloc'd stack per fiber, freed when the fiber ends;
//       pooled  boost::fibers::pooled_fixedsize_stack: stacks from a
//               boost::pool, kept for reuse when their fiber ends. The pool
//               is not thread-safe, so its calls are serialised by a mutex
//               (they only happen at creation and at the end, both untimed).
//       Both of stack_traits::default_size() (128 KiB), touched only at the top.
//   --algo rr|shared|ws    the scheduling algorithm every thread installs:
//       rr      boost::fibers::algo::round_robin (Boost's default; one thread
//               only: it never moves a fiber between threads);
//       shared  boost::fibers::algo::shared_work: one ready queue shared by
//               all threads (a mutex around a deque);
//       ws      boost::fibers::algo::work_stealing: a queue per thread, idle
//               threads steal.
//   Both with Boost's default suspend=false (an idle thread keeps looking for
//   work instead of sleeping).
//
// strip() takes these options (and their values) out of argv, so the rest
// goes to the program's own parser.
#pragma once

#include "bench.hpp"

#include <boost/fiber/all.hpp>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

namespace fibercfg {

namespace bf = boost::fibers;

enum class stack_kind { fixed, pooled };
enum class algo_kind { rr, shared, ws };

struct config {
    stack_kind stack;
    algo_kind algo;
    bool algo_given = false;   // --algo was on the command line
};

inline const char *name(stack_kind s) { return s == stack_kind::pooled ? "pooled" : "fixed"; }
inline const char *name(algo_kind a)
{
    return a == algo_kind::rr ? "rr" : a == algo_kind::shared ? "shared" : "ws";
}

// strip() reads --stack and --algo (as "--opt V" or "--opt=V") out of argv,
// compacting it; anything else stays. A bad value: usage on stderr, exit 2.
inline config strip(int &argc, char **argv, config dflt, const std::string &prog)
{
    config c = dflt;
    int out = 1;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i], opt = arg, val;
        bool has_val = false;
        if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos)
            opt = arg.substr(0, eq), val = arg.substr(eq + 1), has_val = true;
        if (opt != "--stack" && opt != "--algo") {
            argv[out++] = argv[i];
            continue;
        }
        if (!has_val) {
            if (i + 1 >= argc) {
                std::cerr << prog << ": " << opt << " needs a value\n";
                std::exit(2);
            }
            val = argv[++i];
        }
        if (opt == "--stack" && (val == "pooled" || val == "fixed"))
            c.stack = val == "pooled" ? stack_kind::pooled : stack_kind::fixed;
        else if (opt == "--algo" && (val == "rr" || val == "shared" || val == "ws"))
            c.algo = val == "rr" ? algo_kind::rr
                     : val == "shared" ? algo_kind::shared : algo_kind::ws,
            c.algo_given = true;
        else {
            std::cerr << prog << ": bad value '" << val << "' for " << opt
                      << " (--stack pooled|fixed, --algo rr|shared|ws)\n";
            std::exit(2);
        }
    }
    argc = out;
    argv[out] = nullptr;
    return c;
}

// install() makes the calling thread run the configured algorithm; with
// work_stealing, its constructor waits until all `threads` threads have.
inline void install(algo_kind a, unsigned threads)
{
    switch (a) {
    case algo_kind::rr:
        break;   // every thread starts with round_robin
    case algo_kind::shared:
        bf::use_scheduling_algorithm<bf::algo::shared_work>();
        break;
    case algo_kind::ws:
        bf::use_scheduling_algorithm<bf::algo::work_stealing>(threads);
        break;
    }
}

// The stack allocator handed to every fiber: a pointer to one of the two,
// so copies (one per fiber) share the pool.
class stacks {
public:
    explicit stacks(stack_kind k) : kind_(k) {}
    stacks(const stacks &) = delete;

    class ref {
    public:
        explicit ref(stacks *s) : s_(s) {}
        boost::context::stack_context allocate()
        {
            if (s_->kind_ == stack_kind::fixed)
                return s_->fixed_.allocate();
            std::lock_guard<std::mutex> lk(s_->mtx_);
            return s_->pooled_.allocate();
        }
        void deallocate(boost::context::stack_context &sc) noexcept
        {
            if (s_->kind_ == stack_kind::fixed)
                return s_->fixed_.deallocate(sc);
            std::lock_guard<std::mutex> lk(s_->mtx_);
            s_->pooled_.deallocate(sc);
        }

    private:
        stacks *s_;
    };
    ref get() { return ref(this); }

private:
    stack_kind kind_;
    std::mutex mtx_;
    bf::fixedsize_stack fixed_;
    bf::pooled_fixedsize_stack pooled_;
};

// A one-shot gate: wait() blocks the calling fiber until open().
class gate {
public:
    void wait()
    {
        std::unique_lock<bf::mutex> lk(mtx_);
        cv_.wait(lk, [this] { return open_; });
    }
    void open()
    {
        {
            std::lock_guard<bf::mutex> lk(mtx_);
            open_ = true;
        }
        cv_.notify_all();
    }

private:
    bf::mutex mtx_;
    bf::condition_variable cv_;
    bool open_ = false;
};

// A countdown (Go's WaitGroup): arrive() from each of `count` fibers, wait()
// until all have. Only the last arrival takes the lock; it returns true.
class countdown {
public:
    explicit countdown(std::uint64_t count) : left_(count) {}
    bool arrive()
    {
        if (left_.fetch_sub(1, std::memory_order_acq_rel) != 1)
            return false;
        std::lock_guard<bf::mutex> lk(mtx_);
        cv_.notify_all();
        return true;
    }
    void wait()
    {
        std::unique_lock<bf::mutex> lk(mtx_);
        cv_.wait(lk, [this] { return left_.load(std::memory_order_acquire) == 0; });
    }

private:
    std::atomic<std::uint64_t> left_;
    bf::mutex mtx_;
    bf::condition_variable cv_;
};

} // namespace fibercfg
