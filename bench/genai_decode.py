#!/usr/bin/env python3
"""Decode speed of an int4 Llama-shaped decoder: tp-run --generate at N = 1 and N = 2
(processes) against onnxruntime-genai's own generate loop on the unsharded model.

    python3 bench/genai_decode.py --tp-compile build/tp-compile --tp-run build/tp-run \\
        --work build/bench/genai [--layers 6 --hidden 2048 --rounds 3 --new 64]

The model is written by tools/make_llama_synthetic.py --gqa-op --int4 32 (attention as
onnxruntime-genai's model builder writes it: GroupQueryAttention with rotary, MatMulNBits
weights from onnxruntime's quantizer) with a genai_config.json beside it, so that
onnxruntime-genai loads the same file tpc compiles. Per round, interleaved: genai (greedy,
the prompt appended, then one token per step), tp-run --generate on the tp=1 plan, and on
the tp=2 plan as 2 processes; every run with 2 threads in total (the 2 ranks 1 each).
Reports the medians of decode tokens/s (prefill excluded) and whether the three generated
the same ids. Needs onnxruntime-genai, onnxruntime, onnx_ir, numpy.

--model DIR takes an onnxruntime-genai folder instead (model.onnx, genai_config.json: an
export of the builder, e.g. Qwen 3.5 from tools/make_genai_exports.py --archs qwen35
--precisions int4 --set hidden_size=1024 ...); its decoder's session threads are set to
--threads in a copy of the folder's config.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(HERE, "..", "tools", "make_llama_synthetic.py")


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def given_model(a):
    """The --model folder, its genai_config.json's threads set to --threads (the original
    kept as genai_config.json.orig)."""
    folder = a.model
    config_path = os.path.join(folder, "genai_config.json")
    if not os.path.exists(config_path + ".orig"):
        os.replace(config_path, config_path + ".orig")
    config = json.load(open(config_path + ".orig"))
    options = config["model"]["decoder"].setdefault("session_options", {})
    options["intra_op_num_threads"] = a.threads
    with open(config_path, "w") as f:
        json.dump(config, f, indent=1)
    return folder, os.path.join(folder, "model.onnx")


def write_model(a):
    folder = os.path.join(a.work, f"llama_int4_{a.layers}l_{a.hidden}")
    model = os.path.join(folder, "model.onnx")
    if not os.path.exists(model):
        os.makedirs(folder, exist_ok=True)
        t = time.time()
        print(run([sys.executable, GENERATOR, "--gqa-op", "--int4", "32", "--layers", str(a.layers),
                   "--hidden", str(a.hidden), "--heads", str(a.heads),
                   "--kv-heads", str(a.kv_heads),
                   "--intermediate", str(a.intermediate), "--vocab", str(a.vocab), "--max-pos",
                   "512", "-o", model]).strip(), f"({time.time() - t:.0f} s)")
    config = {
        "model": {
            "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "context_length": 512,
            "type": "llama", "vocab_size": a.vocab,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": [],
                                    "intra_op_num_threads": a.threads},
                "filename": "model.onnx", "head_size": a.hidden // a.heads,
                "hidden_size": a.hidden, "num_attention_heads": a.heads,
                "num_key_value_heads": a.kv_heads, "num_hidden_layers": a.layers,
                "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                           "past_key_names": "past_key_values.%d.key",
                           "past_value_names": "past_key_values.%d.value"},
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                            "present_value_names": "present.%d.value"}}},
        "search": {"do_sample": False, "num_beams": 1, "past_present_share_buffer": False}}
    with open(os.path.join(folder, "genai_config.json"), "w") as f:
        json.dump(config, f, indent=1)
    return folder, model


def genai_round(folder, prompt, new):
    import numpy as np
    import onnxruntime_genai as og
    model = og.Model(folder)
    params = og.GeneratorParams(model)
    total = len(prompt) + new
    params.set_search_options(max_length=total, min_length=total, do_sample=False)
    gen = og.Generator(model, params)
    t = time.perf_counter()
    gen.append_tokens(np.array([prompt], dtype=np.int32))  # the prefill
    gen.generate_next_token()
    ids = [int(gen.get_next_tokens()[0])]
    prefill = time.perf_counter() - t
    t = time.perf_counter()
    while not gen.is_done():
        gen.generate_next_token()
        ids.append(int(gen.get_next_tokens()[0]))
    decode = time.perf_counter() - t
    return ids, (len(ids) - 1) / decode, prefill


def tpc_round(a, plan, prompt, new):
    out = run([a.tp_run, plan, "--generate", str(new), "--prompt", " ".join(map(str, prompt)),
               "--threads", str(a.threads)])
    ids = [int(x) for x in re.search(r"tokens \(row 0\): ([0-9 ]+)", out).group(1).split()]
    m = re.search(r"prefill of \d+ in ([0-9.]+) s; (\d+) decode step\(s\) in ([0-9.]+) s", out)
    return ids, int(m.group(2)) / float(m.group(3)), float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tp-compile", required=True)
    ap.add_argument("--tp-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=5632)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", help="an onnxruntime-genai folder to time instead of the Llama")
    a = ap.parse_args()
    folder, model = given_model(a) if a.model else write_model(a)
    size = sum(os.path.getsize(model + ext) for ext in ("", ".data")
               if os.path.exists(model + ext)) / 2**20
    plans = {}
    for n in (1, 2):
        plans[n] = os.path.join(folder, f"tp{n}")
        run([a.tp_compile, model, "--tp", str(n), "-o", plans[n], "--quiet", "--force"])
    vocab = json.load(open(os.path.join(folder, "genai_config.json")))["model"]["vocab_size"]
    prompt = [(7 * i + 3) % vocab for i in range(a.prompt_len)]
    rows = {"onnxruntime-genai (unsharded)": [], "tp-run N=1": [], "tp-run N=2 (processes)": []}
    ids = {}
    for _ in range(a.rounds):
        for name, fn in (("onnxruntime-genai (unsharded)",
                          lambda: genai_round(folder, prompt, a.new)),
                         ("tp-run N=1", lambda: tpc_round(a, plans[1], prompt, a.new)),
                         ("tp-run N=2 (processes)", lambda: tpc_round(a, plans[2], prompt, a.new))):
            got, tps, prefill = fn()
            rows[name].append((tps, prefill))
            ids[name] = got
    shape = (f"{a.model}" if a.model else
             f"{a.layers} layers, hidden {a.hidden}, {a.heads} heads, {a.kv_heads} K/V heads, "
             f"MLP {a.intermediate}, vocab {a.vocab}, int4 blocks of 32")
    print(f"\nmodel: {shape}: {size:.0f} MiB; prompt "
          f"{a.prompt_len}, {a.new} new tokens, {a.threads} threads in total, {a.rounds} rounds "
          f"interleaved; load average {os.getloadavg()[0]:.2f}")
    base = statistics.median(t for t, _ in rows["onnxruntime-genai (unsharded)"])
    print(f"{'':32} {'decode tok/s':>13} {'vs genai':>9} {'prefill s':>10}")
    for name, r in rows.items():
        tps = statistics.median(t for t, _ in r)
        prefill = statistics.median(p for _, p in r)
        print(f"{name:32} {tps:13.2f} {tps / base:8.2f}x {prefill:10.3f}")
    first = ids["onnxruntime-genai (unsharded)"]
    same = all(v == first for v in ids.values())
    print(f"generated ids: {'the same in all three' if same else 'DIFFER'}")
    if not same:
        for name, v in ids.items():
            print(f"  {name}: {v[:16]} ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
