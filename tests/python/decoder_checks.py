"""Helpers of the decoder checks (check_gqa_cache.py, check_int4.py): running the tools,
and the generation check."""
import subprocess


def run(cmd):
    """Exit code and stdout + stderr of `cmd`."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def check_generate(tp_run, plan, model, label, extra=()):
    """16 greedy tokens from the plan, the cache kept on its ranks: the unsharded model's
    ids. Returns the errors (none or one)."""
    code, out = run([tp_run, plan, "--generate", "16", "--prompt", "1 2 3 4; 5 6 7 8",
                     "--check-against", model] + list(extra))
    if code != 0 or "token ids equal" not in out:
        return [f"{label}: tp-run --generate 16 --check-against: {out}"]
    return []
