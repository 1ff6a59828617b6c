// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// d2l's linear regression, data-parallel over MPI ranks (one rank per GPU on a cluster):
//   mpirun -np 2 build/cpu/examples/ddp-regression
// Every rank trains on its shard of each batch of 32 (32 / ranks rows each); gradients are averaged
// over the ranks. The same model is then trained by this process alone with batch 32: the two
// must agree to rounding, and both recover w = [2, -3.4] and b = 4.2.
#include <algorithm>
#include <cmath>
#include <iostream>

#include <kten/dist.hpp>
#include <kten/kten.hpp>

int main(int argc, char* argv[]) {
  kten::dist::Guard guard(argc, argv);  // MPI (unless already running), this rank's GPU, then Kokkos
  const auto world = kten::dist::world();
  const bool root = world->rank() == 0;
  try {
    // The same data on every rank (the same seed); each rank trains on its own shard of it.
    kten::data::SyntheticRegression data({2.f, -3.4f}, 4.2f, /*noise=*/0.01f, /*num_train=*/1000,
                                         /*num_val=*/1000, /*seed=*/0);
    const std::int64_t global_batch = 32;
    const std::int64_t per_rank = std::max<std::int64_t>(1, global_batch / world->size());
    auto train = [&](bool data_parallel) {
      kten::nn::manual_seed(0);  // the same initial parameters for both runs
      kten::nn::Sequential model;
      model.add(kten::nn::Linear(1));
      kten::optim::SGD sgd(/*lr=*/0.03f);
      kten::Trainer trainer(/*max_epochs=*/3, /*num_gpus=*/1);
      if (!data_parallel) {
        trainer.set_process_group(nullptr);  // this process alone
        trainer.set_progress_stream(nullptr);
      } else if (root) {
        std::cout << world->size() << " ranks, " << per_rank << " rows each per batch (" << per_rank * world->size()
                  << " together), rank 0 on " << trainer.device() << '\n';
      }
      trainer.fit(model, kten::nn::MSELoss(), sgd, data, data_parallel ? per_rank : per_rank * world->size());
      auto w = model.parameters()[0].to_vector<float>();
      w.push_back(model.parameters()[1].item<float>());
      return w;  // w0, w1, b
    };
    const auto parallel = train(true);
    const auto alone = train(false);
    float difference = 0;
    for (std::size_t i = 0; i < 3; ++i) difference = std::max(difference, std::fabs(parallel[i] - alone[i]));
    const bool match = difference <= 1e-4f;
    if (root)
      std::cout << "w = [" << parallel[0] << ", " << parallel[1] << "]  (true [2, -3.4]; error [" << parallel[0] - 2.f
                << ", " << parallel[1] + 3.4f << "])\n"
                << "b = " << parallel[2] << "  (true 4.2; error " << parallel[2] - 4.2f << ")\n"
                << "one process with batch " << per_rank * world->size() << ": largest difference " << difference
                << (match ? " (matches)" : " (DOES NOT MATCH)") << '\n';
    return match ? 0 : 1;
  } catch (const kten::Error& e) {
    kten::dist::abort(e.what());  // the other ranks may be waiting for this one
  }
}
