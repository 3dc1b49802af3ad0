"""The open Runtimes by op_id, the int a prewarm:: custom op (ops.py) carries to find its runtime
(an op's arguments are tensors and scalars). Importing this needs no torch."""

import itertools
import weakref

from ._errors import PrewarmError

_RUNTIMES = {}  # op_id -> weakref to its Runtime
_ids = itertools.count(1)


def register(rt):
    """The op_id of a newly opened Runtime."""
    i = next(_ids)
    _RUNTIMES[i] = weakref.ref(rt)
    return i


def unregister(i):
    _RUNTIMES.pop(i, None)


def runtime(op_id, launcher):
    """The open Runtime of op_id, else a PrewarmError naming the op."""
    ref = _RUNTIMES.get(op_id)
    rt = ref() if ref else None
    if rt is None or not getattr(rt, "_h", None):
        raise PrewarmError(f"prewarm::{launcher}: no open Runtime has op_id {op_id} (closed, or "
                           "opened in another process); an op needs its Runtime open while it "
                           "runs")
    return rt
