// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// d2l's linear regression, trained where the parameters live: try_gpu(), or the device given on
// the command line (cpu, gpu, gpu:N). Prints the recovered w and b.
#include <iostream>
#include <string>

#include <kten/kten.hpp>

int main(int argc, char* argv[]) {
  try {  // the guard too: a GPU build on a node without a usable GPU throws here, and says why
    kten::ScopeGuard guard(argc, argv);
    const std::string choice = argc > 1 ? argv[1] : "";
    const int gpus = choice == "cpu" ? 0 : 1;
    kten::data::SyntheticRegression data({2.f, -3.4f}, 4.2f, /*noise=*/0.01f, /*num_train=*/1000,
                                         /*num_val=*/1000, /*seed=*/0);
    kten::nn::Sequential model;
    model.add(kten::nn::Linear(1));
    kten::optim::SGD sgd(/*lr=*/0.03f);
    kten::Trainer trainer(/*max_epochs=*/3, gpus);
    std::cout << "training on " << trainer.device() << '\n';
    trainer.fit(model, kten::nn::MSELoss(), sgd, data, /*batch_size=*/32);

    const auto w = model.parameters()[0].to_vector<float>();
    const float b = model.parameters()[1].item<float>();
    std::cout << "parameters on " << model.parameters()[0].device() << '\n'
              << "w = [" << w[0] << ", " << w[1] << "]  (true [2, -3.4]; error [" << w[0] - 2.f << ", "
              << w[1] + 3.4f << "])\n"
              << "b = " << b << "  (true 4.2; error " << b - 4.2f << ")\n";
  } catch (const kten::Error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  return 0;
}
