// SPDX-License-Identifier: Apache-2.0
// Software prefetches the compiler cannot delete.
//
// GCC (12, -O2 and -O3) treats __builtin_prefetch as free of side effects. A function whose
// only effect is a prefetch (such as a member that picks which array to prefetch from) is then
// found pure by its IPA analysis, and a call to it whose result is unused is deleted as dead code
// before it is inlined: the prefetch silently vanishes. Until 2026-11-22 that happened to every
// adjacency prefetch of the CPU sampler. These helpers issue the instruction from an `asm
// volatile`, which no pass may remove, wherever they are called from. (Elsewhere than x86 they
// fall back to the builtin, with the same caveat.)
#pragma once

namespace tessera {

/// Requests the cache line holding `p` into every level (x86 PREFETCHT0). For data used within
/// the next few hundred instructions; anything further ahead belongs in prefetch_l2.
inline void prefetch_l1(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

/// Requests the cache line holding `p` into L2 and below, not L1 (x86 PREFETCHT1). For data used
/// a long while later: a stream of such lines does not evict the L1-resident working set.
inline void prefetch_l2(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

}  // namespace tessera
