// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: std::allocate_shared of the small objects every operation makes (a tensor's
// TensorImpl, an allocation's Storage) from a free list per thread and block size, so that the
// small-op path pays no malloc/free for them. A block freed on another thread joins that thread's
// list; a list keeps at most kPoolBlocks blocks, gives the rest to ::operator delete, and frees
// its blocks when its thread ends (blocks freed after that, in static destructors, go straight to
// ::operator delete).
#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace kten::detail {

inline constexpr int kPoolBlocks = 256;

/// \brief The free blocks of `Size` bytes of this thread.
template <std::size_t Size>
class FreeBlocks {
 public:
  static void* take() {
    if (!ended()) {
      FreeBlocks& self = mine();
      if (self.head_) {
        Node* n = self.head_;
        self.head_ = n->next;
        --self.count_;
        return n;
      }
    }
    return ::operator new(Size);
  }
  static void give(void* p) {
    if (!ended()) {
      FreeBlocks& self = mine();
      if (self.count_ < kPoolBlocks) {
        self.head_ = new (p) Node{self.head_};
        ++self.count_;
        return;
      }
    }
    ::operator delete(p);
  }
  ~FreeBlocks() {
    ended() = true;
    while (head_) {
      Node* n = head_;
      head_ = n->next;
      ::operator delete(n);
    }
  }

 private:
  struct Node {
    Node* next;
  };
  static_assert(Size >= sizeof(Node), "a block holds at least the free list's link");
  static FreeBlocks& mine() {
    thread_local FreeBlocks blocks;
    return blocks;
  }
  // Trivially destructible, so it can still be read while (and after) the thread's lists go.
  static bool& ended() {
    thread_local bool value = false;
    return value;
  }
  Node* head_ = nullptr;
  int count_ = 0;
};

/// \brief The allocator allocate_shared rebinds to its control block: single objects from FreeBlocks.
template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n != 1 || alignof(T) > alignof(std::max_align_t)) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(FreeBlocks<sizeof(T)>::take());
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n != 1 || alignof(T) > alignof(std::max_align_t)) return ::operator delete(p);
    FreeBlocks<sizeof(T)>::give(p);
  }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const PoolAllocator<U>&) const noexcept { return false; }
};

// Under AddressSanitizer (or ThreadSanitizer) every block comes from and goes back to the heap,
// so that the sanitizer sees a use after free.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KTEN_POOL_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KTEN_POOL_OFF 1
#endif
#endif

/// \brief std::make_shared<T>(args...), its one block from this thread's free list.
template <class T, class... Args>
std::shared_ptr<T> make_pooled(Args&&... args) {
#ifdef KTEN_POOL_OFF
  return std::make_shared<T>(std::forward<Args>(args)...);
#else
  return std::allocate_shared<T>(PoolAllocator<T>(), std::forward<Args>(args)...);
#endif
}

}  // namespace kten::detail
