// DistributedDataParallel and the default process group. Written against dist::ProcessGroup only,
// so they build without MPI; the MPI communicator lives in src/dist/.
#include <mutex>
#include <utility>

#include <kten/dist/ddp.hpp>
#include <kten/dist/process_group.hpp>

#include "dispatch.hpp"
#include "dist/hooks.hpp"
#include "fail.hpp"
#include "storage.hpp"

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

std::shared_ptr<const ProcessGroup> default_group() {
  std::lock_guard<std::mutex> lock(group_mutex());
  return group_slot();
}

DistributedDataParallel::DistributedDataParallel(nn::Module& module, std::shared_ptr<const ProcessGroup> group,
                                                 DDPOptions options)
    : module_(module), group_(std::move(group)), options_(options) {
  if (!group_) kten::detail::fail("DistributedDataParallel", "the process group is null");
  if (options_.bucket_bytes == 0) kten::detail::fail("DistributedDataParallel", "bucket_bytes must be > 0");
  set_device(module_.device());
  if (all_shaped()) broadcast_parameters();
  else broadcast_pending_ = true;
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  Tensor out = module_(input);
  if (broadcast_pending_) {
    // The lazy layers have their shapes now: take rank 0's parameters, then compute again with them,
    // so that the first step is the same on every rank (and as in one process).
    broadcast_parameters();
    broadcast_pending_ = false;
    out = module_(input);
  }
  return out;
}

Tensor DistributedDataParallel::backward(const Tensor& grad_output) {
  Tensor grad_input = module_.backward(grad_output);
  synchronize_gradients();
  return grad_input;
}

void DistributedDataParallel::to(const Device& device) {
  module_.to(device);
  set_device(device);
  buckets_.clear();
}

std::vector<nn::NamedParameter> DistributedDataParallel::named_parameters() { return module_.named_parameters(); }

void DistributedDataParallel::parameters_loaded() {
  module_.parameters_loaded();
  buckets_.clear();
}

void DistributedDataParallel::synchronize_gradients() { exchange(Part::grad); }

void DistributedDataParallel::broadcast_parameters() { exchange(Part::value); }

bool DistributedDataParallel::all_shaped() {
  for (const auto& [name, p] : module_.named_parameters())
    if (!p->value.defined()) return false;
  return true;
}

// Consecutive parameters of one dtype share a bucket up to bucket_bytes; every rank registers its
// parameters in the same order, so every rank builds the same buckets.
void DistributedDataParallel::build_buckets() {
  buckets_.clear();
  std::vector<nn::Parameter*> members;
  std::size_t bytes = 0;
  auto close = [&] {
    if (members.empty()) return;
    const DType dtype = members.front()->value.dtype();
    const auto elements = static_cast<std::int64_t>(bytes / dtype_size(dtype));
    buckets_.push_back({std::move(members), empty({elements}, device(), dtype)});
    members.clear();
    bytes = 0;
  };
  for (const auto& [name, p] : module_.named_parameters()) {
    const std::size_t n = p->value.nbytes();
    if (!members.empty() && (p->value.dtype() != members.front()->value.dtype() || bytes + n > options_.bucket_bytes))
      close();
    members.push_back(p);
    bytes += n;
  }
  close();
}

void DistributedDataParallel::exchange(Part part) {
  if (!all_shaped())
    kten::detail::fail("DistributedDataParallel", "some parameters have no shape yet (lazy layers); "
                       "call forward once before averaging gradients");
  // Rebuild when the parameters changed (moved, reloaded, layers added) since the buckets were made.
  std::vector<nn::Parameter*> current;
  for (const auto& [name, p] : module_.named_parameters()) current.push_back(p);
  std::vector<nn::Parameter*> bucketed;
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
  if (stale || bucketed != current) build_buckets();
  set_device(module_.device());

  for (const Bucket& b : buckets_) {
    std::size_t offset = 0;
    for (nn::Parameter* p : b.parameters) {
      const Tensor& t = part == Part::grad ? p->grad : p->value;
      if (!t.defined()) kten::detail::fail("DistributedDataParallel", "a parameter has no gradient tensor");
      copy_at(t, 0, b.flat, offset, t.nbytes());
      offset += t.nbytes();
    }
    if (part == Part::grad) group_->all_reduce(b.flat, ReduceOp::mean);
    else group_->broadcast(b.flat, 0);
    offset = 0;
    for (nn::Parameter* p : b.parameters) {
      const Tensor& t = part == Part::grad ? p->grad : p->value;
      copy_at(b.flat, offset, t, 0, t.nbytes());
      offset += t.nbytes();
    }
  }
}

}  // namespace dist
}  // namespace kten
