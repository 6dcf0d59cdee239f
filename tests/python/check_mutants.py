#!/usr/bin/env python3
"""ctest entry: malformed models, as onnx.checker sees them, through tp-compile.

usage: check_mutants.py --tp-compile PATH --models DIR --work DIR [--count K] [--seed S]

Makes K mutants (seeded, so every run checks the same ones) of the committed models,
one change each: an attribute of another type, an input more or less, a negative dim in
an initializer or a graph input, a required attribute dropped, an op type swapped. Each
goes through onnx.checker.check_model(full_check=True) and `tp-compile --tp 2`:
  - tp-compile never crashes or hangs: exit 0 or 2, within a time limit;
  - a mutant the checker refuses is refused by tp-compile too (exit 2, a message, and
    no output folder);
  - a refused mutant leaves no output and no temporary folder.
Prints the counts, and each failure with the mutation that caused it.

Exit status: 0 all pass, 1 something failed, 77 onnx is not importable.
"""
import argparse
import copy
import os
import random
import shutil
import subprocess
import sys

SKIP = 77
MODELS = ["mlp", "gpt2", "llama", "bert", "gpt2_dynamo", "mlp_dynamo"]


def mutate(model, rng, onnx):
    """One random change to `model` (a copy); returns (model, description) or None."""
    from onnx import AttributeProto, TensorProto
    m = copy.deepcopy(model)
    g = m.graph
    nodes = [n for n in g.node]
    kind = rng.choice(["attr_type", "extra_input", "drop_input", "neg_init_dim", "neg_input_dim",
                       "drop_attr", "op_type"])
    if kind in ("attr_type", "drop_attr"):
        with_attrs = [n for n in nodes if n.attribute]
        if not with_attrs:
            return None
        n = rng.choice(with_attrs)
        a = rng.choice(list(n.attribute))
        if kind == "drop_attr":
            n.attribute.remove(a)
            return m, f"{n.op_type} '{n.name}': attribute {a.name} dropped"
        new = rng.choice([AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.STRING,
                          AttributeProto.INTS, AttributeProto.FLOATS])
        if new == a.type:
            return None
        old = a.type
        a.type = new
        return m, f"{n.op_type} '{n.name}': attribute {a.name} type {old} -> {new}"
    if kind == "extra_input":
        n = rng.choice(nodes)
        if not n.input:
            return None
        k = rng.randint(1, 3)
        for _ in range(k):
            n.input.append(n.input[0])
        return m, f"{n.op_type} '{n.name}': {k} more inputs"
    if kind == "drop_input":
        n = rng.choice([n for n in nodes if n.input] or [None])
        if n is None:
            return None
        del n.input[-1]
        return m, f"{n.op_type} '{n.name}': last input dropped"
    if kind == "neg_init_dim":
        inits = [t for t in g.initializer if len(t.dims) > 0]
        if not inits:
            return None
        t = rng.choice(inits)
        i = rng.randrange(len(t.dims))
        t.dims[i] = -t.dims[i] if t.dims[i] > 0 else -1
        return m, f"initializer '{t.name}': dim {i} = {t.dims[i]}"
    if kind == "neg_input_dim":
        inputs = [i for i in g.input if i.type.tensor_type.shape.dim]
        if not inputs:
            return None
        vi = rng.choice(inputs)
        d = rng.choice(list(vi.type.tensor_type.shape.dim))
        d.dim_value = -rng.randint(1, 8)
        return m, f"input '{vi.name}': a dim = {d.dim_value}"
    n = rng.choice(nodes)
    new = rng.choice(["MatMul", "Add", "Softmax", "Gather", "Reshape", "Transpose", "Concat"])
    if new == n.op_type:
        return None
    old = n.op_type
    n.op_type = new
    return m, f"node '{n.name}': {old} -> {new}"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tp-compile", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=9)
    args = ap.parse_args()
    try:
        import onnx
        import onnx.checker
    except ImportError:
        print("onnx is not importable: skipped")
        return SKIP
    rng = random.Random(args.seed)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    models = {name: onnx.load(os.path.join(args.models, name + ".onnx")) for name in MODELS}
    failures = []
    counts = {"checker refuses": 0, "checker accepts": 0, "tp-compile refuses": 0}
    made = 0
    while made < args.count:
        name = rng.choice(MODELS)
        got = mutate(models[name], rng, onnx)
        if got is None:
            continue
        mutant, what = got
        made += 1
        path = os.path.join(args.work, f"m{made}.onnx")
        onnx.save(mutant, path)
        try:
            onnx.checker.check_model(path, full_check=True)
            refused = False
        except Exception:  # noqa: BLE001 - any checker error counts as a refusal
            refused = True
        counts["checker refuses" if refused else "checker accepts"] += 1
        out = os.path.join(args.work, f"plan{made}")
        try:
            r = subprocess.run([args.tp_compile, path, "--tp", "2", "--quiet", "-o", out],
                               capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            failures.append(f"{name}: {what}: tp-compile hung (60 s)")
            continue
        label = f"{name}: {what}"
        if r.returncode not in (0, 2):
            failures.append(f"{label}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
            continue
        if r.returncode == 2:
            counts["tp-compile refuses"] += 1
            if "tp-compile: error:" not in r.stderr:
                failures.append(f"{label}: exit 2 without an error message")
            if os.path.exists(out):
                failures.append(f"{label}: refused, but {out} exists")
        elif refused:
            failures.append(f"{label}: onnx.checker refuses it, tp-compile compiled it")
        leftovers = [e for e in os.listdir(args.work) if ".tmp-" in e]
        if leftovers:
            failures.append(f"{label}: temporary folders left: {leftovers}")
        shutil.rmtree(out, ignore_errors=True)
        os.remove(path)
    print(f"{made} mutants of {', '.join(MODELS)}: " +
          ", ".join(f"{k} {v}" for k, v in counts.items()))
    for f in failures:
        print("FAIL", f)
    print(f"{made - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
