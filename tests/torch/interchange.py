"""PyTorch's side of kten <-> PyTorch through safetensors files (label torch; interchange.cpp runs it).

  interchange.py save DIR    trains nn.Sequential(Linear(3, 16), BatchNorm1d(16), ReLU(), Linear(16, 2))
                             for a few steps, in float32 and in float64, and writes for each dtype
                             torch-<dtype>.safetensors (its state_dict, BatchNorm's buffers included)
                             and torch-<dtype>-io.safetensors (inputs x and the model's outputs y in
                             evaluation mode, which reads the running statistics), and
                             torch-conv-<dtype>.safetensors and -io of conv_model() (convolutions)
  interchange.py check DIR   loads kten-<dtype>.safetensors into that model with load_state_dict and
                             checks its outputs (evaluation mode) on x of kten-<dtype>-io.safetensors
                             against kten's y

Debian has no safetensors package, so the files are written and read here as
safetensors.torch.save_file and load_file do (safetensors/src/tensor.rs): tensors in the order of
descending dtype alignment, then by name; a compact JSON header, "__metadata__" first, padded with
spaces to a multiple of 8 bytes; and the reader's checks (header length, UTF-8, the offsets tiling
the data exactly). Exits non-zero with a message on any difference.
"""
import json
import struct
import sys

import torch

CODES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.bool: "BOOL"}
DTYPES = {code: dtype for dtype, code in CODES.items()}
ALIGNMENT = ["BOOL", "F32", "F64", "I64"]  # the library's Dtype order (increasing alignment)
MAX_HEADER = 100_000_000


def save_file(tensors, path, metadata=None):
    entries = sorted(tensors.items(), key=lambda item: (-ALIGNMENT.index(CODES[item[1].dtype]), item[0]))
    header = {"__metadata__": metadata} if metadata else {}
    blobs, offset = [], 0
    for name, t in entries:
        blob = t.detach().contiguous().cpu().numpy().tobytes()  # little-endian on this host
        header[name] = {"dtype": CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load_file(path):
    with open(path, "rb") as f:
        buffer = f.read()
    (n,) = struct.unpack("<Q", buffer[:8])
    assert n <= MAX_HEADER and 8 + n <= len(buffer), f"{path}: header length {n}"
    header = json.loads(buffer[8 : 8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", None)
    assert metadata is None or all(isinstance(v, str) for v in metadata.values()), f"{path}: metadata {metadata}"
    start = 0
    tensors = {}
    for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        size = torch.empty((), dtype=dtype).element_size()
        for extent in info["shape"]:
            size *= extent
        assert begin == start and end - begin == size, f"{path}: '{name}' has offsets {begin}, {end}"
        data = bytearray(buffer[8 + n + begin : 8 + n + end])
        flat = torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(info["shape"])
        start = end
    assert 8 + n + start == len(buffer), f"{path}: {len(buffer) - 8 - n - start} bytes after the data"
    return tensors


def model(dtype):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    return net.to(dtype)


def conv_model(dtype):
    """Convolutions (issue 31): a periodic Conv2d and a ConvTranspose2d, as kten's conv_model()."""
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1, padding_mode="circular"), torch.nn.ReLU(),
                              torch.nn.ConvTranspose2d(4, 2, 2, stride=2))
    return net.to(dtype)


def save(folder):
    for dtype in (torch.float32, torch.float64):  # convolutions (issue 31): PyTorch's state_dict for kten
        net = conv_model(dtype)
        name = str(dtype).removeprefix("torch.")
        save_file(net.state_dict(), f"{folder}/torch-conv-{name}.safetensors", {"format": "pt"})
        x = torch.randn(3, 2, 5, 6, dtype=dtype)
        with torch.no_grad():
            save_file({"x": x, "y": net(x)}, f"{folder}/torch-conv-{name}-io.safetensors")
    for dtype in (torch.float32, torch.float64):
        net = model(dtype)
        optimiser = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(5):  # trained, so the file holds more than the initialisation
            x = torch.randn(32, 3, dtype=dtype)
            loss = torch.nn.functional.mse_loss(net(x), torch.stack([x.sum(1), x[:, 0] * x[:, 1]], 1))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        name = str(dtype).removeprefix("torch.")
        save_file(net.state_dict(), f"{folder}/torch-{name}.safetensors", {"format": "pt"})
        x = torch.randn(8, 3, dtype=dtype)
        net.eval()
        with torch.no_grad():
            save_file({"x": x, "y": net(x)}, f"{folder}/torch-{name}-io.safetensors")


def check(folder):
    failures = 0
    for dtype, rtol, atol in ((torch.float32, 1e-5, 1e-6), (torch.float64, 1e-12, 1e-12)):
        name = str(dtype).removeprefix("torch.")
        net = model(dtype)
        net.load_state_dict(load_file(f"{folder}/kten-{name}.safetensors"))  # strict: kten's names are PyTorch's
        net.eval()
        io = load_file(f"{folder}/kten-{name}-io.safetensors")
        with torch.no_grad():
            got = net(io["x"])
        worst = (got - io["y"]).abs().max().item()
        ok = torch.allclose(got, io["y"], rtol=rtol, atol=atol)
        print(f"{name}: PyTorch's outputs of kten's model, largest difference from kten's {worst:.3g}: {'ok' if ok else 'WRONG'}")
        failures += not ok
    return failures


# --- ONNX (kten::onnx, issue 32): PyTorch exports an MLP; the ONNX checker judges kten's files ---

def onnx_mlp():
    """Linear, LayerNorm, SiLU, Softplus: the MLP of the ONNX tests."""
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.LayerNorm(16), torch.nn.SiLU(),
                               torch.nn.Linear(16, 16), torch.nn.Softplus(), torch.nn.Linear(16, 3))


class OnnxAttention(torch.nn.Module):
    """A small attention block: positions (Range, Sin, Cos), Split, Reshape from Shape arithmetic,
    Transpose, batched MatMul, Softmax, LayerNormalization, ReduceMean; batch and length dynamic."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.qkv = torch.nn.Linear(8, 24)
        self.out = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        b, t, c = x.shape
        pos = torch.arange(t, dtype=x.dtype).unsqueeze(1)
        x = x + torch.sin(pos) + torch.cos(pos * 0.5)
        q, k, v = self.qkv(x).split(8, dim=-1)
        q, k, v = (z.reshape(b, t, 2, 4).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return torch.nn.functional.leaky_relu(self.norm(x + self.out(y)), 0.1).mean(dim=1)


def onnx_export(folder):
    """For each mode: mlp-<mode>.onnx (batch 4 at export, a dynamic axis) and mlp-<mode>-ref.safetensors:
    x and target (batch 7), PyTorch's y, the MSE loss's parameter gradients (grad.<name>) and the
    parameters after three Adam steps (after.<name>), names as the ONNX initializers'. Evaluation
    mode at opset 17 (LayerNormalization), training mode at opset 13 (LayerNorm decomposed)."""
    from torch.onnx import TrainingMode
    for mode, opset in (("eval", 17), ("train", 13)):
        net = onnx_mlp()
        net.train(mode == "train")
        torch.onnx.export(net, torch.randn(4, 5), f"{folder}/mlp-{mode}.onnx", opset_version=opset,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                          training=TrainingMode.TRAINING if mode == "train" else TrainingMode.EVAL,
                          do_constant_folding=mode != "train")
        x, target = torch.randn(7, 5), torch.randn(7, 3)
        ref = {"x": x, "target": target, "y": net(x).detach()}
        torch.nn.functional.mse_loss(net(x), target).backward()
        ref.update({f"grad.{n}": p.grad.clone() for n, p in net.named_parameters()})
        adam = torch.optim.Adam(net.parameters(), lr=1e-2)
        for _ in range(3):
            adam.zero_grad()
            torch.nn.functional.mse_loss(net(x), target).backward()
            adam.step()
        ref.update({f"after.{n}": p.detach().clone() for n, p in net.named_parameters()})
        save_file(ref, f"{folder}/mlp-{mode}-ref.safetensors")
    net = OnnxAttention().eval()
    torch.onnx.export(net, torch.randn(2, 5, 8), f"{folder}/attention-eval.onnx", opset_version=17,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch", 1: "length"}, "y": {0: "batch"}},
                      do_constant_folding=False)  # folding would store qkv.weight transposed as onnx::MatMul_<n>
    x, target = torch.randn(3, 6, 8), torch.randn(3, 8)
    ref = {"x": x, "target": target, "y": net(x).detach()}
    torch.nn.functional.mse_loss(net(x), target).backward()
    ref.update({f"grad.{n}": p.grad.clone() for n, p in net.named_parameters()})
    save_file(ref, f"{folder}/attention-eval-ref.safetensors")
    return 0


def onnx_check(folder):
    """onnx.checker (full check, with shape inference) on every kten-*.onnx that kten wrote."""
    import glob
    import onnx
    files = sorted(glob.glob(f"{folder}/kten-*.onnx"))
    for path in files:
        onnx.checker.check_model(onnx.load(path), full_check=True)
        print(f"onnx.checker accepts {path}")
    return 0 if files else 1


if __name__ == "__main__":
    torch.set_num_threads(1)
    command, folder = sys.argv[1:]
    if command == "save":
        save(folder)
    elif command == "onnx-export":
        sys.exit(onnx_export(folder))
    elif command == "onnx-check":
        sys.exit(onnx_check(folder))
    else:
        sys.exit(1 if check(folder) else 0)
