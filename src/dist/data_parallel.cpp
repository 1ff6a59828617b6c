// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// DistributedDataParallel and the default process group. Written against dist::ProcessGroup only,
// so they build without MPI; the MPI communicator lives in src/dist/.
#include <algorithm>
#include <mutex>
#include <utility>

#include <kten/dist/ddp.hpp>
#include <kten/dist/process_group.hpp>

#include "autograd/autograd.hpp"
#include "dispatch/dispatch.hpp"
#include "hooks.hpp"
#include "core/fail.hpp"
#include "core/storage.hpp"
#include "ops/transfer.hpp"

namespace kten {
namespace {

std::mutex& group_mutex() {
  static std::mutex m;
  return m;
}
std::shared_ptr<const dist::ProcessGroup>& group_slot() {
  static std::shared_ptr<const dist::ProcessGroup> group;
  return group;
}

// Copies `bytes` from byte `from_offset` of `from` to byte `to_offset` of `to`, on their devices.
void copy_at(const Tensor& from, std::size_t from_offset, const Tensor& to, std::size_t to_offset,
             std::size_t bytes) {
  detail::check_contiguous("DataParallel", from);  // parameters and gradients are kten's own, contiguous
  detail::check_contiguous("DataParallel", to);
  const detail::Storage src{detail::data_ptr<char>(from) + from_offset, bytes, from.device(), nullptr};
  const detail::Storage dst{detail::data_ptr<char>(to) + to_offset, bytes, to.device(), nullptr};
  detail::copy_bytes(src, dst, bytes);
}

}  // namespace

void detail::set_default_group(std::shared_ptr<const dist::ProcessGroup> group) {
  std::lock_guard<std::mutex> lock(group_mutex());
  group_slot() = std::move(group);
}

namespace dist {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::mean: return "mean";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "unknown";
}

namespace {
// What ProcessGroup::all_reduce_async returns by default: the blocking all_reduce has run.
class FinishedWork final : public Work {
 public:
  bool test() override { return true; }
  void wait() override {}
};
}  // namespace

std::unique_ptr<Work> ProcessGroup::all_reduce_async(const Tensor& t, ReduceOp op) const {
  all_reduce(t, op);
  return std::make_unique<FinishedWork>();
}

std::shared_ptr<const ProcessGroup> default_group() {
  std::lock_guard<std::mutex> lock(group_mutex());
  return group_slot();
}

DistributedDataParallel::DistributedDataParallel(nn::Module& module, std::shared_ptr<const ProcessGroup> group,
                                                 DDPOptions options)
    : module_(module), group_(std::move(group)), options_(options),
      hook_target_(std::make_shared<DistributedDataParallel*>(this)) {
  if (!group_) kten::detail::fail("DistributedDataParallel", "the process group is null");
  if (options_.bucket_bytes == 0) kten::detail::fail("DistributedDataParallel", "bucket_bytes must be > 0");
  // Not owned: the module outlives the wrapper (an aliasing pointer with no owner).
  register_wrapped(std::shared_ptr<nn::Module>(std::shared_ptr<nn::Module>(), &module_));
  set_device(module_.device());
  if (all_shaped()) broadcast_parameters();
  else broadcast_pending_ = true;
}

// Hooks left on the parameters find no wrapper and do nothing; all_reduces in flight are waited for
// by their Works' destructors, without touching the module (which may be gone already).
DistributedDataParallel::~DistributedDataParallel() { hook_target_.reset(); }

Tensor DistributedDataParallel::forward(const Tensor& input) {
  Tensor out = module_(input);
  if (broadcast_pending_) {
    // The lazy layers have their shapes now: take rank 0's parameters, then compute again with them,
    // so that the first step is the same on every rank (and as in one process).
    broadcast_parameters();
    broadcast_pending_ = false;
    out = module_(input);
  }
  if (options_.overlap && is_grad_enabled()) arm();
  return out;
}

void DistributedDataParallel::to(const Device& device) {
  finish_in_flight();
  Module::to(device);
  buckets_.clear();
}

void DistributedDataParallel::to(DType dtype) {
  finish_in_flight();
  Module::to(dtype);
  buckets_.clear();
}

void DistributedDataParallel::parameters_loaded() {
  finish_in_flight();
  buckets_.clear();
}

void DistributedDataParallel::synchronize_gradients() {
  if (!armed_) {  // no forward through the wrapper armed the hooks: the whole exchange is now
    finish_in_flight();
    refresh_buckets();
    begin_round();
  }
  armed_ = false;
  start_ready(/*all=*/true);
  finish_in_flight();
}

void DistributedDataParallel::broadcast_parameters() {
  finish_in_flight();
  refresh_buckets();
  for (Bucket& b : buckets_) {
    pack(b, Part::value);
    group_->broadcast(b.flat, 0);
    unpack(b, Part::value);
  }
  broadcast_buffers();
}

// Every buffer's bytes in one flat float64 tensor (the collectives move float dtypes; a broadcast
// copies the bits), broadcast, and copied back: int64 counters and boolean masks included.
void DistributedDataParallel::broadcast_buffers() {
  const std::vector<Tensor> buffers = module_.buffers();
  std::size_t bytes = 0;
  for (const Tensor& b : buffers) bytes += b.nbytes();
  if (bytes == 0) return;
  const Tensor flat = empty({static_cast<std::int64_t>((bytes + 7) / 8)}, device(), float64);
  std::size_t offset = 0;
  for (const Tensor& b : buffers) {
    copy_at(b.contiguous(), 0, flat, offset, b.nbytes());
    offset += b.nbytes();
  }
  group_->broadcast(flat, 0);
  offset = 0;
  for (const Tensor& b : buffers) {
    if (b.is_contiguous()) {
      copy_at(flat, offset, b, 0, b.nbytes());
    } else {  // a strided buffer: through a contiguous copy
      const Tensor c = empty(b.shape(), b.device(), b.dtype());
      copy_at(flat, offset, c, 0, b.nbytes());
      b.copy_from(c);
    }
    offset += b.nbytes();
  }
}

bool DistributedDataParallel::all_shaped() {
  for (const auto& [name, p] : module_.named_parameters())
    if (!p->value.defined()) return false;
  return true;
}

// Buckets hold the parameters in reverse registration order, the order in which backward finishes
// their gradients; consecutive parameters of one dtype share a bucket up to bucket_bytes. Every rank
// registers its parameters in the same order, so every rank builds the same buckets. They are built
// again when the parameters changed (moved, reloaded, layers added) since they were made.
void DistributedDataParallel::refresh_buckets() {
  if (!all_shaped())
    kten::detail::fail("DistributedDataParallel", "some parameters have no shape yet (lazy layers); "
                       "call forward once before averaging gradients");
  auto named = module_.named_parameters();
  std::reverse(named.begin(), named.end());
  std::vector<nn::Parameter*> current, bucketed;
  for (const auto& [name, p] : named) current.push_back(p);
  bool stale = false;
  for (const Bucket& b : buckets_) {
    std::size_t bytes = 0;
    for (nn::Parameter* p : b.parameters) {
      bucketed.push_back(p);
      bytes += p->value.nbytes();
      stale = stale || p->value.device() != b.flat.device() || p->value.dtype() != b.flat.dtype();
    }
    stale = stale || bytes != b.flat.nbytes();
  }
  set_device(module_.device());
  if (!stale && bucketed == current) return;

  buckets_.clear();
  Bucket open;
  std::size_t bytes = 0;
  auto close = [&] {
    if (open.parameters.empty()) return;
    const DType dtype = open.parameters.front()->value.dtype();
    open.flat = empty({static_cast<std::int64_t>(bytes / dtype_size(dtype))}, device(), dtype);
    buckets_.push_back(std::move(open));
    open = Bucket();
    bytes = 0;
  };
  for (const auto& [name, p] : named) {
    const std::size_t n = p->value.nbytes();
    if (!open.parameters.empty() &&
        (p->value.dtype() != open.parameters.front()->value.dtype() || bytes + n > options_.bucket_bytes))
      close();
    open.parameters.push_back(p);
    open.names.push_back(name);
    bytes += n;
  }
  close();
}

// Copies the bucket's parameters' values or gradients into its flat tensor (on the device).
void DistributedDataParallel::pack(Bucket& b, Part part) {
  std::size_t offset = 0;
  for (nn::Parameter* p : b.parameters) {
    const Tensor& t = part == Part::grad ? p->grad : p->value;
    if (!t.defined()) kten::detail::fail("DistributedDataParallel", "a parameter has no gradient tensor");
    copy_at(t, 0, b.flat, offset, t.nbytes());
    offset += t.nbytes();
  }
}

// The reverse of pack().
void DistributedDataParallel::unpack(Bucket& b, Part part) {
  std::size_t offset = 0;
  for (nn::Parameter* p : b.parameters) {
    const Tensor& t = part == Part::grad ? p->grad : p->value;
    copy_at(b.flat, offset, t, 0, t.nbytes());
    offset += t.nbytes();
  }
}

// A parameter that requires no grad (frozen) gets no hook: it is ready from the start.
void DistributedDataParallel::begin_round() {
  next_to_start_ = 0;
  for (Bucket& b : buckets_) {
    b.ready.assign(b.parameters.size(), false);
    b.waiting = 0;
    for (std::size_t i = 0; i < b.parameters.size(); ++i) {
      b.ready[i] = !b.parameters[i]->value.requires_grad();
      if (!b.ready[i]) ++b.waiting;
    }
  }
}

// Hooks every parameter so that the next backward pass reports when its gradient is final.
void DistributedDataParallel::arm() {
  finish_in_flight();  // a backward since the last forward with no synchronize_gradients() (accumulation)
  refresh_buckets();
  begin_round();
  const std::weak_ptr<DistributedDataParallel*> target = hook_target_;
  for (std::size_t bucket = 0; bucket < buckets_.size(); ++bucket)
    for (std::size_t index = 0; index < buckets_[bucket].parameters.size(); ++index) {
      const Tensor& value = buckets_[bucket].parameters[index]->value;
      if (buckets_[bucket].ready[index]) continue;  // frozen
      kten::detail::set_grad_ready_hook(value, [target, bucket, index] {
        if (const auto ddp = target.lock()) (*ddp)->gradient_ready(bucket, index);
      });
    }
  armed_ = true;
}

// A parameter's gradient is final for this backward pass: start the buckets that are complete, in
// order, and let MPI move those in flight meanwhile.
void DistributedDataParallel::gradient_ready(std::size_t bucket, std::size_t index) {
  if (!armed_) return;
  Bucket& b = buckets_[bucket];
  if (bucket < next_to_start_)
    kten::detail::fail("DistributedDataParallel", "backward changed the gradient of ", b.names[index],
                       " after its bucket's all_reduce had started: two backward passes after one forward "
                       "through the wrapper. Run forward through it before each backward, or set "
                       "DDPOptions::overlap = false and call synchronize_gradients() after the last backward");
  if (!b.ready[index]) {
    b.ready[index] = true;
    --b.waiting;
  }
  try {
    start_ready(/*all=*/false);
  } catch (...) {
    armed_ = false;  // synchronize_gradients() then redoes the whole exchange
    throw;
  }
  for (Bucket& in_flight : buckets_)
    if (in_flight.work) in_flight.work->test();
}

// Starts the next buckets in order: those whose gradients are all final, or all of them.
void DistributedDataParallel::start_ready(bool all) {
  while (next_to_start_ < buckets_.size() && (all || buckets_[next_to_start_].waiting == 0)) {
    Bucket& b = buckets_[next_to_start_];
    pack(b, Part::grad);
    b.work = group_->all_reduce_async(b.flat, ReduceOp::mean);
    ++next_to_start_;
  }
}

// Completes the buckets a backward pass started: their averages go to the gradients, to which a
// later backward adds (the average of a sum is the sum of the averages).
void DistributedDataParallel::finish_in_flight() {
  armed_ = false;
  for (Bucket& b : buckets_) {
    if (!b.work) continue;
    b.work->wait();
    b.work.reset();
    unpack(b, Part::grad);
  }
}

}  // namespace dist
}  // namespace kten
