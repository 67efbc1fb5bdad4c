// coro.hpp — a small single-threaded C++20 coroutine scheduler built on
// symmetric transfer: the "C++20 coroutines" peer of the weft benchmarks
// (coro_bench.cpp). Written for this project; about as much as a user-level
// threading runtime needs, and nothing more:
//
//   coro::task<T>      a lazy coroutine producing T. co_await on a task joins
//                      it: one never started runs right there, like a call;
//                      one already spawned is waited for.
//   coro::scheduler    an intrusive FIFO ready queue and a run loop.
//                      spawn(task) queues a task and hands it back: keep it to
//                      join it later, drop it to detach it. run() resumes ready
//                      coroutines until none remains.
//   coro::yield()      co_await it: go to the back of the ready queue.
//   coro::mailbox<T>   one slot, one producer, one consumer: co_await recv()
//                      suspends while it is empty, co_await send(v) while full.
//   coro::event        a one-shot gate: co_await suspends until set().
//
// How it switches. Every suspension is a symmetric transfer: await_suspend()
// returns the handle of the coroutine to run next (the front of the ready
// queue) and the compiler resumes it as a tail call, so coroutines hand the
// CPU to each other directly and the stack does not grow. Only when the ready
// queue is empty does a coroutine transfer to std::noop_coroutine(), which
// returns from the resume() that the run loop made; the loop then finds the
// queue empty and run() returns. A finishing task transfers to its joiner if
// one waits, else to the next ready coroutine.
//
// Compiler note: clang makes the transfer a guaranteed tail call at every
// optimisation level; gcc 12 only through sibling-call optimisation (-O2,
// -O3, -Os). Built by gcc at -O0/-O1, with -fno-optimize-sibling-calls or with
// -fsanitize=address, every switch nests a stack frame and a long run
// overflows the stack.
//
// What a switch costs: no allocation and no system call. The queue link lives
// in each coroutine's promise (a coroutine is in at most one queue at a time:
// the ready queue, an event's waiters, or nowhere while it runs or waits on a
// mailbox), and a waiter is the awaiter object inside the suspended frame.
// Frames are allocated by the compiler's operator new, once per coroutine.
//
// Limits, on purpose: one thread (nothing is synchronised: a scheduler and
// everything its coroutines touch belong to the thread that calls run());
// coroutines awaiting these awaitables must themselves be coro::tasks (their
// promise carries the queue link); a task is joined at most once; a mailbox
// has one producer and one consumer. The scheduler does not own frames: a
// coroutine still suspended when the program ends is simply never resumed.
//
// Exceptions: one escaping a task is rethrown by co_await in its joiner; one
// escaping a detached task calls std::terminate (there is nobody to tell).
#pragma once

#include <cassert>
#include <concepts>
#include <coroutine>
#include <exception>
#include <optional>
#include <utility>

namespace coro {

class scheduler;
template <class T = void> class task;

namespace detail {

// What every coro::task's promise has: the queue link and the bookkeeping
// that lets a task be spawned, joined or detached.
struct promise_base {
    promise_base *next = nullptr;          // link in the ready queue or an event's waiters
    scheduler *sched = nullptr;            // set when the task starts
    std::coroutine_handle<> self;          // this coroutine, type-erased (set by get_return_object)
    std::coroutine_handle<> continuation;  // the coroutine joining this one, if any
    std::exception_ptr error;              // what escaped the body, if anything
    bool started = false;                  // queued or resumed at least once: no longer lazy
    bool detached = false;                 // no task object owns the frame: free it at the end

    // Lazy: the body does not run until the task is spawned or awaited.
    std::suspend_always initial_suspend() const noexcept { return {}; }

    struct final_awaiter {
        bool await_ready() const noexcept { return false; }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept;
        void await_resume() const noexcept {}
    };
    final_awaiter final_suspend() const noexcept { return {}; }

    void unhandled_exception() noexcept { error = std::current_exception(); }
};

// An intrusive FIFO of promises (the ready queue, an event's waiters).
class fifo {
public:
    fifo() = default;
    fifo(const fifo &) = delete;             // tail_ points into the object itself
    fifo &operator=(const fifo &) = delete;

    bool empty() const noexcept { return head_ == nullptr; }

    void push(promise_base &p) noexcept
    {
        p.next = nullptr;
        *tail_ = &p;
        tail_ = &p.next;
    }

    promise_base *pop() noexcept
    {
        promise_base *p = head_;
        if (p) {
            head_ = p->next;
            if (!head_)
                tail_ = &head_;
        }
        return p;
    }

private:
    promise_base *head_ = nullptr;
    promise_base **tail_ = &head_;
};

template <class T>
struct promise final : promise_base {
    std::optional<T> value;

    task<T> get_return_object() noexcept;
    template <class U>
    void return_value(U &&v) { value.emplace(std::forward<U>(v)); }
    T take()
    {
        if (error)
            std::rethrow_exception(error);
        return std::move(*value);
    }
};

template <>
struct promise<void> final : promise_base {
    task<void> get_return_object() noexcept;
    void return_void() const noexcept {}
    void take() const
    {
        if (error)
            std::rethrow_exception(error);
    }
};

} // namespace detail

// The awaitables below can only be awaited from a coro::task, whose promise
// carries the queue link and the scheduler.
template <class P>
concept task_promise = std::derived_from<P, detail::promise_base>;

class scheduler {
public:
    scheduler() = default;
    scheduler(const scheduler &) = delete;   // promises point at it
    scheduler &operator=(const scheduler &) = delete;

    // spawn() queues a task that was never started (at the back of the ready
    // queue; it first runs from run() or when something ahead of it suspends)
    // and gives it back: co_await the result to join it, or drop it to detach.
    template <class T>
    task<T> spawn(task<T> t) noexcept;

    // run() resumes ready coroutines until none remains (every coroutine has
    // finished or waits for something only another thread could do: nothing).
    void run()
    {
        while (detail::promise_base *p = ready_.pop())
            p->self.resume();   // returns only once the ready queue is empty
    }

    // make_ready() puts a suspended coroutine at the back of the ready queue.
    void make_ready(detail::promise_base &p) noexcept { ready_.push(p); }

    // next() is where a suspending coroutine transfers to: the front of the
    // ready queue, or back to run() when there is nothing to run.
    std::coroutine_handle<> next() noexcept
    {
        if (detail::promise_base *p = ready_.pop())
            return p->self;
        return std::noop_coroutine();
    }

private:
    detail::fifo ready_;
};

template <class T>
class task {
public:
    using promise_type = detail::promise<T>;
    using handle = std::coroutine_handle<promise_type>;

    task() noexcept = default;
    task(task &&o) noexcept : h_(std::exchange(o.h_, {})) {}
    task &operator=(task &&o) noexcept
    {
        if (this != &o) {
            release();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    ~task() { release(); }

    bool done() const noexcept { return h_ && h_.done(); }

    // co_await task: join it and get its result (or its exception).
    struct awaiter {
        handle h;

        bool await_ready() const noexcept { return h.done(); }

        template <task_promise P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> joiner) noexcept
        {
            promise_type &child = h.promise();
            assert(!child.continuation && "a task is joined at most once");
            child.continuation = joiner;
            if (child.started)   // spawned: it will transfer back to us when it ends
                return joiner.promise().sched->next();
            child.started = true;   // lazy and never started: run it now, like a call
            child.sched = joiner.promise().sched;
            return h;
        }

        T await_resume() { return h.promise().take(); }
    };
    awaiter operator co_await() const noexcept
    {
        assert(h_ && "co_await on an empty task");
        return awaiter{h_};
    }

private:
    friend struct detail::promise<T>;
    friend class scheduler;
    explicit task(handle h) noexcept : h_(h) {}

    // A task never started or already finished is destroyed with its owner;
    // one still running is detached and frees its own frame when it ends.
    void release() noexcept
    {
        if (!h_)
            return;
        promise_type &p = h_.promise();
        if (p.started && !h_.done()) {
            p.detached = true;
            p.continuation = nullptr;   // whoever would have joined it is going away
        } else {
            h_.destroy();
        }
        h_ = {};
    }

    handle h_;
};

template <class T>
task<T> scheduler::spawn(task<T> t) noexcept
{
    auto &p = t.h_.promise();
    assert(!p.started && "spawn() takes a task that was never started");
    p.started = true;
    p.sched = this;
    ready_.push(p);
    return t;
}

namespace detail {

template <class T>
task<T> promise<T>::get_return_object() noexcept
{
    auto h = std::coroutine_handle<promise>::from_promise(*this);
    self = h;
    return task<T>(h);
}

inline task<void> promise<void>::get_return_object() noexcept
{
    auto h = std::coroutine_handle<promise>::from_promise(*this);
    self = h;
    return task<void>(h);
}

// A finishing task hands the CPU to its joiner if one waits, else to the next
// ready coroutine. A detached task frees its own frame first: destroying a
// coroutine suspended at its final point from inside await_suspend is allowed,
// as long as nothing in the frame (this awaiter included) is touched after.
template <class P>
std::coroutine_handle<> promise_base::final_awaiter::await_suspend(std::coroutine_handle<P> h) noexcept
{
    promise_base &p = h.promise();
    if (p.continuation)
        return p.continuation;
    std::coroutine_handle<> next = p.sched->next();
    if (p.detached) {
        if (p.error)
            std::terminate();   // an exception escaped a task nobody will join
        h.destroy();
    }
    return next;
}

} // namespace detail

// co_await coro::yield(): let every other ready coroutine run once.
struct yield_awaiter {
    bool await_ready() const noexcept { return false; }
    template <task_promise P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept
    {
        scheduler &s = *h.promise().sched;
        s.make_ready(h.promise());
        return s.next();   // never empty: we are in it (alone: we go on at once)
    }
    void await_resume() const noexcept {}
};
inline yield_awaiter yield() noexcept { return {}; }

// mailbox<T>: one slot between one producer and one consumer.
//   co_await box.recv()   takes the value; suspends while the box is empty.
//   co_await box.send(v)  leaves v; suspends while the slot is full.
// A sender that finds the receiver waiting hands the value straight to it and
// makes it ready; a receiver that empties the slot under a waiting sender
// moves the sender's value in and makes the sender ready. Neither wake-up
// switches by itself: the woken coroutine runs when its turn in the ready
// queue comes, and the one that woke it goes on.
template <class T>
class mailbox {
    struct send_awaiter;

    struct recv_awaiter {
        mailbox &box;
        std::optional<T> got {};                   // handed over by a sender while we waited
        detail::promise_base *who = nullptr;

        bool await_ready() const noexcept { return box.slot_.has_value(); }

        template <task_promise P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept
        {
            assert(!box.receiver_ && "a mailbox has one consumer");
            who = &h.promise();
            box.receiver_ = this;
            return who->sched->next();
        }

        T await_resume()
        {
            if (got)
                return std::move(*got);
            T v = std::move(*box.slot_);
            box.slot_.reset();
            if (send_awaiter *s = std::exchange(box.sender_, nullptr)) {
                box.slot_.emplace(std::move(s->value));   // room again: take the waiting sender's
                s->who->sched->make_ready(*s->who);
            }
            return v;
        }
    };

    struct send_awaiter {
        mailbox &box;
        T value;
        detail::promise_base *who = nullptr;

        // Delivers at once when it can; the awaiter suspends only on a full slot.
        bool await_ready()
        {
            if (recv_awaiter *r = std::exchange(box.receiver_, nullptr)) {
                r->got.emplace(std::move(value));
                r->who->sched->make_ready(*r->who);
                return true;
            }
            if (!box.slot_) {
                box.slot_.emplace(std::move(value));
                return true;
            }
            return false;
        }

        template <task_promise P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept
        {
            assert(!box.sender_ && "a mailbox has one producer");
            who = &h.promise();
            box.sender_ = this;
            return who->sched->next();
        }

        void await_resume() const noexcept {}
    };

public:
    mailbox() = default;
    mailbox(const mailbox &) = delete;   // waiters point at it
    mailbox &operator=(const mailbox &) = delete;

    [[nodiscard]] recv_awaiter recv() noexcept { return recv_awaiter{*this}; }
    [[nodiscard]] send_awaiter send(T v) { return send_awaiter{*this, std::move(v)}; }
    bool full() const noexcept { return slot_.has_value(); }

private:
    std::optional<T> slot_;
    recv_awaiter *receiver_ = nullptr;   // waits on an empty slot
    send_awaiter *sender_ = nullptr;     // waits on a full slot
};

// event: a one-shot gate. co_await ev suspends until ev.set(), which makes
// every waiter ready in the order it arrived; after set() co_await goes on at
// once.
class event {
public:
    event() = default;
    event(const event &) = delete;
    event &operator=(const event &) = delete;

    struct awaiter {
        event &ev;
        bool await_ready() const noexcept { return ev.set_; }
        template <task_promise P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept
        {
            ev.waiters_.push(h.promise());
            return h.promise().sched->next();
        }
        void await_resume() const noexcept {}
    };
    awaiter operator co_await() noexcept { return awaiter{*this}; }

    void set() noexcept
    {
        set_ = true;
        while (detail::promise_base *p = waiters_.pop())
            p->sched->make_ready(*p);
    }
    bool is_set() const noexcept { return set_; }

private:
    bool set_ = false;
    detail::fifo waiters_;
};

} // namespace coro
