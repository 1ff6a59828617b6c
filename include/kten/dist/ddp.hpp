// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file dist/ddp.hpp
/// \brief kten::dist::DistributedDataParallel: one model trained by several ranks, each on its
/// share of every batch, with gradients averaged by bucketed all_reduce (PyTorch's DDP).

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <kten/dist/process_group.hpp>
#include <kten/nn/module.hpp>

namespace kten::dist {

/// \brief Options of DistributedDataParallel.
struct DDPOptions {
  /// \brief Gradients are copied into flat buckets of at most this many bytes (a larger parameter
  /// gets a bucket of its own) and each bucket is averaged with one all_reduce. PyTorch's
  /// default, bucket_cap_mb = 25.
  std::size_t bucket_bytes = std::size_t(25) << 20;
  /// \brief Overlaps the gradient exchange with backward, as PyTorch's DDP: after a forward
  /// through the wrapper with grad mode on, each bucket's all_reduce starts once backward has
  /// finished every gradient in it and the buckets before it have started, and
  /// synchronize_gradients() waits for those in flight. false: synchronize_gradients() does the
  /// whole exchange after backward. With one backward per synchronize_gradients(), the same bits.
  bool overlap = true;
};

/// \brief Wraps any nn::Module so that every rank of a group trains the same model.
///
/// - Construction broadcasts rank 0's parameters and buffers to every rank (a collective: every
///   rank constructs its wrapper at the same point; buffers as PyTorch's broadcast_buffers).
///   Parameters a lazy layer has not shaped yet are broadcast right after the first forward call,
///   which every rank makes at the same step.
/// - Gradients are averaged over the ranks in flat buckets, filled in reverse registration order
///   (the order backward finishes them): each bucket's gradients are copied into it on the device,
///   it is averaged with one all_reduce(mean), buckets start in the same order on every rank, and
///   the results are copied back. With DDPOptions::overlap (the default), a bucket starts during
///   backward once its gradients are final, while backward computes the next ones; call
///   synchronize_gradients() (the Trainer does) before the optimiser step, which
///   starts what is left and waits for the rest. Every rank's backward must reach the same
///   parameters (a bucket with a gradient no backward reaches starts in synchronize_gradients(),
///   and so do the buckets after it), and one forward through the wrapper is followed by at most
///   one backward pass (a second one, with retain_graph, throws kten::Error when it reaches a
///   bucket already started; that gradient is then wrong). With gradient accumulation (several
///   forward/backward pairs, then synchronize_gradients()), each backward exchanges its
///   gradients: the sum is right, but costs one exchange per backward and may differ from the
///   exchange of the sum in the last bits.
/// - The module is the wrapper's inner module (Module::register_wrapped): parameters, buffers,
///   names, state_dict(), save(), load(), train() and to() are the module's own, so a checkpoint
///   written through the wrapper loads into the bare module and back.
///
/// The wrapper refers to `module` (which must outlive it); the optimiser keeps stepping the
/// module itself. With a loss that averages over the batch, averaging the ranks' gradients of
/// equal-sized per-rank batches gives the gradient of their union, so N ranks with batch B train
/// as one process with batch N*B (see data::Shard).
class DistributedDataParallel : public nn::Module {
 public:
  /// \brief Wraps `module` for training over `group`; broadcasts rank 0's parameters.
  DistributedDataParallel(nn::Module& module, std::shared_ptr<const ProcessGroup> group,
                          DDPOptions options = {});
  /// \brief Waits for the all_reduces in flight (their results are dropped: the module's gradients
  /// are left as they are); the parameters' hooks become inert.
  ~DistributedDataParallel() override;
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// \brief The module's forward; after the first call, broadcasts the parameters it shaped. With
  /// overlap and grad mode on, the next backward pass starts the buckets' all_reduces.
  Tensor forward(const Tensor& input) override;
  /// \brief Moves the module's parameters and buffers to `device` (after the all_reduces in flight).
  void to(const Device& device) override;
  /// \brief Casts the module's float parameters and buffers to `dtype` (after the all_reduces in flight).
  void to(DType dtype) override;
  /// \brief "DistributedDataParallel".
  std::string name() const override { return "DistributedDataParallel"; }
  /// \brief Finishes the all_reduces in flight: the parameters were replaced.
  void parameters_loaded() override;

  /// \brief Averages every gradient over the ranks: one all_reduce(mean) per bucket, those that
  /// backward started already included; returns when every gradient holds the average. The
  /// Trainer calls it; after loss.backward(), call it yourself before the optimiser step.
  void synchronize_gradients();
  /// \brief Makes every rank's parameters and buffers equal to rank 0's (one broadcast per
  /// bucket, and one for all the buffers when there are any).
  void broadcast_parameters();

  /// \brief The wrapped module.
  nn::Module& module() const { return module_; }
  /// \brief The group the gradients are averaged over.
  const std::shared_ptr<const ProcessGroup>& group() const { return group_; }
  /// \brief The number of buckets (all_reduce calls per synchronize_gradients()); 0 until every
  /// parameter has a shape.
  std::size_t num_buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<nn::Parameter*> parameters;
    std::vector<std::string> names;  // for messages
    Tensor flat;                     // one dtype, on the parameters' device
    std::vector<bool> ready;         // this backward pass has finished the parameter's gradient
    std::size_t waiting = 0;         // parameters not ready yet
    std::unique_ptr<Work> work;      // its all_reduce, from start() to finish()
  };
  bool all_shaped();
  void refresh_buckets();
  enum class Part { value, grad };
  void pack(Bucket& b, Part part);
  void broadcast_buffers();
  void unpack(Bucket& b, Part part);
  void begin_round();
  void arm();
  void gradient_ready(std::size_t bucket, std::size_t index);
  void start_ready(bool all);
  void finish_in_flight();

  nn::Module& module_;
  std::shared_ptr<const ProcessGroup> group_;
  DDPOptions options_;
  bool broadcast_pending_ = false;  // parameters without a shape at construction
  std::vector<Bucket> buckets_;
  std::size_t next_to_start_ = 0;   // buckets start in order: those before it have started
  bool armed_ = false;              // a forward armed the parameters' hooks for one backward pass
  std::shared_ptr<DistributedDataParallel*> hook_target_;  // the hooks hold it weakly
};

}  // namespace kten::dist
