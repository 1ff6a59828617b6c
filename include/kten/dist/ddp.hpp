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
};

/// \brief Wraps any nn::Module so that every rank of a group trains the same model.
///
/// - Construction broadcasts rank 0's parameters to every rank (a collective: every rank
///   constructs its wrapper at the same point). Parameters a lazy layer has not shaped yet are
///   broadcast right after the first forward call, which every rank makes at the same step.
/// - backward() runs the module's backward, then averages the gradients over the ranks: the
///   gradients are copied (on the device) into flat buckets in registration order, each bucket is
///   averaged with one all_reduce(mean), in the same order on every rank, and copied back.
/// - Parameters, names, save() and load() are the module's own, so a checkpoint written through
///   the wrapper loads into the bare module and back.
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

  /// \brief The module's forward; after the first call, broadcasts the parameters it shaped.
  Tensor forward(const Tensor& input) override;
  /// \brief The module's backward, then synchronize_gradients().
  Tensor backward(const Tensor& grad_output) override;
  /// \brief Moves the module's parameters to `device`.
  void to(const Device& device) override;
  /// \brief The module's parameters, with the module's names.
  std::vector<nn::NamedParameter> named_parameters() override;
  /// \brief "DistributedDataParallel".
  std::string name() const override { return "DistributedDataParallel"; }
  /// \brief Forwards load()'s hook to the module.
  void parameters_loaded() override;

  /// \brief Averages every gradient over the ranks: one all_reduce(mean) per bucket. backward()
  /// calls it; call it yourself after calling the module's own backward.
  void synchronize_gradients();
  /// \brief Makes every rank's parameters equal to rank 0's (one broadcast per bucket).
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
    Tensor flat;  // one dtype, on the parameters' device
  };
  bool all_shaped();
  void build_buckets();
  enum class Part { value, grad };
  void exchange(Part part);

  nn::Module& module_;
  std::shared_ptr<const ProcessGroup> group_;
  DDPOptions options_;
  bool broadcast_pending_ = false;  // parameters without a shape at construction
  std::vector<Bucket> buckets_;
};

}  // namespace kten::dist
