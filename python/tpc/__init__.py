"""tpc from Python: split an ONNX model for tensor parallelism, and run the plan.

    import tpc
    plan = tpc.compile("model.onnx", tp=4)     # or an onnx.ModelProto
    plan.save("plan/")                          # what `tp-compile -o plan/` writes
    print(plan.report["collectives_per_forward"])
    outputs = tpc.run(plan, {"input_ids": ids})  # numpy in, numpy out (CPU, ranks as threads)

The work is the same C++ as the tp-compile and tp-run tools (tpc::Compile, the CPU
runtime); errors are raised as tpc.Error with the tools' messages.
"""
import json
import os
import shutil
import tempfile

import numpy as np

from . import _tpc

__all__ = ["Error", "Plan", "compile", "run", "__version__"]
__version__ = _tpc.version()


class Error(_tpc.Error):
    """A tpc error: the message the command-line tools print; `code` is the absl status
    code's name ("INVALID_ARGUMENT", "NOT_FOUND", ...)."""


def _reraise(e):
    err = Error(str(e))
    err.code = getattr(e, "code", "UNKNOWN")
    return err


# numpy dtype -> tpc's element type names (ir/dtype.h).
_DTYPES = {
    np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.float16): "f16",
    np.dtype(np.int64): "i64", np.dtype(np.int32): "i32", np.dtype(np.int16): "i16",
    np.dtype(np.int8): "i8", np.dtype(np.uint8): "u8", np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64", np.dtype(np.bool_): "bool",
}


class Plan:
    """A compiled plan in memory (what tpc.compile returns)."""

    def __init__(self, core):
        self._core = core
        self._report = None

    @property
    def tp(self):
        """The number of ranks."""
        return self._core.tp

    @property
    def report(self):
        """report.json as a dict: placements, collectives per forward with their bytes,
        weight bytes per rank, the options, the solver's statistics."""
        if self._report is None:
            self._report = json.loads(self._core.report_json())
        return self._report

    @property
    def explanations(self):
        """The text of each `explain=` value's explanation, in order."""
        return list(self._core.explanations())

    def summary(self, out_dir="(memory)"):
        """The lines tp-compile prints."""
        return self._core.summary(str(out_dir))

    def save(self, dir, force=False):
        """Writes DIR/rank{i}.onnx + rank{i}.weights, plan.json, report.json and
        report.html, all or nothing; `force` replaces a folder that is not empty."""
        try:
            self._core.save(os.fspath(dir), bool(force))
        except _tpc.Error as e:
            raise _reraise(e) from None
        self._report = None  # the report now has the time the save took

    def rank_model(self, rank):
        """Rank `rank`'s model as an onnx.ModelProto, with its weight slice inline."""
        import onnx
        try:
            data = self._core.rank_model(int(rank))
        except _tpc.Error as e:
            raise _reraise(e) from None
        return onnx.load_from_string(data)

    def __repr__(self):
        r = self.report
        kinds = ", ".join(f"{c['count']} {c['kind']}" for c in r["collectives_per_forward"])
        return (f"<tpc.Plan {r['model']} tp={self.tp}: {kinds or 'no collectives'} per forward, "
                f"{r['weights']['per_rank_bytes'] / 2**20:.2f} MiB of weights per rank>")


def _styles_text(styles):
    if styles is None:
        return "", "styles"
    if isinstance(styles, dict):
        return "".join(f"{k}: {v}\n" for k, v in styles.items()), "styles"
    if isinstance(styles, (list, tuple)):
        return "".join(f"{line}\n" for line in styles), "styles"
    path = os.fspath(styles)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except OSError as e:
        err = Error(f"--styles {path}: cannot read the file ({e.strerror})")
        err.code = "NOT_FOUND"
        raise err from None


def _placements(p):
    if p is None:
        return []
    if isinstance(p, dict):
        return [f"{k}={v}" for k, v in p.items()]
    if isinstance(p, str):
        return [p]
    return list(p)


def compile(model, tp=1, *, dtype="f32", objective="balanced", weight_slack=None,
            memory_budget=None, device_profile="h100-nvlink", dims=None, divisible=(),
            sequence_parallel=False, seq_dim=None, styles=None, input_placements=None,
            output_placements=None, explain=()):
    """Compiles `model` into a tensor-parallel plan of `tp` ranks.

    model: a path to an .onnx file (external data beside it), an onnx.ModelProto, or
        the bytes of one.
    The keywords are tp-compile's flags: dims={"batch": 4, "seq": 2048} (--dim),
    divisible=["seq"], sequence_parallel=True, seq_dim="seq", styles= a path, a dict
    {"model.layers.*.self_attn.q_proj": "colwise"} or a list of "PATTERN: STYLE" lines,
    input_placements={"past_*": "S(1)"}, output_placements={"logits": "S(-1)"},
    objective="balanced"|"memory"|"time", weight_slack=0.05, memory_budget="512MiB",
    dtype="f32"|"f16"|"bf16", explain=["value name", ...] (see Plan.explanations).
    """
    options = _tpc.CompileOptions()
    options.tp = int(tp)
    options.dtype = dtype
    options.objective = objective
    options.weight_slack = None if weight_slack is None else float(weight_slack)
    options.memory_budget = None if memory_budget is None else str(memory_budget)
    options.device_profile = device_profile
    options.dims = {str(k): int(v) for k, v in (dims or {}).items()}
    options.divisible = [str(d) for d in divisible]
    options.sequence_parallel = bool(sequence_parallel)
    options.seq_dim = seq_dim
    options.styles, options.styles_origin = _styles_text(styles)
    options.input_placements = _placements(input_placements)
    options.output_placements = _placements(output_placements)
    options.explain = [str(e) for e in explain]
    if isinstance(model, (bytes, bytearray, memoryview)):
        source, is_bytes, name, model_dir = bytes(model), True, "model", os.getcwd()
    elif hasattr(model, "SerializeToString"):
        name = model.graph.name or "model"
        source, is_bytes, model_dir = model.SerializeToString(), True, os.getcwd()
    else:
        path = os.fspath(model)
        source, is_bytes, name, model_dir = path, False, path, os.path.dirname(path)
    try:
        return Plan(_tpc.compile(source, is_bytes, name, model_dir, options))
    except _tpc.Error as e:
        raise _reraise(e) from None


def run(plan, inputs, *, threads=0):
    """Runs a plan on the CPU, every rank a thread of this process, and returns the
    model's outputs (assembled whole) as {name: numpy array}.

    plan: a Plan (saved to a temporary folder first) or the folder of a saved plan.
    inputs: {name: array-like}, the whole inputs the original model takes.
    threads: threads in all (0: as many as the machine has), shared by the ranks.
    """
    items = []
    keep = []
    for name, value in inputs.items():
        a = np.require(value, requirements="C")  # (ascontiguousarray makes a 0-d array 1-d)
        if a.dtype not in _DTYPES:
            err = Error(f"input '{name}': numpy dtype {a.dtype} has no tpc element type")
            err.code = "INVALID_ARGUMENT"
            raise err
        keep.append(a)
        items.append((str(name), _DTYPES[a.dtype], list(a.shape), memoryview(a).cast("B")
                      if a.size else memoryview(bytearray(1))))
    tmp = None
    try:
        if isinstance(plan, Plan):
            tmp = tempfile.mkdtemp(prefix="tpc-plan-")
            plan.save(os.path.join(tmp, "plan"))
            folder = os.path.join(tmp, "plan")
        else:
            folder = os.fspath(plan)
            if folder.endswith(".onnx") and os.path.isfile(folder):
                err = Error(f"{folder}: a model, not a plan folder; compile it first "
                            "(tpc.compile(model, tp=N).save(DIR)) and run DIR")
                err.code = "INVALID_ARGUMENT"
                raise err
        try:
            outs = _tpc.run(folder, items, int(threads))
        except _tpc.Error as e:
            raise _reraise(e) from None
        return {name: np.asarray(array) for name, array in outs}
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
