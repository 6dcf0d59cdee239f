#!/usr/bin/env python3
"""A Llama-shaped ONNX model with gigabytes of random weights in external data, for
the weight-slicing benchmark (bench/run.sh with BENCH_BIG=1). Never commit its output.

    python3 tools/make_big_model.py -o build/bench/big/big.onnx          # ~2.3 GB
    python3 tools/make_big_model.py -o /tmp/b.onnx --layers 2 --hidden 256 --vocab 1024

The graph is tools/make_llama_synthetic.py's (same operators and names); the defaults
are TinyLlama-like (hidden 2048, 16 heads, 4 KV heads, MLP 5632, vocabulary 32000) with
10 layers: 2.3 GB of float32 weights. The weights are uniform random floats written
chunk by chunk into one external-data file (MODEL.weights beside MODEL.onnx, 64-byte
aligned), so memory stays small whatever the size. The rotary tables and the causal
mask are the real ones.
"""
import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, save_model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_llama_synthetic as llama  # noqa: E402

CHUNK = 16 << 20  # floats per write (64 MiB)


class ExternalWriter:
    """Replaces Builder.init: writes each initializer's bytes to the weights file and
    declares it as external data."""

    def __init__(self, path, seed, alignment=64):
        self.file = open(path, "wb")
        self.location = os.path.basename(path)
        self.rng = np.random.default_rng(seed)
        self.alignment = alignment
        self.offset = 0

    def write(self, name, arr):
        if self.offset % self.alignment:
            pad = self.alignment - self.offset % self.alignment
            self.file.write(b"\0" * pad)
            self.offset += pad
        n = int(np.prod(arr.shape))
        if isinstance(arr, Random):
            left = n
            while left:
                k = min(left, CHUNK)
                chunk = self.rng.random(k, dtype=np.float32)
                chunk -= 0.5
                chunk *= arr.scale
                self.file.write(chunk.tobytes())
                left -= k
        else:
            self.file.write(np.ascontiguousarray(arr, dtype=np.float32).tobytes())
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", self.location), ("offset", str(self.offset)),
                     ("length", str(n * 4))):
            e = t.external_data.add()
            e.key, e.value = k, v
        self.offset += n * 4
        return t


class Random:
    """A weight of `shape` whose random values are generated only when written."""

    def __init__(self, *shape, scale=0.04):
        self.shape = tuple(shape)
        self.scale = scale


def weights(a):
    H, V, nh, nkv, inter = a.hidden, a.vocab, a.heads, a.kv_heads, a.intermediate
    hd = H // nh
    W = {"embed": Random(V, H, scale=2.0), "layers": []}
    for _ in range(a.layers):
        W["layers"].append(dict(
            in_norm=Random(H, scale=0.2), q=Random(H, nh * hd), k=Random(H, nkv * hd),
            v=Random(H, nkv * hd), o=Random(nh * hd, H), post_norm=Random(H, scale=0.2),
            gate=Random(H, inter), up=Random(H, inter), down=Random(inter, H)))
    W["norm"] = Random(H, scale=0.2)
    W["lm_head"] = Random(H, V)
    inv_freq = 1.0 / (a.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    freqs = np.outer(np.arange(a.max_pos, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    W["cos"] = np.cos(emb).astype(np.float32)
    W["sin"] = np.sin(emb).astype(np.float32)
    W["mask"] = np.triu(np.full((a.max_pos, a.max_pos), np.finfo(np.float32).min,
                                dtype=np.float32), k=1)
    return W


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", required=True, help="output .onnx (weights beside it)")
    ap.add_argument("--layers", type=int, default=10)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=5632)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--max-pos", type=int, default=256)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    a.past = a.gqa_op = False  # make_llama_synthetic's plain layout: no KV cache, no contrib ops
    if a.hidden % a.heads or a.heads % a.kv_heads or (a.hidden // a.heads) % 2:
        ap.error("need hidden % heads == 0, heads % kv_heads == 0 and an even head_dim")

    out_dir = os.path.dirname(os.path.abspath(a.output))
    os.makedirs(out_dir, exist_ok=True)
    writer = ExternalWriter(os.path.abspath(a.output) + ".weights", a.seed)

    def init(self, name, arr):
        self.inits.append(writer.write(name, arr))
        return name

    llama.Builder.init = init
    model = llama.build(a, weights(a))
    model.graph.name = f"llama_big_{a.layers}l"
    writer.file.close()
    save_model(model, a.output)
    print(f"wrote {a.output} ({os.path.getsize(a.output)} bytes) + {writer.location} "
          f"({writer.offset / 1e9:.2f} GB), {len(model.graph.node)} nodes, layers={a.layers} "
          f"hidden={a.hidden} heads={a.heads} kv_heads={a.kv_heads} "
          f"intermediate={a.intermediate} vocab={a.vocab}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
