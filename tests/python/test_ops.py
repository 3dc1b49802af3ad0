"""prewarm_runtime.ops without a GPU: the custom ops' signatures are the Runtime methods' (names,
order, keyword-only arguments, defaults), each mutated argument is a tensor argument, and the
module registers the ops exactly when torch >= 2.4 is there, saying why not otherwise (import
of the package never needs torch). The ops themselves run in test_compile_gpu.py."""

import inspect
import subprocess
import sys

import pytest

import prewarm_runtime
import prewarm_runtime.ops as ops


def _has_custom_op():
    try:
        import torch
    except ImportError:
        return False
    return hasattr(torch.library, "custom_op")


@pytest.mark.parametrize("launcher", list(prewarm_runtime.LAUNCHERS))
def test_each_launcher_has_an_op_with_the_methods_arguments(launcher):
    params, mutated = ops.SIGNATURES[launcher]
    method = inspect.signature(getattr(prewarm_runtime.Runtime, launcher))
    given = list(method.parameters.values())[1:]  # after self
    assert [p.name for p in given] == [n for n, _ in params]
    assert tuple(p.name for p in given if p.kind == p.KEYWORD_ONLY) == \
        ops._KEYWORD.get(launcher, ())
    defaults = {p.name: p.default for p in given if p.default is not inspect.Parameter.empty}
    kinds = dict(params)
    for name, value in defaults.items():
        if value is None:
            assert kinds[name][0] == "T?", f"{name}: only optional tensors default to None"
        else:
            assert ops._DEFAULTS[launcher][name] == value
    tensors = {n for n, (k, _) in params if k in ("T", "T?")}
    assert mutated and set(mutated) <= tensors


def test_every_launcher_and_only_those_have_ops():
    assert set(ops.SIGNATURES) == set(prewarm_runtime.LAUNCHERS)


def test_the_ops_are_registered_exactly_with_torch_2_4_or_later():
    if _has_custom_op():
        import torch

        assert ops.AVAILABLE and ops.WHY is None
        for launcher in prewarm_runtime.LAUNCHERS:
            assert hasattr(torch.ops.prewarm, launcher)
        return
    assert not ops.AVAILABLE and "torch >= 2.4" in ops.WHY
    with pytest.raises(RuntimeError, match=r"prewarm_runtime.ops: .*torch >= 2.4"):
        ops.sparse_decode(None)


def test_importing_the_package_imports_no_torch():
    code = ("import sys, prewarm_runtime\n"
            "assert 'torch' not in sys.modules, 'prewarm_runtime imported torch'\n"
            "print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_an_op_of_a_closed_or_unknown_runtime_names_it():
    from prewarm_runtime import _registry

    with pytest.raises(prewarm_runtime.PrewarmError,
                       match=r"prewarm::sparse_decode: no open Runtime has op_id 987654"):
        _registry.runtime(987654, "sparse_decode")


def test_the_fused_msa_ops_fake_checks_topk_and_the_workspaces_dtype():
    """msa_index_topk_decode's fake implementation (what torch.compile traces): msa_index_decode's
    tensors, then topk int32 [Hi, rows, Kb] and a 1-D uint8 or int32 workspace; all three
    written tensors declared mutated."""
    torch = pytest.importorskip("torch")
    n = "msa_index_topk_decode"
    assert ops.SIGNATURES[n][1] == ("scores", "topk", "workspace")
    assert [p for p, _ in ops.SIGNATURES[n][0]][:6] == \
        [p for p, _ in ops.SIGNATURES["msa_index_decode"][0]]
    bf, i32, u8 = torch.bfloat16, torch.int32, torch.uint8
    good = [torch.zeros(2, 1, 128, dtype=bf), torch.zeros(2, dtype=i32),
            torch.zeros(2, dtype=i32), torch.zeros(2, 4, dtype=i32),
            torch.zeros(8, 128, 128, dtype=bf), torch.zeros(1, 2, 8),
            torch.zeros(1, 2, 16, dtype=i32), torch.zeros(8, dtype=u8)]
    ops._fake_check(n, None, good)
    ops._fake_check(n, None, good[:7] + [torch.zeros(2, dtype=i32)])
    with pytest.raises(ValueError, match=rf"^{n}: workspace must be torch.uint8 or torch.int32, "
                                         r"got torch.float32"):
        ops._fake_check(n, None, good[:7] + [torch.zeros(2)])
    with pytest.raises(ValueError, match=rf"^{n}: workspace must have 1 dimensions, got 2"):
        ops._fake_check(n, None, good[:7] + [torch.zeros(1, 8, dtype=u8)])
    with pytest.raises(ValueError, match=rf"^{n}: topk must be torch.int32, got torch.int64"):
        ops._fake_check(n, None, good[:6] + [torch.zeros(1, 2, 16, dtype=torch.int64), good[7]])
