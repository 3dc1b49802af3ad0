"""The package's exceptions (re-exported by prewarm_runtime) and the checks of every value that
crosses into C: ctypes truncates silently (a str at its first NUL, an int modulo 2**32, a double
past float32's range to inf), so each value is checked before it is converted, and refused with
an InvalidArgumentError (a ValueError) naming the argument and the value as given, or a TypeError
for a value of the wrong kind."""

import operator
import os
import struct

# The C ABI's return codes (prewarm_runtime.h).
OK, ENOGPU, EINVAL, EMISS, EFAIL, ENOCOMPILER = 0, 1, 2, 3, 4, 5


class PrewarmError(RuntimeError):
    """An error from the runtime library; `code` is its PREWARM_E* value."""

    def __init__(self, message, code=EFAIL):
        super().__init__(message)
        self.code = code


class NoGpuError(PrewarmError):
    """No GPU or driver (PREWARM_ENOGPU), or a launch on a runtime opened with device=-1."""


class MissError(PrewarmError):
    """Strict mode: a kernel is not in the cache, or the cache was filled for other archs."""


class NoCompilerError(PrewarmError):
    """The compiler this runtime needs (NVRTC, hipRTC) cannot be loaded; the message names it."""


class InvalidArgumentError(PrewarmError, ValueError):
    """A bad argument, or a launcher this cache's model and KV cache dtype never run."""

    def __init__(self, message, code=EINVAL):
        super().__init__(message, code)


for _cls in (PrewarmError, NoGpuError, MissError, NoCompilerError, InvalidArgumentError):
    _cls.__module__ = "prewarm_runtime"

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LLONG_MIN, LLONG_MAX = -(2**63), 2**63 - 1
POINTER_MAX = 2**64 - 1
_SHOWN = 200  # characters of a bad value an error shows


def shown(value):
    """repr(value), cut to a readable length (the size said)."""
    text = repr(value)
    if len(text) <= _SHOWN:
        return text
    return f"{text[:_SHOWN]}... ({len(text)} characters)"


def _where(where, name):
    return f"{where}: {name}" if where else name


def integer(name, value, lo, hi, where=None, why=None):
    """value as a Python int in [lo, hi]: any integral type (int, numpy and torch integers), not a
    bool, a float or a str."""
    if isinstance(value, bool):
        raise TypeError(f"{_where(where, name)} must be an integer, got the bool {value}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{_where(where, name)} must be an integer, got {type(value).__name__} "
                        f"{shown(value)}") from None
    if not lo <= v <= hi:
        raise InvalidArgumentError(f"{_where(where, name)} {v}: "
                                   + (why or f"out of range (must be {lo} to {hi})"))
    return v


def c_int(name, value, where=None):
    return integer(name, value, INT_MIN, INT_MAX, where,
                   f"does not fit a C int ({INT_MIN} to {INT_MAX})")


def c_longlong(name, value, where=None):
    return integer(name, value, LLONG_MIN, LLONG_MAX, where,
                   f"does not fit a C long long ({LLONG_MIN} to {LLONG_MAX})")


def c_float(name, value, where=None):
    """value as a float that a C float holds: past float32's range it would become inf."""
    if isinstance(value, (str, bytes, bool)):
        raise TypeError(f"{_where(where, name)} must be a number, got {type(value).__name__} "
                        f"{shown(value)}")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{_where(where, name)} must be a number, got {type(value).__name__} "
                        f"{shown(value)}") from None
    try:
        struct.pack("<f", f)  # standard size: refuses past float32 (native "f" gives inf)
    except OverflowError:
        raise InvalidArgumentError(f"{_where(where, name)} {f!r}: past a C float's range "
                                   "(+-3.4028235e+38); it would become inf") from None
    return f


def c_string(name, value, where=None, path=False):
    """value as the bytes of a NUL-terminated C string: a str (a path also bytes or os.PathLike),
    with no NUL, which C would end the string at."""
    if path and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        try:
            b = os.fsencode(value) if path else value.encode()
        except UnicodeEncodeError as e:
            raise InvalidArgumentError(f"{_where(where, name)} {shown(value)}: cannot be encoded "
                                       f"({e.reason})") from None
    elif path and isinstance(value, bytes):
        b = value
    else:
        kinds = "a path (str, bytes or os.PathLike)" if path else "a str"
        raise TypeError(f"{_where(where, name)} must be {kinds}, got {type(value).__name__} "
                        f"{shown(value)}")
    if b"\0" in b:
        cut = value[:value.index("\0" if isinstance(value, str) else b"\0")]
        raise InvalidArgumentError(f"{_where(where, name)} {shown(value)}: contains a NUL byte, "
                                   f"where C would end it ({shown(cut)})")
    return b


def pointer(name, value, where=None):
    """A device address (an int, e.g. a tensor's data_ptr()) or None."""
    if value is None:
        return None
    return integer(name, value, 0, POINTER_MAX, where, "is not an address (0 to 2**64 - 1)")
