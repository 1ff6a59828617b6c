# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch's side of kten <-> PyTorch through safetensors files (label torch; interchange.cpp runs it).

  interchange.py save DIR    trains nn.Sequential(Linear(3, 16), BatchNorm1d(16), ReLU(), Linear(16, 2))
                             for a few steps, in float32 and in float64, and writes for each dtype
                             torch-<dtype>.safetensors (its state_dict, BatchNorm's buffers included)
                             and torch-<dtype>-io.safetensors (inputs x and the model's outputs y in
                             evaluation mode, which reads the running statistics), and
                             torch-conv-<dtype>.safetensors and -io of conv_model() (convolutions),
                             torch-attention-<dtype>.safetensors and -io (attention_models())
  interchange.py check DIR   loads kten-<dtype>.safetensors into that model with load_state_dict and
                             checks its outputs (evaluation mode) on x of kten-<dtype>-io.safetensors
                             against kten's y
  interchange.py onnx-export | onnx-grid-export | onnx-check DIR
                             ONNX: see onnx_export, onnx_grid_export and onnx_check below

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


def torchscript_export(*args, **kwargs):
    """torch.onnx.export with the TorchScript exporter, the one these files were made with: PyTorch
    2.9 and later default to the dynamo exporter (dynamo=True, which needs onnxscript)."""
    import inspect
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    torch.onnx.export(*args, **kwargs)


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


def attention_models(dtype):
    """Attention (issue 52): torch.nn.MultiheadAttention(8, 2) with biases drawn at random (PyTorch
    starts them at zero), a post-norm relu TransformerEncoderLayer and a batch_first, norm_first
    gelu one; their state_dicts under the prefixes mha., post. and pre."""
    torch.manual_seed(2)
    mha = torch.nn.MultiheadAttention(8, 2)
    with torch.no_grad():
        mha.in_proj_bias.normal_()
        mha.out_proj.bias.normal_()
    post = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    pre = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, activation="gelu", batch_first=True, norm_first=True)
    return {name: m.to(dtype).eval() for name, m in (("mha", mha), ("post", post), ("pre", pre))}


def save_attention(folder, dtype):
    """torch-attention-<dtype>.safetensors (the state_dicts) and -io (inputs and outputs, computed
    with autograd on, so that PyTorch's fused inference path does not replace the modules' own)."""
    models = attention_models(dtype)
    name = str(dtype).removeprefix("torch.")
    state = {f"{prefix}.{key}": t for prefix, m in models.items() for key, t in m.state_dict().items()}
    save_file(state, f"{folder}/torch-attention-{name}.safetensors", {"format": "pt"})
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(5 if i == 0 else 4, 3, 8, generator=g, dtype=dtype) for i in range(3))
    padding = torch.tensor([[False, False, False, True], [False] * 4, [False, True, False, False]])
    additive = torch.randn(5, 4, generator=g, dtype=dtype)
    y, w = models["mha"](q, k, v, key_padding_mask=padding, attn_mask=additive)
    _, w_heads = models["mha"](q, k, v, key_padding_mask=padding, attn_mask=additive, average_attn_weights=False)
    src = torch.randn(6, 3, 8, generator=g, dtype=dtype)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)  # True: blocked
    src_padding = torch.tensor([[False] * 6, [False] * 5 + [True], [False, False, True, False, False, False]])
    post = models["post"](src, src_mask=causal, src_key_padding_mask=src_padding)
    pre = models["pre"](src.transpose(0, 1), src_key_padding_mask=src_padding)
    save_file({"q": q, "k": k, "v": v, "padding": padding, "additive": additive, "y": y, "w": w, "w_heads": w_heads,
               "src": src, "causal": causal, "src_padding": src_padding, "post": post, "pre": pre},
              f"{folder}/torch-attention-{name}-io.safetensors")


def save(folder):
    for dtype in (torch.float32, torch.float64):
        save_attention(folder, dtype)
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
        torchscript_export(net, torch.randn(4, 5), f"{folder}/mlp-{mode}.onnx", opset_version=opset,
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
    torchscript_export(net, torch.randn(2, 5, 8), f"{folder}/attention-eval.onnx", opset_version=17,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch", 1: "length"}, "y": {0: "batch"}},
                      do_constant_folding=False)  # folding would store qkv.weight transposed as onnx::MatMul_<n>
    x, target = torch.randn(3, 6, 8), torch.randn(3, 8)
    ref = {"x": x, "target": target, "y": net(x).detach()}
    torch.nn.functional.mse_loss(net(x), target).backward()
    ref.update({f"grad.{n}": p.grad.clone() for n, p in net.named_parameters()})
    save_file(ref, f"{folder}/attention-eval-ref.safetensors")
    return 0


# --- ONNX grids and graphs (kten::onnx, issue 32): CNNs, a U-Net and a message-passing net ---

class OnnxCnn1d(torch.nn.Module):
    """1-D CNN: replicate padding, BatchNorm1d, average pooling (count_include_pad), max pooling
    (ceil_mode), adaptive average pooling, softmax."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(11)
        self.conv1 = torch.nn.Conv1d(2, 8, 5, padding=2, padding_mode="replicate", bias=False)  # BatchNorm follows
        self.norm = torch.nn.BatchNorm1d(8)
        self.conv2 = torch.nn.Conv1d(8, 8, 3, padding=1, dilation=1)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, x):
        x = torch.relu(self.norm(self.conv1(torch.nn.functional.adaptive_avg_pool1d(x, 16))))
        x = torch.nn.functional.avg_pool1d(x, 3, stride=2, padding=1)
        x = torch.nn.functional.max_pool1d(torch.tanh(self.conv2(x)), 3, stride=2, ceil_mode=True)
        return torch.softmax(self.head(x.flatten(1)), dim=1)


def circular_pad(x):
    """Periodic padding by 1 on H and W, as Conv2d's padding_mode="circular" pads, written out:
    PyTorch 1.13 exports that mode wrongly (symbolic_opset9._pad_circular wraps x[-2:-1], not
    x[-1:], for a pad of 1), so kten, running the file as ONNX says, would rightly differ."""
    x = torch.cat([x[:, :, -1:], x, x[:, :, :1]], dim=2)
    return torch.cat([x[:, :, :, -1:], x, x[:, :, :, :1]], dim=3)


class OnnxUNet(torch.nn.Module):
    """2-D U-Net: circular padding, GroupNorm, GELU, strided Conv2d down, ConvTranspose2d and
    bilinear and nearest upsampling up, a skip concatenation and a residual sum."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(12)
        self.enc = torch.nn.Conv2d(1, 8, 3)
        self.enc_norm = torch.nn.GroupNorm(2, 8)
        self.down = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.down_norm = torch.nn.GroupNorm(4, 16)
        self.up = torch.nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.mix = torch.nn.Conv2d(16, 8, 3, padding=1)
        self.side = torch.nn.Conv2d(16, 8, 1)
        self.out = torch.nn.Conv2d(8, 2, 1)

    def forward(self, x):
        e = torch.nn.functional.gelu(self.enc_norm(self.enc(circular_pad(x))))
        d = torch.nn.functional.gelu(self.down_norm(self.down(e)))
        u = self.mix(torch.cat([self.up(d), e], dim=1)) + e
        u = u + self.side(torch.nn.functional.interpolate(d, scale_factor=2, mode="bilinear", align_corners=False))
        u = u + torch.nn.functional.interpolate(self.side(d), scale_factor=2, mode="nearest")
        return self.out(torch.nn.functional.gelu(u))


class OnnxConv3d(torch.nn.Module):
    """3-D conv net: InstanceNorm3d (affine and not), LeakyReLU, MaxPool3d, reflect padding,
    global average pooling."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(13)
        self.conv1 = torch.nn.Conv3d(1, 4, 3, padding=1)
        self.norm1 = torch.nn.InstanceNorm3d(4, affine=True)
        self.conv2 = torch.nn.Conv3d(4, 6, 3, padding=1, padding_mode="reflect")
        self.norm2 = torch.nn.InstanceNorm3d(6)
        self.head = torch.nn.Linear(6, 3)

    def forward(self, x):
        x = torch.nn.functional.max_pool3d(torch.nn.functional.leaky_relu(self.norm1(self.conv1(x)), 0.2), 2)
        x = torch.nn.functional.leaky_relu(self.norm2(self.conv2(x)), 0.1)
        return self.head(torch.nn.functional.adaptive_avg_pool3d(x, 1).flatten(1))


class OnnxGnn(torch.nn.Module):
    """Message passing on a graph of typed nodes: Embedding, index gathers of the edge ends, sums
    into the receivers by index_add_ and scatter_add_, a mean by degree (Where, Equal), gather."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(14)
        self.embed = torch.nn.Embedding(6, 8)
        self.message = torch.nn.Linear(16, 8)
        self.update = torch.nn.Linear(16, 8)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, types, edges):
        h = self.embed(types)
        for _ in range(2):
            src, dst = edges[0], edges[1]
            m = torch.nn.functional.softplus(self.message(torch.cat([h[src], h.index_select(0, dst)], dim=1)))
            summed = torch.zeros_like(h).scatter_add_(0, dst.unsqueeze(1).expand(-1, 8), m)
            degree = torch.zeros_like(h[:, :1]).scatter_add_(0, dst.unsqueeze(1), torch.ones_like(m[:, :1]))
            mean = summed / torch.where(degree == 0, torch.ones_like(degree), degree)
            h = h + torch.erf(self.update(torch.cat([h, mean], dim=1)))
        first = torch.gather(h, 1, torch.zeros_like(h[:, :2], dtype=torch.int64))
        return self.head(h) + first


def onnx_reference(net, path, inputs, training, target_seed=None):
    """PyTorch's answers for an exported model: `net` from the file's initializers (tracing in
    training mode ran BatchNorm once), in.<i>, a random target (drawn after
    torch.manual_seed(target_seed) when given), y, the MSE loss's parameter gradients (grad.<name>)
    and, in training mode, the parameters and buffers after three Adam steps (after.<name>)."""
    import onnx
    import onnx.numpy_helper
    stored = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy()) for t in onnx.load(path).graph.initializer}
    state = net.state_dict()
    net.load_state_dict({k: stored.get(k, v) for k, v in state.items()})
    y = net(*inputs).detach()
    if target_seed is not None:
        torch.manual_seed(target_seed)
    target = torch.randn(y.shape)
    ref = {f"in.{i}": t for i, t in enumerate(inputs)}
    ref.update({"target": target, "y": y})
    net.zero_grad()
    torch.nn.functional.mse_loss(net(*inputs), target).backward()
    ref.update({f"grad.{n}": p.grad.clone() for n, p in net.named_parameters()})
    if training:
        adam = torch.optim.Adam(net.parameters(), lr=1e-2)
        for _ in range(3):
            adam.zero_grad()
            torch.nn.functional.mse_loss(net(*inputs), target).backward()
            adam.step()
        ref.update({f"after.{n}": t.detach().clone() for n, t in net.state_dict().items() if t.is_floating_point()})
    return ref


def onnx_grid_export(folder):
    """For each model <name>: <name>.onnx and <name>-ref.safetensors: inputs (in.<i>; a batch other
    than the export's where the batch axis is dynamic), a target, PyTorch's outputs y, the MSE
    loss's parameter gradients (grad.<name>) and, for the models exported in training mode, the
    parameters and buffers after three Adam steps (after.<name>). PyTorch starts from the file's
    initializers (tracing in training mode runs BatchNorm once). index_add_ is not used: PyTorch
    1.13 refuses to export it with repeated indices, which message passing has."""
    from torch.onnx import TrainingMode
    types = torch.tensor([0, 1, 2, 3, 4, 5, 1])
    edges = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 0], [1, 2, 3, 4, 5, 6, 0, 3]])
    cases = [  # name, model, export inputs, reference inputs, training, opset, dynamic batch
        ("cnn1d", OnnxCnn1d(), (torch.randn(4, 2, 32),), (torch.randn(6, 2, 32),), True, 15, True),
        ("cnn1d-opset13", OnnxCnn1d(), (torch.randn(4, 2, 32),), (torch.randn(5, 2, 32),), True, 13, True),
        ("unet", OnnxUNet(), (torch.randn(2, 1, 16, 16),), (torch.randn(3, 1, 16, 16),), True, 17, True),
        ("conv3d", OnnxConv3d(), (torch.randn(2, 1, 8, 8, 8),), (torch.randn(3, 1, 8, 8, 8),), False, 17, True),
        ("gnn", OnnxGnn(), (types, edges), (torch.tensor([5, 4, 3, 2, 1, 0, 2]),
                                            torch.tensor([[6, 5, 4, 3, 2, 1, 0, 6], [0, 6, 5, 4, 3, 2, 1, 1]])), False, 16, False),
    ]
    for name, net, example, inputs, training, opset, dynamic in cases:
        net.train(training)
        names = [f"in.{i}" for i in range(len(example))]
        axes = {n: {0: "batch"} for n in names + ["y"]} if dynamic else None
        torchscript_export(net, example, f"{folder}/{name}.onnx", opset_version=opset, input_names=names,
                          output_names=["y"], dynamic_axes=axes,
                          training=TrainingMode.TRAINING if training else TrainingMode.EVAL,
                          do_constant_folding=not training)
        ref = onnx_reference(net, f"{folder}/{name}.onnx", inputs, training)
        save_file(ref, f"{folder}/{name}-ref.safetensors")
        print(f"{name}: exported at opset {opset} in {'training' if training else 'evaluation'} mode")
    return 0


class DesignBlock(torch.nn.Module):
    """DESIGN 1c's composed model, as kten's Block (interchange.cpp): x + gain * relu(norm(conv(x)))."""

    def __init__(self, ch):
        super().__init__()
        self.conv = torch.nn.Conv2d(ch, ch, 3, padding=1, padding_mode="circular")
        self.norm = torch.nn.BatchNorm2d(ch)
        self.gain = torch.nn.Parameter(torch.ones(1))
        self.register_buffer("calls", torch.zeros(1, dtype=torch.int64))

    def forward(self, x):
        return x + self.gain * torch.relu(self.norm(self.conv(x)))


def check_traced_block(folder, mode):
    """PyTorch's Block with the initializers of kten-block-<mode>.onnx (which kten's save() traced),
    in that mode, must give kten's outputs; the initializers are the Block's state_dict names
    (less the buffers no op reads)."""
    import onnx
    import onnx.numpy_helper
    graph = onnx.load(f"{folder}/kten-block-{mode}.onnx").graph
    stored = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy()) for t in graph.initializer}
    net = DesignBlock(3)
    missing, unexpected = net.load_state_dict(stored, strict=False)
    names_ok = not unexpected and set(missing) <= {"calls", "norm.num_batches_tracked"}
    print(f"kten-block-{mode}.onnx: initializers {sorted(stored)}: {'ok' if names_ok else 'WRONG'}")
    net.train(mode == "train")
    io = load_file(f"{folder}/kten-block-{mode}-io.safetensors")
    with torch.no_grad():
        got = net(io["x"])
    worst = (got - io["y"]).abs().max().item()
    ok = torch.allclose(got, io["y"], rtol=1e-5, atol=1e-5)
    print(f"kten-block-{mode}.onnx: PyTorch's Block from its initializers, largest difference from kten's {worst:.3g}: "
          f"{'ok' if ok else 'WRONG'}")
    return names_ok and ok


def onnx_check(folder):
    """onnx.checker (full check, with shape inference) on every kten-*.onnx that kten wrote; PyTorch's
    Block rebuilt from the traced kten-block-<mode>.onnx files (check_traced_block)."""
    import glob
    import subprocess
    files = sorted(glob.glob(f"{folder}/kten-*.onnx"))
    # The checker runs in a process of its own, without PyTorch: Debian testing's PyTorch 2.14 and
    # onnx 1.20 in one process crash (SIGSEGV) in the full check of kten-mlp-eval.onnx.
    checker = ("import sys, onnx\n"
               "for path in sys.argv[1:]:\n"
               "    onnx.checker.check_model(onnx.load(path), full_check=True)\n"
               "    print(f'onnx.checker accepts {path}', flush=True)\n")
    checked = subprocess.run([sys.executable, "-c", checker, *files]).returncode == 0
    blocks = [check_traced_block(folder, mode) for mode in ("eval", "train")]
    return 0 if files and checked and all(blocks) else 1


if __name__ == "__main__":
    torch.set_num_threads(1)
    command, folder = sys.argv[1:]
    if command == "save":
        save(folder)
    elif command == "onnx-export":
        sys.exit(onnx_export(folder))
    elif command == "onnx-grid-export":
        sys.exit(onnx_grid_export(folder))
    elif command == "onnx-check":
        sys.exit(onnx_check(folder))
    else:
        sys.exit(1 if check(folder) else 0)
