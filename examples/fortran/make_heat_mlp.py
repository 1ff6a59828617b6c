# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Makes heat_mlp.onnx for examples/fortran/insitu_heat.f90: an untrained PyTorch MLP 5 -> 32 -> 1
(Linear, Tanh, Linear) from a point's temperature and its four neighbours' to the point's
temperature one step later, exported as ONNX with a dynamic batch axis (one row per grid point).
Usage: python3 make_heat_mlp.py <output.onnx>"""
import inspect
import sys

import torch

# The TorchScript exporter: PyTorch 2.9 and later default to the dynamo one, which needs onnxscript.
exporter = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(5, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
torch.onnx.export(net, torch.randn(16, 5), sys.argv[1], opset_version=17, input_names=["stencil"],
                  output_names=["next"], dynamic_axes={"stencil": {0: "points"}, "next": {0: "points"}}, **exporter)
print(f"wrote {sys.argv[1]}")
