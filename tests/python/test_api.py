"""pytest: the Python API (python/tpc): compile, save, rank_model, run, and its errors.

ctest runs this file as a script (python.api): it runs pytest on itself with the build
tree's package on the path (TPC_PYTHONPATH), and exits 77 (skip) only where pytest,
numpy, onnx or onnxruntime is missing.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models")
GPT2 = os.path.join(MODELS, "gpt2.onnx")
MLP = os.path.join(MODELS, "mlp.onnx")

if os.environ.get("TPC_PYTHONPATH"):
    sys.path.insert(0, os.environ["TPC_PYTHONPATH"])
try:
    import numpy as np
    import onnx
    import onnx.numpy_helper
    import onnxruntime as ort
    import pytest
except ImportError as e:
    if __name__ == "__main__":
        print(f"SKIP: {e} (make deps installs pytest, numpy, onnx and onnxruntime)")
        sys.exit(77)
    raise

import tpc  # noqa: E402  (after the path is set)


def ort_outputs(model_path, feeds):
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def gpt2_inputs(batch=2, seq=8):
    rng = np.random.default_rng(0)
    return {"input_ids": rng.integers(0, 512, size=(batch, seq), dtype=np.int64)}


def test_compile_from_a_path_gives_the_plan_and_its_report():
    plan = tpc.compile(GPT2, tp=2)
    assert plan.tp == 2
    r = plan.report
    assert r["tp"] == 2 and r["options"]["objective"] == "balanced"
    kinds = {c["kind"]: c["count"] for c in r["collectives_per_forward"]}
    assert sum(kinds.values()) > 0
    assert r["placements"]["m.transformer.h.0.mlp.c_fc.weight"].startswith("S(")
    assert len(r["per_rank_weight_bytes"]) == 2
    assert r["weights"]["per_rank_bytes"] < r["weights"]["total_bytes"]
    assert "weights per rank" in plan.summary()
    assert "tp=2" in repr(plan)


def test_dims_are_the_sizes_the_report_says():
    small = tpc.compile(GPT2, tp=2, dims={"batch": 1, "seq": 128}).report
    big = tpc.compile(GPT2, tp=2, dims={"batch": 8, "seq": 128}).report
    assert small["options"]["dims"] == {"batch": 1, "seq": 128}
    # An activation collective moves 8 times the bytes at 8 times the batch.
    sizes = {(c["value"], c.get("consumer")): c["bytes"] for c in small["collectives"]
             if "value" in c}
    same = [c for c in big["collectives"] if (c.get("value"), c.get("consumer")) in sizes]
    assert same
    for c in same:
        assert c["bytes"] == pytest.approx(8 * sizes[(c["value"], c.get("consumer"))])


def test_a_model_proto_compiles_as_its_file_does():
    from_file = tpc.compile(GPT2, tp=2)
    from_proto = tpc.compile(onnx.load(GPT2), tp=2)
    from_bytes = tpc.compile(open(GPT2, "rb").read(), tp=2)
    assert from_proto.report["placements"] == from_file.report["placements"]
    assert from_bytes.report["placements"] == from_file.report["placements"]
    a, b = from_file.rank_model(1), from_proto.rank_model(1)
    assert [n.op_type for n in a.graph.node] == [n.op_type for n in b.graph.node]
    assert ([onnx.numpy_helper.to_array(t).tobytes() for t in a.graph.initializer] ==
            [onnx.numpy_helper.to_array(t).tobytes() for t in b.graph.initializer])


def test_save_writes_the_plan_folder_all_or_nothing(tmp_path):
    plan = tpc.compile(MLP, tp=2)
    out = tmp_path / "plan"
    plan.save(out)
    for f in ("plan.json", "report.json", "report.html", "rank0.onnx", "rank1.onnx",
              "rank0.weights", "rank1.weights"):
        assert (out / f).is_file(), f
    with pytest.raises(tpc.Error) as e:
        plan.save(out)
    assert "not empty" in str(e.value) and "force" in str(e.value)
    plan.save(out, force=True)
    # Saved, the report's per-rank bytes are the files'.
    import json
    assert plan.report["per_rank_weight_bytes"] == json.load(
        open(out / "report.json"))["per_rank_weight_bytes"]


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_rank_models_pass_the_full_checker_with_unique_node_names(tp):
    plan = tpc.compile(GPT2, tp=tp)
    for rank in range(tp):
        m = plan.rank_model(rank)
        onnx.checker.check_model(m, full_check=True)
        names = [n.name for n in m.graph.node]
        assert len(names) == len(set(names))
        meta = {p.key: p.value for p in m.metadata_props}
        assert meta["tpc.rank"] == str(rank) and meta["tpc.tp"] == str(tp)
    with pytest.raises(tpc.Error) as e:
        plan.rank_model(tp)
    assert e.value.code == "OUT_OF_RANGE"


def test_the_tp1_rank_model_runs_in_onnxruntime_with_the_originals_outputs():
    m = tpc.compile(GPT2, tp=1).rank_model(0)
    feeds = gpt2_inputs()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)[0]
    want = ort_outputs(GPT2, feeds)
    np.testing.assert_allclose(got, list(want.values())[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_run_gives_onnxruntimes_outputs(tp, tmp_path):
    feeds = gpt2_inputs()
    want = ort_outputs(GPT2, feeds)
    plan = tpc.compile(GPT2, tp=tp)
    for source in (plan, None):
        if source is None:
            plan.save(tmp_path / "p")
            source = str(tmp_path / "p")
        got = tpc.run(source, feeds, threads=2)
        assert list(got) == list(want)
        for name in want:
            assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4)
    got[name][...] = 0  # the arrays are the caller's (writable)


def test_styles_as_a_dict_constrain_the_plan():
    default = tpc.compile(MLP, tp=2).report
    split = [w for w in default["weight_placements"] if w["placement"].startswith("S(")]
    assert split
    # A weight by its name, and the node that reads one by the node's name.
    by_weight = tpc.compile(MLP, tp=2, styles={split[0]["weight"]: "replicate"}).report
    assert by_weight["placements"].get(split[0]["weight"], "R") == "R"
    by_node = tpc.compile(MLP, tp=2, styles=[f"{split[-1]['used_by']}: replicate"]).report
    assert by_node["placements"].get(split[-1]["weight"], "R") == "R"


def test_explain_returns_the_explanation():
    plan = tpc.compile(GPT2, tp=2, explain=["m.transformer.h.0.mlp.c_fc.weight"])
    assert len(plan.explanations) == 1
    assert plan.explanations[0].startswith("m.transformer.h.0.mlp.c_fc.weight:")
    assert "alternatives" in plan.explanations[0]


def test_errors_are_tpc_errors_with_the_tools_messages(tmp_path):
    with pytest.raises(tpc.Error) as e:
        tpc.compile(GPT2, tp=2, dims={"bacth": 4})
    assert e.value.code == "INVALID_ARGUMENT"
    assert "--dim 'bacth'" in str(e.value) and "did you mean 'batch'" in str(e.value)
    with pytest.raises(tpc.Error) as e:
        tpc.compile(str(tmp_path / "missing.onnx"))
    assert e.value.code == "NOT_FOUND" and "missing.onnx" in str(e.value)
    with pytest.raises(tpc.Error) as e:
        tpc.compile(GPT2, tp=0)
    assert "--tp" in str(e.value)
    with pytest.raises(tpc.Error) as e:
        tpc.compile(GPT2, tp=2, objective="fastest")
    assert "expected balanced, memory or time" in str(e.value)
    with pytest.raises(tpc.Error) as e:
        tpc.compile(GPT2, tp=2, styles={"*no_such_thing*": "colwise"})
    assert "no_such_thing" in str(e.value)
    with pytest.raises(tpc.Error) as e:
        tpc.compile(b"not an onnx model")
    assert "model" in str(e.value)
    # tpc.Error is a RuntimeError, so generic handlers see it.
    assert issubclass(tpc.Error, RuntimeError)


def test_dtype_refuses_weights_it_would_not_convert():
    # mlp in f16 throughout: dtype="bf16" would claim bf16 and keep f16 (as tp-compile
    # --dtype bf16 refuses it); "f16" is what it holds.
    m = onnx.load(MLP)
    for t in m.graph.initializer:
        t.CopyFrom(onnx.numpy_helper.from_array(
            onnx.numpy_helper.to_array(t).astype(np.float16), t.name))
    for n in m.graph.node:
        for a in n.attribute:
            if a.HasField("t") and a.t.data_type == onnx.TensorProto.FLOAT:
                a.t.CopyFrom(onnx.numpy_helper.from_array(
                    onnx.numpy_helper.to_array(a.t).astype(np.float16), a.t.name))
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    with pytest.raises(tpc.Error) as e:
        tpc.compile(m, tp=2, dtype="bf16")
    assert "the model's float weights are f16" in str(e.value)
    assert tpc.compile(m, tp=2, dtype="f16").report["tp"] == 2


def test_run_errors_name_the_input_and_the_fix(tmp_path):
    plan = tpc.compile(GPT2, tp=2)
    with pytest.raises(tpc.Error) as e:
        tpc.run(plan, {})
    assert "input_ids" in str(e.value)
    with pytest.raises(tpc.Error) as e:
        tpc.run(plan, {"input_ids": np.zeros((2, 8), dtype=np.float32)})
    assert "input_ids" in str(e.value)
    with pytest.raises(tpc.Error) as e:
        tpc.run(GPT2, gpt2_inputs())
    assert "compile it first" in str(e.value)
    with pytest.raises(tpc.Error) as e:
        tpc.run(str(tmp_path / "nowhere"), gpt2_inputs())
    assert "nowhere" in str(e.value)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"] + sys.argv[1:]))


def test_save_never_replaces_a_folder_of_other_files_or_the_models(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    model = folder / "model.onnx"
    model.write_bytes(open(MLP, "rb").read())
    (folder / "notes.txt").write_text("important")
    plan = tpc.compile(str(model), tp=2)
    for target in (folder, tmp_path):  # the model's folder, and one above it
        with pytest.raises(tpc.Error) as e:
            plan.save(str(target), force=True)
        assert "holds the model" in str(e.value)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("important")
    with pytest.raises(tpc.Error) as e:
        plan.save(str(other), force=True)
    assert "is not a plan" in str(e.value)
    assert model.exists() and (folder / "notes.txt").read_text() == "important"
    assert (other / "notes.txt").read_text() == "important"


def test_run_takes_a_scalar_input(tmp_path):
    # y = x * s, s a 0-d input (np.ascontiguousarray made it [1]).
    from onnx import helper, TensorProto
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "s"], ["y"])], "scalar",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for s in (np.array(2.0, np.float32), np.float32(2.0)):
        out = tpc.run(tpc.compile(m), {"x": x, "s": s})
        np.testing.assert_array_equal(list(out.values())[0], x * 2)
