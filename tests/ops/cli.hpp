// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
#include <string>

namespace kten::harness {

/// The harness's main (cli.cpp says what its options do): `program` and `reference` name it and
/// its reference in what it prints.
int run_main(int argc, char* argv[], const std::string& program, const std::string& reference);

}  // namespace kten::harness
