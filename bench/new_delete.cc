// SPDX-License-Identifier: MIT
/* new_delete ITERS [SEED]
 *
 * C++ objects made with new and destroyed with delete, the way compiled C++
 * calls the allocator: operator new(size_t) and, since C++14, the sized
 * operator delete(void *, size_t) for objects of a complete class type. A
 * table of 256 slots of a polymorphic base class; each iteration draws one
 * random number: an occupied slot's object is deleted, an empty one gets a
 * new object of one of four sizes (24, 56, 136 and 512 bytes with the
 * vtable pointer). Not in the suite: used under callgrind to count the
 * instructions of a new+delete pair (docs/perf.md §31), e.g.
 *   LD_PRELOAD=$LIB valgrind --tool=callgrind --toggle-collect='run(long)' \
 *     build/bench-bin/new_delete 2000000
 * The loop's own instructions are the same under every allocator: compare
 * the totals. Prints the number of pairs. */
#include <cstdio>
#include <cstdlib>
#include <cstdint>

namespace {
struct Base {
  virtual ~Base() {}
};
template <int N> struct Obj : Base {
  char bytes[N];
};

uint64_t state = 88172645463325252ull;
inline uint64_t next_random() {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}
}  // namespace

__attribute__((noinline)) long run(long iters) {
  Base *slots[256] = {};
  long pairs = 0;
  for (long i = 0; i < iters; i++) {
    uint64_t x = next_random();
    Base *&slot = slots[x & 255];
    if (slot != nullptr) {
      delete slot;
      slot = nullptr;
      pairs++;
      continue;
    }
    switch ((x >> 8) & 3) {
      case 0: slot = new Obj<16>; break;
      case 1: slot = new Obj<48>; break;
      case 2: slot = new Obj<128>; break;
      default: slot = new Obj<504>; break;
    }
  }
  for (Base *&slot : slots)
    if (slot != nullptr) {
      delete slot;
      pairs++;
    }
  return pairs;
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 2000000;
  if (argc > 2) state = strtoull(argv[2], nullptr, 0) | 1;
  printf("new_delete: %ld new+delete pairs\n", run(iters));
  return 0;
}
