#!/usr/bin/env python3
"""ctest entry: int4 decoders (onnxruntime's MatMulNBits) split as Megatron splits them.

usage: check_int4.py --tp-compile PATH --tp-run PATH --work DIR

Generates Llama-shaped decoders with a KV cache whose projections and LM head are
quantized to 4 bits by onnxruntime's MatMulNBitsQuantizer (tools/make_llama_synthetic.py
--int4 16: what onnxruntime-genai's builder writes), with attention as ONNX ops or as
onnxruntime-genai writes it (--gqa-op: com.microsoft GroupQueryAttention with rotary,
seqlens from an attention_mask), 4 and 2 K/V heads each, and checks that
  - tpc's unsharded run (tp = 1) equals onnxruntime's on the same inputs (rtol, atol 1e-4:
    both dequantize to float and multiply in float32);
  - at N = 2 and 4 under the memory objective, the packed weights of q/k/v/gate/up are
    split by output features (B placed S(0)) and those of o_proj/down_proj by whole
    blocks of K (S(1)), each layer has exactly 2 all-reduces, and the cache is split;
  - the default objective's plans at N = 2 and 4 give the unsharded outputs
    (`tp-run --check-against`) on a decoding step and a prefill, for 4 K/V heads and for
    2 (grouped-query attention: at N = 4 each K/V head on its group of 2 ranks), and
    `tp-run --generate 16` gives the unsharded model's token ids; and unsharded, tp-run's
    greedy ids are onnxruntime's own greedy loop's (presents fed back as pasts);
  - a decoding step of a padded batch (GroupQueryAttention, rows of 6 and 4 keys) gives
    onnxruntime's logits and presents at N = 1, 2 and 4.

Exit status: 0 all pass, 1 something failed, 77 onnxruntime, onnx_ir or numpy missing.
"""
import argparse
import os
import shutil
import sys

from decoder_checks import check_generate, run

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(HERE, "..", "..", "tools", "make_llama_synthetic.py")
COLUMN = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
ROW = ("o_proj", "down_proj")


def generate(work, kv, gqa_op=False):
    model = os.path.join(work, f"int4_kv{kv}{'_gqa_op' if gqa_op else ''}.onnx")
    code, out = run([sys.executable, GENERATOR, "--past", "--layers", "2", "--hidden", "256",
                     "--heads", "8", "--kv-heads", str(kv), "--intermediate", "512",
                     "--int4", "16", "-o", model] + (["--gqa-op"] if gqa_op else []))
    return model if code == 0 else None, out


def decoder_feeds(m, rng, batch, seq, mask):
    """input_ids [batch, seq], `mask` as attention_mask, pasts of 5 positions."""
    import numpy as np
    feeds = {}
    for vi in m.graph.input:
        if vi.name == "input_ids":
            feeds[vi.name] = rng.integers(0, 512, (batch, seq)).astype(np.int64)
        elif vi.name == "attention_mask":
            feeds[vi.name] = mask
        else:
            feeds[vi.name] = rng.standard_normal(
                (batch, vi.type.tensor_type.shape.dim[1].dim_value, 5, 32)).astype(np.float32)
    return feeds


def write_inputs(m, feeds, folder):
    from onnx import numpy_helper
    os.makedirs(folder, exist_ok=True)
    for k, vi in enumerate(m.graph.input):
        with open(os.path.join(folder, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[vi.name], vi.name).SerializeToString())


def compare_run(args, m, plan, inputs, outputs, want, label):
    """Runs `plan` on the inputs in `inputs`; its outputs against `want` (onnxruntime's),
    rtol and atol 1e-4."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    shutil.rmtree(outputs, ignore_errors=True)
    code, out = run([args.tp_run, plan, "--input-dir", inputs, "--output-dir", outputs])
    if code != 0:
        return [f"{label}: tp-run: {out}"]
    errors = []
    for k, (vi, w) in enumerate(zip(m.graph.output, want)):
        got = numpy_helper.to_array(onnx.load_tensor(os.path.join(outputs, f"output_{k}.pb")))
        if got.shape != w.shape or not np.allclose(got, w, rtol=1e-4, atol=1e-4):
            err = float(np.abs(got - w).max()) if got.shape == w.shape else "shape"
            errors.append(f"{label}: {vi.name} differs from onnxruntime (max abs err {err})")
    return errors


def check_against_onnxruntime(args, model, work):
    import numpy as np
    import onnx
    import onnxruntime as ort
    plan = os.path.join(work, "tp1")
    code, out = run([args.tp_compile, model, "--tp", "1", "-o", plan, "--quiet", "--force"])
    if code != 0:
        return [f"tp-compile --tp 1: {out}"]
    m = onnx.load(model, load_external_data=False)
    # onnxruntime's GroupQueryAttention takes a prompt after a past in batch 1 only.
    batch = 1 if any(n.op_type == "GroupQueryAttention" for n in m.graph.node) else 2
    feeds = decoder_feeds(m, np.random.default_rng(1), batch, 3, np.ones((batch, 5 + 3), np.int64))
    inputs = os.path.join(work, "inputs")
    write_inputs(m, feeds, inputs)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    return compare_run(args, m, plan, inputs, os.path.join(work, "outputs"), want, "tp-run --tp 1")


def check_padded_decode(args, model, work):
    """A decoding step of a padded batch (GroupQueryAttention): row 0 holds all 5 + 1 keys,
    row 1 only 4 (its attention_mask has 4 ones, so its seqlens_k is 3): the plans at
    N = 1, 2 and 4 give onnxruntime's logits and presents."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    m = onnx.load(model, load_external_data=False)
    mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 1]], np.int64)
    feeds = decoder_feeds(m, np.random.default_rng(2), 2, 1, mask)
    inputs = os.path.join(work, "padded_inputs")
    write_inputs(m, feeds, inputs)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    errors = []
    for n in (1, 2, 4):
        label = f"{os.path.basename(model)} padded decode N={n}"
        plan = os.path.join(work, f"padded_tp{n}")
        code, out = run([args.tp_compile, model, "--tp", str(n), "-o", plan, "--quiet", "--force"])
        if code != 0:
            errors.append(f"{label}: tp-compile: {out}")
            continue
        errors += compare_run(args, m, plan, inputs, os.path.join(work, f"padded_outputs_{n}"),
                              want, label)
    return errors


def ort_greedy(model, prompt, steps):
    """onnxruntime's greedy loop: the presents fed back as the pasts, one token a step."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    m = onnx.load(model, load_external_data=False)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in m.graph.output]
    batch = prompt.shape[0]
    feed = {}
    for vi in m.graph.input:
        if vi.name.startswith("past_key_values."):
            dims = vi.type.tensor_type.shape.dim
            feed[vi.name] = np.zeros((batch, dims[1].dim_value, 0, dims[3].dim_value), np.float32)
    ids, out = prompt, []
    for _ in range(steps):
        feed["input_ids"] = ids
        past = next(v for k, v in feed.items() if k.startswith("past_key_values.")).shape[2]
        if any(vi.name == "attention_mask" for vi in m.graph.input):
            feed["attention_mask"] = np.ones((batch, past + ids.shape[1]), np.int64)
        res = dict(zip(names, sess.run(None, feed)))
        nxt = res["logits"][:, -1, :].argmax(-1)
        out.append(nxt)
        for k in list(feed):
            if k.startswith("past_key_values."):
                feed[k] = res["present." + k[len("past_key_values."):]]
        ids = nxt[:, None].astype(np.int64)
    return np.stack(out, 1)


def check_generation_against_onnxruntime(args, model, work):
    """tp-run --generate on the tp=1 plan gives onnxruntime's greedy ids."""
    import numpy as np
    plan = os.path.join(work, "tp1")
    # onnxruntime's GroupQueryAttention takes a prompt after a past in batch 1 only.
    rows = [[1, 2, 3, 4]] if "gqa_op" in model else [[1, 2, 3, 4], [5, 6, 7, 8]]
    want = ort_greedy(model, np.array(rows, np.int64), 12)
    code, out = run([args.tp_run, plan, "--generate", "12", "--prompt",
                     "; ".join(" ".join(map(str, r)) for r in rows)])
    if code != 0:
        return [f"{model}: tp-run --generate: {out}"]
    errors = []
    for b in range(len(rows)):
        got = [int(t) for t in out.split(f"tokens (row {b}): ")[1].split("\n")[0].split()]
        expected = [int(t) for t in want[b]]
        if got != expected:
            errors.append(f"{model} row {b}: tp-run generated {got}, onnxruntime {expected}")
    return errors


def check_megatron(args, model, work, n):
    import onnx
    label = f"{os.path.basename(model)} N={n} memory objective"
    plan = os.path.join(work, f"memory_tp{n}")
    code, ir = run([args.tp_compile, model, "--tp", str(n), "-o", plan, "--quiet", "--force",
                    "--objective", "memory", "--dump-ir", "-"])
    if code != 0:
        return [f"{label}: tp-compile failed: {ir}"]
    errors = []
    seen = 0
    for line in ir.splitlines():
        if "_Q4:" not in line or "constant" not in line:
            continue
        seen += 1
        want = "S(0)" if any(p in line for p in COLUMN) else "S(1)" if any(
            p in line for p in ROW) else None
        if want and f"sharding({want})" not in line:
            errors.append(f"{label}: {line.strip()[:100]}: expected {want}")
    if seen != 15:
        errors.append(f"{label}: {seen} packed weights in the IR, expected 15")
    rank0 = onnx.load(os.path.join(plan, "rank0.onnx"), load_external_data=False)
    for layer in (0, 1):
        reduces = [node for node in rank0.graph.node if node.domain == "tpc" and
                   node.op_type == "AllReduce" and f"/layers.{layer}/" in node.input[0]]
        if len(reduces) != 2:
            errors.append(f"{label}: layer {layer} has {len(reduces)} all-reduces, expected 2")
    import json
    with open(os.path.join(plan, "plan.json")) as f:
        manifest = json.load(f)
    for v in manifest["inputs"] + manifest["outputs"]:
        if v["value"].startswith(("past_key_values.", "present.")) and \
                v["placements"][0]["kind"] != "SHARD":
            errors.append(f"{label}: the cache value {v['value']} is not split")
    return errors


def check_equivalence(args, model, work, n):
    label = f"{os.path.basename(model)} N={n}"
    plan = os.path.join(work, f"tp{n}")
    code, out = run([args.tp_compile, model, "--tp", str(n), "-o", plan, "--quiet", "--force"])
    if code != 0:
        return [f"{label}: tp-compile failed: {out}"]
    errors = []
    # (Random inputs are no decoding state for GroupQueryAttention's attention_mask-derived
    # lengths: that model is checked by generation only.)
    gqa_op = "gqa_op" in model
    for past, seq in (() if gqa_op else ((5, 3), (0, 8))):
        code, out = run([args.tp_run, plan, "--check-against", model, "--dim", "batch=2",
                         "--dim", f"seq={seq}", "--dim", f"past={past}"])
        if code != 0 or "PASS" not in out:
            errors.append(f"{label} past={past} seq={seq}: tp-run --check-against: {out}")
    errors += check_generate(args.tp_run, plan, model, label)
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tp-compile", required=True)
    ap.add_argument("--tp-run", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
        import onnx_ir  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e}")
        return SKIP
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    errors = []
    for kv, gqa_op in ((4, False), (2, False), (4, True), (2, True)):
        model, out = generate(args.work, kv, gqa_op)
        if model is None:
            errors.append(f"generator failed (kv {kv}): {out}")
            continue
        work = os.path.join(args.work, os.path.basename(model)[:-5])
        os.makedirs(work)
        if gqa_op:
            errors += check_padded_decode(args, model, work)
        if kv == 4:
            errors += check_against_onnxruntime(args, model, work)
            errors += check_generation_against_onnxruntime(args, model, work)
            for n in (2, 4):
                errors += check_megatron(args, model, work, n)
        for n in (2, 4):
            errors += check_equivalence(args, model, work, n)
    for e in errors:
        print("FAIL:", e)
    print(f"{len(errors)} failures")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
