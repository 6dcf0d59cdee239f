#!/usr/bin/env python3
"""Differential fuzzing of the whole compiler: random small ONNX models (chains of the ops
transformers are made of, with broadcasting, head reshapes, fused projections cut by
Slice and Split, residuals, reductions over the sequence, grouped-query K/V repeated by
Expand, heads folded into the batch, a causal mask built from the sequence length), each
compiled by tp-compile at N = 2 and 4 under a random objective (sometimes
--sequence-parallel, sometimes a divisible batch, sometimes graph inputs and outputs split
by their last dim, in blocks or in groups of ranks; an If as TorchScript writes squeeze,
SplitToSequence / SequenceAt as it writes split, tensor_split and unbind, and torch.flip's
reversing Slice)
and run by tp-run against the unsharded run and against onnxruntime (rtol 1e-3, atol 1e-4
times the outputs' largest magnitude, at least 1: the weights keep activations near 1,
attention chains reach tens, and a wrong plan is off by far more).

    python3 tools/fuzz_models.py --bin build [--count 200] [--seed 1] [--out /tmp/fuzz]

Needs onnx, onnxruntime and numpy (no torch). make test runs 40 models of fixed seeds
(ctest python.fuzz_models; exit 77, skipped, without onnxruntime). A model that
onnxruntime itself refuses is the generator's fault and is skipped. Every failure (a
compile error, a run error, or outputs that differ) is kept in OUT/fail_SEED with the
model, its inputs and the commands that show it; exit status 1 when there was one.
"""
import argparse
import os
import shutil
import subprocess
import sys

SKIP = 77
try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("fuzz_models: onnx or numpy is not importable; skipped")
    sys.exit(SKIP)

VOCAB = 32  # tp-run's random integers are in [0, 32); ours too
DIMS = {"batch": 8, "seq": 8}  # both divisible by N (--divisible), up to 8


class Model:
    def __init__(self, rng):
        self.rng = rng
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def weight(self, shape, scale=0.4):
        name = self.name("w")
        data = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(data, name))
        return name

    def ints(self, values):
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def ints_f(self, value):
        name = self.name("f")
        self.inits.append(numpy_helper.from_array(np.array([value], dtype=np.float32), name))
        return name

    def op(self, op_type, inputs, outputs=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name("n"), **attrs))
        return outs[0] if outputs == 1 else outs


def split_sequence(m, rng, x, hidden):
    """SplitToSequence read by SequenceAt at constant indices, as TorchScript writes
    torch.split / tensor_split / unbind: two of its parts, one changed, concatenated back."""
    variant = int(rng.integers(3))
    if variant == 0:  # tensor_split(x, 3, dim=1): sizes [q + 1] * r + [q] * (3 - r) of seq
        seq = m.op("Gather", [m.op("Shape", [x]), m.ints([1])], axis=0)  # [1]
        q, r = m.op("Div", [seq, m.ints([3])]), m.op("Mod", [seq, m.ints([3])])
        sizes = m.op("Concat", [m.op("Tile", [m.op("Add", [q, m.ints([1])]), r]),
                                m.op("Tile", [q, m.op("Sub", [m.ints([3]), r])])], axis=0)
        seqs = m.op("SplitToSequence", [x, sizes], axis=1)
        parts = [m.op("SequenceAt", [seqs, m.ints(k)]) for k in range(3)]
        return m.op("Concat", [parts[0], m.op("Tanh", [parts[1]]), parts[2]], axis=1)
    if variant == 1 and hidden % 2 == 0:  # split(x, hidden / 4 or hidden / 2, dim=-1)
        chunk = hidden // (4 if hidden % 4 == 0 and rng.random() < 0.5 else 2)
        split = m.name("chunk")
        dtype = np.int32 if rng.random() < 0.5 else np.int64
        m.inits.append(numpy_helper.from_array(np.array(chunk, dtype=dtype), split))
        seqs = m.op("SplitToSequence", [x, split], axis=-1)
        first, last = m.op("SequenceAt", [seqs, m.ints(0)]), m.op("SequenceAt", [seqs, m.ints(-1)])
        middle = m.op("Slice", [x, m.ints([chunk]), m.ints([hidden - chunk]), m.ints([-1])])
        return m.op("Concat", [m.op("Tanh", [last]), middle, first], axis=-1)
    if hidden % 2 == 0:  # unbind over a [b, s, 2, hidden / 2] view
        pairs = m.op("Reshape", [x, m.ints([0, 0, 2, hidden // 2])])
        seqs = m.op("SplitToSequence", [pairs], axis=2, keepdims=0)
        a, b = m.op("SequenceAt", [seqs, m.ints(-2)]), m.op("SequenceAt", [seqs, m.ints(1)])
        return m.op("Concat", [m.op("Neg", [b]), a], axis=-1)
    return x


def build(seed):
    """A random model: ([batch, seq] ids or [batch, seq, H] floats) -> 1 or 2 outputs."""
    rng = np.random.default_rng(seed)
    m = Model(rng)
    hidden = int(rng.choice([16, 32, 48, 64]))
    embedding = None  # (name, width) of the token embedding, for tied logits
    if rng.random() < 0.5:
        inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])]
        embedding = (m.weight([VOCAB, hidden]), hidden)
        x = m.op("Gather", [embedding[0], "ids"])
    else:
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])]
        x = "x"
    saved = [(x, hidden)]  # earlier values, for residuals
    outputs = []
    for step in range(int(rng.integers(4, 11))):
        kind = "linear" if step == 0 else rng.choice([
            "linear", "act", "norm", "softmax", "heads", "split", "rotate", "broadcast",
            "residual", "reduce_seq", "center", "where", "flatten", "seq_first", "tied",
            "einsum", "gemm", "columns", "expand", "seq_slice", "gqa", "folded", "mask",
            "squeeze", "if_squeeze", "split_sequence", "flip"])
        if kind == "linear":
            out = int(rng.choice([hidden, 2 * hidden, 3 * hidden, max(8, hidden // 2)]))
            x = m.op("MatMul", [x, m.weight([hidden, out], 1.0 / np.sqrt(hidden))])
            if rng.random() < 0.6:
                x = m.op("Add", [x, m.weight([out], 0.1)])
            hidden = out
        elif kind == "act":
            x = m.op(str(rng.choice(["Relu", "Tanh", "Sigmoid", "Neg", "Abs", "Erf"])), [x])
        elif kind == "norm":
            x = m.op("LayerNormalization", [x, m.weight([hidden], 1.0), m.weight([hidden], 0.1)],
                     axis=-1)
        elif kind == "softmax":
            x = m.op("Softmax", [x], axis=-1)
        elif kind == "heads" and hidden % 4 == 0:
            h = int(rng.choice([2, 4]))
            d = hidden // h
            q = m.op("Transpose", [m.op("Reshape", [x, m.ints([0, 0, h, d])])], perm=[0, 2, 1, 3])
            if rng.random() < 0.7:  # attention over the sequence
                kt = m.op("Transpose", [q], perm=[0, 1, 3, 2])
                scores = m.op("Softmax", [m.op("MatMul", [q, kt])], axis=-1)
                q = m.op("MatMul", [scores, q])
            x = m.op("Reshape", [m.op("Transpose", [q], perm=[0, 2, 1, 3]),
                                 m.ints([0, 0, hidden])])
        elif kind == "split" and hidden % 2 == 0:
            if rng.random() < 0.5:
                sizes = [hidden // 2, hidden // 2]
            else:
                a = int(rng.integers(1, hidden // 8 + 1)) * 4 if hidden >= 16 else hidden // 2
                sizes = [a, hidden - a]
            a, b = m.op("Split", [x, m.ints(sizes)], outputs=2, axis=-1)
            x = m.op("Concat", [m.op("Tanh", [b]), a], axis=-1)
        elif kind == "rotate" and hidden % 2 == 0:
            half = hidden // 2
            a = m.op("Slice", [x, m.ints([0]), m.ints([half]), m.ints([-1])])
            b = m.op("Slice", [x, m.ints([half]), m.ints([hidden]), m.ints([-1])])
            x = m.op("Concat", [m.op("Neg", [b]), a], axis=-1)
        elif kind == "broadcast":
            shape = [[hidden], [1, 1, hidden], [1, hidden]][int(rng.integers(3))]
            op = str(rng.choice(["Add", "Mul", "Sub"]))
            x = m.op(op, [x, m.weight(shape, 0.5)] if rng.random() < 0.5
                     else [m.weight(shape, 0.5), x])
        elif kind == "residual":
            same = [v for v, hd in saved if hd == hidden and v != x]
            if same:
                x = m.op("Add", [x, same[int(rng.integers(len(same)))]])
        elif kind == "reduce_seq":
            op = str(rng.choice(["ReduceSum", "ReduceMax", "ReduceMean"]))
            r = m.op(op, [x, m.ints([1])], keepdims=1)  # [batch, 1, H]
            x = m.op("Add", [x, m.op("Mul", [r, m.weight([1], 0.1)])])
        elif kind == "center":
            mean = m.op("ReduceMean", [x, m.ints([-1])], keepdims=1)  # [batch, seq, 1]
            x = m.op("Sub", [x, mean])
        elif kind == "where":
            small = m.op("Mul", [x, m.weight([1], 0.1)])
            x = m.op("Where", [m.op("Greater", [x, m.weight([hidden], 0.1)]), x, small])
        elif kind == "flatten":  # [batch·seq, H] through a projection, and back
            out = int(rng.choice([hidden, 2 * hidden]))
            flat = m.op("MatMul", [m.op("Reshape", [x, m.ints([-1, hidden])]),
                                   m.weight([hidden, out], 1.0 / np.sqrt(hidden))])
            lead = m.op("Shape", [x], start=0, end=2)
            x = m.op("Reshape", [flat, m.op("Concat", [lead, m.ints([out])], axis=0)])
            hidden = out
        elif kind == "seq_first":
            t = m.op("Transpose", [x], perm=[1, 0, 2])
            x = m.op("Transpose", [m.op("Add", [t, m.weight([hidden], 0.1)])], perm=[1, 0, 2])
        elif kind == "tied" and embedding is not None and embedding[1] == hidden:
            x = m.op("MatMul", [x, m.op("Transpose", [embedding[0]], perm=[1, 0])])
            hidden = VOCAB
        elif kind == "einsum":
            out = int(rng.choice([hidden, 2 * hidden]))
            x = m.op("Einsum", [x, m.weight([hidden, out], 1.0 / np.sqrt(hidden))],
                     equation="bsh,hk->bsk")
            hidden = out
        elif kind == "gemm":
            out = int(rng.choice([hidden, 2 * hidden]))
            flat = m.op("Gemm", [m.op("Reshape", [x, m.ints([-1, hidden])]),
                                 m.weight([out, hidden], 1.0 / np.sqrt(hidden)),
                                 m.weight([out], 0.1)], transB=1)
            lead = m.op("Shape", [x], start=0, end=2)
            x = m.op("Reshape", [flat, m.op("Concat", [lead, m.ints([out])], axis=0)])
            hidden = out
        elif kind == "columns" and hidden >= 8:
            keep = sorted(rng.choice(hidden, size=hidden // 2, replace=False).tolist())
            x = m.op("Gather", [x, m.ints(keep)], axis=2)
            hidden = len(keep)
        elif kind == "expand":
            r = m.op("ReduceMean", [x, m.ints([-1])], keepdims=1)
            x = m.op("Mul", [x, m.op("Expand", [r, m.op("Shape", [x])])])
        elif kind == "seq_slice":  # the first half of the sequence, then the whole again
            half = m.op("Slice", [x, m.ints([0]), m.ints([4]), m.ints([1])])
            rest = m.op("Slice", [x, m.ints([4]), m.ints([2**62]), m.ints([1])])
            x = m.op("Concat", [m.op("Tanh", [half]), rest], axis=1)
        elif kind == "gqa" and hidden % 8 == 0:  # K/V heads repeated for the query heads
            kv, rep_ = 2, int(rng.choice([2, 4]))
            d = hidden // 8
            q = m.op("Transpose", [m.op("Reshape", [
                m.op("MatMul", [x, m.weight([hidden, kv * rep_ * d], 1.0 / np.sqrt(hidden))]),
                m.ints([0, 0, kv * rep_, d])])], perm=[0, 2, 1, 3])  # [b, H, s, d]
            k = m.op("Transpose", [m.op("Reshape", [
                m.op("MatMul", [x, m.weight([hidden, kv * d], 1.0 / np.sqrt(hidden))]),
                m.ints([0, 0, kv, d])])], perm=[0, 2, 1, 3])  # [b, kv, s, d]
            k5 = m.op("Unsqueeze", [k, m.ints([2])])  # [b, kv, 1, s, d]
            shape = m.op("Concat", [m.op("Shape", [k5], start=0, end=2), m.ints([rep_]),
                                    m.op("Shape", [k5], start=3, end=5)], axis=0)
            k = m.op("Reshape", [m.op("Expand", [k5, shape]), m.ints([0, kv * rep_, -1, d])])
            scores = m.op("Softmax", [m.op("MatMul", [q, m.op("Transpose", [k], perm=[0, 1, 3, 2])])],
                          axis=-1)
            o = m.op("Transpose", [m.op("MatMul", [scores, k])], perm=[0, 2, 1, 3])
            x = m.op("MatMul", [m.op("Reshape", [o, m.ints([0, 0, kv * rep_ * d])]),
                                m.weight([kv * rep_ * d, hidden], 1.0 / np.sqrt(hidden))])
        elif kind == "folded" and hidden % 4 == 0:  # heads folded into the batch (bloom)
            h, d = 4, hidden // 4
            q = m.op("Reshape", [m.op("Transpose", [m.op("Reshape", [x, m.ints([0, 0, h, d])])],
                                      perm=[0, 2, 1, 3]), m.ints([-1, 0, d])])  # [b·h, s, d]
            scores = m.op("Softmax", [m.op("MatMul", [q, m.op("Transpose", [q], perm=[0, 2, 1])])],
                          axis=-1)
            o = m.op("MatMul", [scores, q])
            lead = m.op("Shape", [x], start=0, end=1)
            o = m.op("Reshape", [o, m.op("Concat", [lead, m.ints([h, -1, d])], axis=0)])
            x = m.op("Reshape", [m.op("Transpose", [o], perm=[0, 2, 1, 3]), m.ints([0, 0, hidden])])
        elif kind == "mask" and hidden % 4 == 0:  # scores plus a causal mask [1, 1, s, s]
            h, d = 4, hidden // 4
            q = m.op("Transpose", [m.op("Reshape", [x, m.ints([0, 0, h, d])])], perm=[0, 2, 1, 3])
            scores = m.op("MatMul", [q, m.op("Transpose", [q], perm=[0, 1, 3, 2])])
            seq = m.op("Shape", [x], start=1, end=2)
            ones = m.op("ConstantOfShape", [m.op("Concat", [seq, seq], axis=0)],
                        value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]))
            causal = m.op("Mul", [m.op("Sub", [m.op("Trilu", [ones], upper=0), ones]),
                                  m.weight([1], 0.0)])
            causal = m.op("Add", [causal, m.op("Mul", [m.op("Sub", [ones, m.op("Trilu", [ones], upper=0)]),
                                                       m.ints_f(-1e4)])])
            probs = m.op("Softmax", [m.op("Add", [scores, causal])], axis=-1)
            o = m.op("Transpose", [m.op("MatMul", [probs, q])], perm=[0, 2, 1, 3])
            x = m.op("Reshape", [o, m.ints([0, 0, hidden])])
        elif kind == "squeeze":  # a summary of the hidden dim, squeezed and unsqueezed
            # (ReduceMax: after "center" a sum over the same dim is rounding noise, which a
            # LayerNormalization then scales up to differ between implementations)
            r = m.op("ReduceMax", [x, m.ints([-1])], keepdims=0)  # [b, s]
            x = m.op("Mul", [x, m.op("Tanh", [m.op("Unsqueeze", [r, m.ints([-1])])])])
        elif kind == "if_squeeze":  # TorchScript's squeeze(-1): an If on a dim known to be 1
            r = m.op("ReduceMax", [x, m.ints([-1])], keepdims=1)  # [b, s, 1]
            last = m.op("Gather", [m.op("Shape", [r]), m.ints(-1)], axis=0)
            axes, t, e = m.name("axes"), m.name("then_out"), m.name("else_out")
            then = helper.make_graph(  # (its axes an initializer of the branch)
                [helper.make_node("Squeeze", [r, axes], [t])], m.name("then"), [],
                [helper.make_tensor_value_info(t, TensorProto.FLOAT, None)],
                [numpy_helper.from_array(np.array([-1], dtype=np.int64), axes)])
            other = helper.make_graph(
                [helper.make_node("Identity", [r], [e])], m.name("else"), [],
                [helper.make_tensor_value_info(e, TensorProto.FLOAT, None)])
            squeezed = m.op("If", [m.op("Equal", [last, m.ints(1)])], then_branch=then,
                            else_branch=other)  # [b, s]
            x = m.op("Mul", [x, m.op("Tanh", [m.op("Unsqueeze", [squeezed, m.ints([-1])])])])
        elif kind == "flip":  # torch.flip: a Slice of step -1 (over a split dim it reorders)
            axis = int(rng.choice([1, 2]))
            end = -(2**63 - 1) if rng.random() < 0.5 else -1000
            flipped = m.op("Slice", [x, m.ints([-1]), m.ints([end]), m.ints([axis]), m.ints([-1])])
            x = m.op("Add", [x, m.op("Tanh", [flipped])]) if rng.random() < 0.5 else flipped
        elif kind == "split_sequence":  # TorchScript's split with sizes it computes
            x = split_sequence(m, rng, x, hidden)
        saved.append((x, hidden))
        if rng.random() < 0.15 and not outputs:
            outputs.append((x, hidden))
    outputs.append((x, hidden))
    outs, seen = [], set()
    for k, (v, hd) in enumerate(outputs):
        if v in seen or v in ("x",):
            continue
        seen.add(v)
        name = f"y{k}"
        m.nodes.append(helper.make_node("Identity", [v], [name], name=m.name("out")))
        outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [None, None, None]))
    graph = helper.make_graph(m.nodes, f"fuzz_{seed}", inputs, outs, m.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model


def write_inputs(model, folder, seed):
    rng = np.random.default_rng(seed + 1)
    os.makedirs(folder, exist_ok=True)
    feeds = {}
    for k, i in enumerate(model.graph.input):
        shape = [DIMS[d.dim_param] if d.dim_param else d.dim_value
                 for d in i.type.tensor_type.shape.dim]
        if i.type.tensor_type.elem_type == TensorProto.INT64:
            a = rng.integers(0, VOCAB, shape).astype(np.int64)
        else:
            a = rng.uniform(-1, 1, shape).astype(np.float32)
        feeds[i.name] = a
        with open(os.path.join(folder, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, i.name).SerializeToString())
    return feeds


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p.returncode, (p.stdout + p.stderr).strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build", help="where tp-compile and tp-run are")
    ap.add_argument("--tp-compile", help="tp-compile to use (default: BIN/tp-compile)")
    ap.add_argument("--tp-run", help="tp-run to use (default: BIN/tp-run)")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--tp", type=int, nargs="+", default=[2, 4], help="the N of each plan")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="/tmp/tpc_fuzz_models")
    args = ap.parse_args()
    try:
        import onnxruntime as ort
    except ImportError:
        print("fuzz_models: onnxruntime is not importable; skipped")
        return SKIP

    compile_bin = args.tp_compile or os.path.join(args.bin, "tp-compile")
    run_bin = args.tp_run or os.path.join(args.bin, "tp-run")
    os.makedirs(args.out, exist_ok=True)
    failures, skipped, checked = 0, 0, 0
    for seed in range(args.seed, args.seed + args.count):
        work = os.path.join(args.out, f"work_{seed}")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        model = build(seed)
        path = os.path.join(work, "model.onnx")
        onnx.save(model, path)
        feeds = write_inputs(model, os.path.join(work, "inputs"), seed)
        hidden_in = next((d.dim_value for i in model.graph.input if i.name == "x"
                          for d in i.type.tensor_type.shape.dim[2:]), 0)
        try:
            onnx.checker.check_model(model, full_check=True)
            want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
            widths = {o.name: w.shape[-1] for o, w in zip(model.graph.output, want)}
        except Exception as e:  # the generator's fault
            skipped += 1
            print(f"seed {seed}: skipped ({str(e).splitlines()[0][:100]})", flush=True)
            shutil.rmtree(work)
            continue
        # atol scaled by the outputs' magnitude: a chain of attention layers may reach
        # |y| ~ 50, where two correct implementations (tpc unsharded and onnxruntime, other
        # summation orders) differ by ~1e-3 on an element near 0 (seed 888085).
        atol = 1e-4 * max([1.0] + [float(np.abs(w).max()) for w in want if w.size])
        rng = np.random.default_rng(seed + 2)
        problems = []
        for n in args.tp:
            flags = ["--objective", str(rng.choice(["balanced", "memory", "time"]))]
            if rng.random() < 0.3:
                flags += ["--sequence-parallel", "--divisible", "seq"]
            if rng.random() < 0.3:
                flags += ["--divisible", "batch"]
            # Split graph inputs and outputs, which tp-run slices and assembles: by the
            # last dim, in blocks, in groups of ranks (where the sizes allow).
            for value, width in ([("x", hidden_in)] if hidden_in else []) + [
                    (o.name, widths[o.name]) for o in model.graph.output]:
                choices = [p for p, parts in (("S(-1)", n), ("S(-1/2)", 2 * n), ("S(-1@2)", 2))
                           if width % parts == 0 and not (p == "S(-1@2)" and n == 2)]
                if choices and rng.random() < 0.25:
                    flag = "--input-placement" if value == "x" else "--output-placement"
                    flags += [flag, f"{value}={rng.choice(choices)}"]
            plan = os.path.join(work, f"plan{n}")
            out_dir = os.path.join(work, f"out{n}")
            compile_cmd = [compile_bin, path, "--tp", str(n), "-o", plan, "--force", "--quiet"] + flags
            run_cmd = [run_bin, plan, "--ranks", "threads", "--check-against", path,
                       "--input-dir", os.path.join(work, "inputs"), "--output-dir", out_dir,
                       "--quiet", "--no-verify", "--rtol", "1e-3", "--atol", f"{atol:.3g}"]
            rc, text = run(compile_cmd)
            if rc == 2 and "splits into" in text and "equal parts" in text:
                continue  # tp-compile's refusal of a model with nothing to split at this N
            if rc == 0:
                rc, text = run(run_cmd)
            if rc == 0:
                for k, w in enumerate(want):
                    got = numpy_helper.to_array(onnx.load_tensor(os.path.join(out_dir, f"output_{k}.pb")))
                    if got.shape != w.shape or not np.allclose(got, w, rtol=1e-3, atol=atol):
                        rc, text = 1, f"output {k} differs from onnxruntime's"
            checked += 1
            if rc != 0:
                problems.append(f"N={n} {' '.join(flags)}: {text[-500:]}\n  {' '.join(compile_cmd)}\n"
                                f"  {' '.join(run_cmd)}")
        if problems:
            failures += 1
            keep = os.path.join(args.out, f"fail_{seed}")
            shutil.rmtree(keep, ignore_errors=True)
            shutil.move(work, keep)
            with open(os.path.join(keep, "why.txt"), "w") as f:
                f.write("\n".join(problems) + "\n")
            print(f"seed {seed}: FAIL\n  " + "\n  ".join(problems), flush=True)
        else:
            shutil.rmtree(work)
            print(f"seed {seed}: pass", flush=True)
    print(f"\n{checked} plans checked, {failures} model(s) failed, {skipped} skipped; "
          f"failures in {args.out}/fail_*")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
