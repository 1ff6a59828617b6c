# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes the files of the C and Fortran tests (tests/fortran, CTest label fortran) into a folder:
mlp.onnx, a PyTorch MLP 4 -> 16 -> 16 -> 2 (Linear, Tanh, Linear, SiLU, Linear) exported as ONNX with
a dynamic batch axis, and mlp-ref.bin, little-endian float32: x (batch 8, features 4) then PyTorch's
y (8, 2), row-major (batch first), as kten sees a Fortran x(4, 8) with its dims reversed; and
mlp-longer.onnx, the same MLP with one more Linear(2, 2): its first six parameters have mlp.onnx's
shapes, so only their count tells the two apart (the 2-rank test's mismatched models).
Usage: python3 make_mlp.py <folder>"""
import inspect
import sys

import torch

# The TorchScript exporter, as on PyTorch 1.13: 2.9 and later default to the dynamo exporter
# (dynamo=True, which needs onnxscript).
EXPORTER = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}


def main(folder):
    torch.manual_seed(7)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.SiLU(),
                              torch.nn.Linear(16, 2)).eval()
    torch.onnx.export(net, torch.randn(3, 4), f"{folder}/mlp.onnx", opset_version=17, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, **EXPORTER)
    longer = torch.nn.Sequential(*net, torch.nn.Linear(2, 2)).eval()
    torch.onnx.export(longer, torch.randn(3, 4), f"{folder}/mlp-longer.onnx", opset_version=17, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, **EXPORTER)
    x = torch.randn(8, 4)
    with torch.no_grad():
        y = net(x)
    with open(f"{folder}/mlp-ref.bin", "wb") as f:
        f.write(x.numpy().astype("<f4").tobytes())
        f.write(y.numpy().astype("<f4").tobytes())
    print(f"wrote {folder}/mlp.onnx, {folder}/mlp-longer.onnx and {folder}/mlp-ref.bin")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
