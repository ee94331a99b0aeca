// SPDX-License-Identifier: MIT
// tests/faults/oom_cxx.cc: C++ allocation under RLIMIT_AS. Every form of
// operator new throws std::bad_alloc when the limit is reached and its
// nothrow form returns nullptr; a new_handler that makes memory available
// (here: lifts the limit) lets the same new-expression succeed; a vector
// whose growth fails keeps its contents (strong guarantee); objects made
// before the limit survive it, and everything works once it is lifted.
// Linked against libhakozuna.so.
#include "check.h"
#include "testutil.h"
#include "squeeze.h"

#include <cstdint>
#include <new>
#include <string>
#include <vector>

static const std::size_t HEADROOM = 16 * MiB;
// More than the headroom plus what the allocator can give back when a
// mapping fails (hakozuna: the unused rest of its 64 MiB regions and its
// empty segments, arena.c's hz_arena_release), so that it must fail.
static const std::size_t HUGE_N = 256 * MiB;

// Called through volatile pointers so that no allocation is elided.
static void *(*volatile op_new)(std::size_t) = ::operator new;
static void *(*volatile op_new_arr)(std::size_t) = ::operator new[];
static void *(*volatile op_new_nt)(std::size_t, const std::nothrow_t &) noexcept = ::operator new;
static void *(*volatile op_new_arr_nt)(std::size_t, const std::nothrow_t &) noexcept = ::operator new[];
static void *(*volatile op_new_al)(std::size_t, std::align_val_t) = ::operator new;
static void *(*volatile op_new_al_nt)(std::size_t, std::align_val_t, const std::nothrow_t &) noexcept =
    ::operator new;

// Does `what(n)` throw std::bad_alloc? Anything else thrown fails the check.
template <class F> static bool throws_bad_alloc(F f) {
  try {
    void *p = f();
    ::operator delete(p);
    return false;
  } catch (const std::bad_alloc &) {
    return true;
  } catch (...) {
    CHECKF(false, "an exception other than std::bad_alloc was thrown");
    return false;
  }
}

// Every form for n bytes; the aligned ones only where no other size class
// can serve them (a small aligned request may use a class not yet full).
static void each_form_fails(std::size_t n, bool aligned_too) {
  const std::align_val_t al{4096};
  CHECKF(throws_bad_alloc([n] { return op_new(n); }), "operator new(%zu) did not throw", n);
  CHECKF(throws_bad_alloc([n] { return op_new_arr(n); }), "operator new[](%zu) did not throw", n);
  void *p = op_new_nt(n, std::nothrow);
  CHECKF(p == nullptr, "operator new(%zu, nothrow) = %p", n, p);
  p = op_new_arr_nt(n, std::nothrow);
  CHECKF(p == nullptr, "operator new[](%zu, nothrow) = %p", n, p);
  if (!aligned_too) return;
  CHECKF(throws_bad_alloc([n, al] { return op_new_al(n, al); }), "operator new(%zu, align) did not throw", n);
  p = op_new_al_nt(n, al, std::nothrow);
  CHECKF(p == nullptr, "operator new(%zu, align, nothrow) = %p", n, p);
}

static int handler_calls;
static void lift_limit() {
  handler_calls++;
  CHECK(unsqueeze() == 0);
}

TEST_MAIN() {
  squeeze_watchdog("oom_cxx", 60);
  // made before the limit: must survive it unchanged
  std::vector<std::string> kept;
  for (int i = 0; i < 1000; i++) kept.push_back(std::string(static_cast<std::size_t>(i % 300), char('a' + i % 26)));
  std::vector<char> vec(MiB);
  tu_fill(vec.data(), vec.size(), 7);
  std::vector<char *> small;
  small.reserve(1 << 20);

  if (!CHECK(squeeze(HEADROOM) == 0)) return 1;
  each_form_fails(HUGE_N, true);
  // vector growth that fails leaves the vector as it was
  CHECK(throws_bad_alloc([&vec] {
    vec.resize(HUGE_N);
    return static_cast<void *>(nullptr);
  }));
  CHECK(vec.size() == MiB && tu_verify(vec.data(), vec.size(), 7) == 0);

  // small objects until the limit: then every form fails for small sizes too
  bool hit = false;
  while (small.size() < small.capacity()) {
    try {
      char *p = new char[200];
      tu_fill(p, 200, small.size());
      small.push_back(p);
    } catch (const std::bad_alloc &) {
      hit = true;
      break;
    }
  }
  CHECKF(hit, "new char[200] never threw (%zu objects)", small.size());
  each_form_fails(200, false);
  for (std::size_t i = 0; i < small.size(); i++) CHECK(tu_verify(small[i], 200, i) == 0);

  // the new_handler protocol: called, lifts the limit, the retry succeeds
  std::set_new_handler(lift_limit);
  char *big = nullptr;
  try {
    big = new char[HUGE_N];
  } catch (const std::bad_alloc &) {
    CHECKF(false, "new char[%zu] threw although the new_handler lifted the limit", HUGE_N);
  }
  std::set_new_handler(nullptr);
  CHECKF(handler_calls == 1, "the new_handler was called %d times", handler_calls);
  if (big != nullptr) {
    tu_fill(big, HUGE_N, 3);
    CHECK(tu_verify(big, HUGE_N, 3) == 0);
    delete[] big;
  }

  // everything works again, and nothing made before changed
  for (std::size_t i = 0; i < small.size(); i++) delete[] small[i];
  small.clear();
  vec.resize(HUGE_N / 4);
  CHECK(tu_verify(vec.data(), MiB, 7) == 0);
  for (int i = 0; i < 1000; i++)
    CHECK(kept[static_cast<std::size_t>(i)] == std::string(static_cast<std::size_t>(i % 300), char('a' + i % 26)));
  void *p = op_new_al(HUGE_N, std::align_val_t{4096});
  CHECK(p != nullptr && (reinterpret_cast<std::uintptr_t>(p) & 4095) == 0);
  ::operator delete(p, std::align_val_t{4096});
  std::vector<std::string> after(100000, "after the limit");
  CHECK(after.back() == "after the limit");
  return 0;
}
