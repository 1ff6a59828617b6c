#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""kten-perf's PyTorch peer: the workloads of kten-perf's peer rows, in PyTorch, on the same device.

    pytorch_peer.py WORKLOADS_JSON [--device cuda|cpu] [--out PEER_JSON] [--min-time SECONDS]

WORKLOADS_JSON is the workloads.json kten-perf wrote (each workload's shape and kten's seconds per
call). Each workload runs here as kten-perf runs it: one warm-up call, then calls each followed by
a device synchronisation, for at least --min-time seconds; the fastest of three such repetitions
stands for it, as kten-perf keeps its fastest. Eager mode (no torch.compile, no CUDA graphs), float32, no TF32, as kten. Writes
PEER_JSON (PyTorch's version and device, and for each workload PyTorch's seconds and the row
<name>_vs_pytorch = PyTorch time / kten time: above 1, kten is faster) and prints the table.
"""
import argparse
import json
import sys
import time

import torch


def mlp(shape, device):
    h = shape["hidden"]
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(shape["in"], h), torch.nn.ReLU(), torch.nn.Linear(h, h),
                               torch.nn.ReLU(), torch.nn.Linear(h, shape["out"])).to(device)


def make(shape, device):
    """The workload's closure, built as kten-perf builds kten's (baselines/libtorch.cpp for libtorch)."""
    kind = shape["kind"]
    if kind == "mlp_step":
        model = mlp(shape, device)
        opt = (torch.optim.SGD(model.parameters(), lr=0.01) if shape["optimizer"] == "sgd"
               else torch.optim.Adam(model.parameters(), lr=1e-3))
        x = torch.rand(shape["batch"], shape["in"], device=device)
        y = torch.rand(shape["batch"], shape["out"], device=device)
        loss = torch.nn.MSELoss()

        def step():
            opt.zero_grad()
            loss(model(x), y).backward()
            opt.step()
        return step
    if kind == "mlp_inference":
        model = mlp(shape, device)
        x = torch.rand(shape["batch"], shape["in"], device=device)

        def infer():
            with torch.inference_mode():
                model(x)
        return infer
    if kind == "add":
        x = torch.rand(shape["n"], device=device)
        y = torch.rand(shape["n"], device=device)

        def add():
            with torch.inference_mode():
                x + y
        return add
    if kind == "conv":  # convolutions (issue 31): forward and backward to x, weight and bias
        size = [shape["batch"], shape["channels"]] + shape["spatial"]
        c, k = shape["channels"], shape["kernel"]
        x = torch.rand(size, device=device, requires_grad=True)
        w = torch.rand([c, c] + [k] * len(shape["spatial"]), device=device, requires_grad=True)
        b = torch.rand(c, device=device, requires_grad=True)
        g = torch.rand(size, device=device)
        conv = torch.nn.functional.conv2d if len(shape["spatial"]) == 2 else torch.nn.functional.conv3d

        def conv_forward_backward():
            x.grad = w.grad = b.grad = None
            conv(x, w, b, padding=k // 2).backward(g)
        return conv_forward_backward
    rows, cols = shape["rows"], shape["cols"]
    x = torch.rand(rows, cols, device=device, requires_grad=True)
    g = torch.rand(rows, cols, device=device)
    if kind == "softmax":
        f = lambda t: torch.softmax(t, 1)  # noqa: E731
    elif kind == "layernorm":
        f = torch.nn.LayerNorm(cols).to(device)
    elif kind == "gelu":
        f = torch.nn.functional.gelu  # exact (erf) GELU, as kten's
    else:
        raise ValueError(f"pytorch_peer.py: unknown workload kind {kind!r}")

    def forward_backward():
        x.grad = None
        f(x).backward(g)
    return forward_backward


def seconds_per_call(body, sync, min_time):
    body()
    sync()
    reps = []
    for _ in range(3):
        calls, start = 0, time.perf_counter()
        while True:
            body()
            sync()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        reps.append(elapsed / calls)
    return min(reps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workloads")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default="pytorch.json")
    ap.add_argument("--min-time", type=float, default=0.2)
    args = ap.parse_args()
    with open(args.workloads) as f:
        spec = json.load(f)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # kten's float32 GEMM is full float32
        torch.backends.cudnn.allow_tf32 = False
        sync = torch.cuda.synchronize
        name = torch.cuda.get_device_name(device)
    else:
        sync = lambda: None  # noqa: E731
        name = "cpu"
    rows = {}
    print(f"PyTorch {torch.__version__} on {name}; kten's workloads from {args.workloads} (kten on {spec['device']})")
    print(f"{'row':34}{'measured':>10}  {'target':10}{'pytorch us':>12}{'kten us':>12}  what")
    for w in spec["workloads"]:
        torch_s = seconds_per_call(make(w["shape"], device), sync, args.min_time)
        kten_s = w["kten_seconds"]
        ratio = torch_s / kten_s if kten_s > 0 else None
        rows[w["name"] + "_vs_pytorch"] = {"pytorch_seconds": torch_s, "kten_seconds": kten_s, "ratio": ratio,
                                           "target": w["target"], "what": w["what"]}
        shown = f"{ratio:.2f}" if ratio else "n/a"
        print(f"{w['name'] + '_vs_pytorch':34}{shown:>10}  {w['target']:10}{torch_s * 1e6:12.1f}{kten_s * 1e6:12.1f}  {w['what']}")
    with open(args.out, "w") as f:
        json.dump({"pytorch": torch.__version__, "device": name, "kten_device": spec["device"], "rows": rows}, f, indent=1)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
