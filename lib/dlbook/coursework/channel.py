"""The narrow channel between the grader and its sandboxed worker: plain values over pipes.

A message is a dict of JSON data. On the pipe it is a 4-byte big-endian
length, that many bytes of UTF-8 JSON, then the raw bytes of the arrays it
carries (their sizes are listed in the JSON under ``"$buffers"``; in memory,
``message["$buffers"]`` holds the bytes themselves). Values travel by value,
never by reference and never pickled:

=====================  ==================================================
Python value           JSON
=====================  ==================================================
None, bool, int,       themselves (floats may be NaN or infinite)
float, str
list                   a JSON list
tuple                  ``{"$": "tuple", "items": [...]}``
dict with str keys     ``{"$": "dict", "items": [[key, value], ...]}``
fractions.Fraction     ``{"$": "fraction", "n": int, "d": int}``
NumPy array / scalar   ``{"$": "ndarray" | "scalar", "dtype": "<f8", "shape": [...], "buffer": i}``
torch tensor           ``{"$": "tensor", "dtype": "float32", "shape": [...], "buffer": i}``
=====================  ==================================================

Anything else cannot be encoded (:class:`Unsupported`, naming its type). The
decoder accepts exactly this format and nothing else (:class:`ChannelError`):
a malformed or oversized message can make a call fail, never run code in
the process that reads it. A tensor arrives detached, on the CPU.

This module imports only the standard library at import time; NumPy and
torch are imported when a value needs them, so a worker that never sees a
tensor never pays for importing torch.
"""
from __future__ import annotations

import json
import os
import select
import sys
import time
from fractions import Fraction

#: Largest message either side accepts, in bytes (JSON and arrays together).
MAX_MESSAGE_BYTES = 256 * 2**20
#: Deepest nesting of lists, tuples and dicts a value may have.
MAX_DEPTH = 64
#: Key of a message's raw array bytes.
BUFFERS = "$buffers"

#: NumPy dtypes that travel (little-endian), and torch dtypes (bfloat16 travels as int16 bits).
NUMPY_DTYPES = frozenset({"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8",
                          "<f2", "<f4", "<f8", "<c8", "<c16"})
TORCH_DTYPES = {"bool": "|b1", "uint8": "|u1", "int8": "|i1", "int16": "<i2", "int32": "<i4",
                "int64": "<i8", "float16": "<f2", "float32": "<f4", "float64": "<f8",
                "complex64": "<c8", "complex128": "<c16", "bfloat16": "<i2"}


class ChannelError(Exception):
    """A message that does not follow the format (or is too large)."""


class Unsupported(Exception):
    """A value the channel cannot carry; ``type_name`` names its type."""

    def __init__(self, type_name: str):
        super().__init__(type_name)
        self.type_name = type_name


class ChannelTimeout(Exception):
    """The other side did not answer in time."""


class ChannelClosed(Exception):
    """The other side closed its end (it exited or died)."""


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------

def encode(value, buffers: list, depth: int = 0):
    """``value`` as JSON data, its arrays' bytes appended to ``buffers``.

    :class:`Unsupported` for anything but plain values.
    """
    if depth > MAX_DEPTH:
        raise Unsupported(f"{type(value).__name__} nested more than {MAX_DEPTH} levels deep")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, (numpy.ndarray, numpy.generic)):
        return _encode_numpy(value, numpy, buffers)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Fraction):
        return {"$": "fraction", "n": int(value.numerator), "d": int(value.denominator)}
    if isinstance(value, list):
        return [encode(item, buffers, depth + 1) for item in value]
    if isinstance(value, tuple):
        return {"$": "tuple", "items": [encode(item, buffers, depth + 1) for item in value]}
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise Unsupported("dict with keys that are not strings")
        return {"$": "dict", "items": [[str(k), encode(v, buffers, depth + 1)] for k, v in value.items()]}
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return _encode_tensor(value, torch, buffers)
    raise Unsupported(type(value).__name__)


def _encode_numpy(value, numpy, buffers: list):
    kind = "scalar" if isinstance(value, numpy.generic) else "ndarray"
    array = numpy.asarray(value)
    dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
    if dtype.str not in NUMPY_DTYPES:
        raise Unsupported(f"{type(value).__name__} of dtype {array.dtype}")
    array = numpy.asarray(array, dtype=dtype, order="C")
    buffers.append(array.tobytes())
    return {"$": kind, "dtype": dtype.str, "shape": list(array.shape), "buffer": len(buffers) - 1}


def _encode_tensor(value, torch, buffers: list):
    name = str(value.dtype).removeprefix("torch.")
    if name not in TORCH_DTYPES or value.layout != torch.strided or value.is_quantized:
        raise Unsupported(f"tensor of dtype {value.dtype} and layout {value.layout}")
    tensor = value.detach().cpu().resolve_conj().resolve_neg().contiguous()
    if name == "bfloat16":
        tensor = tensor.view(torch.int16)
    buffers.append(tensor.numpy().tobytes())
    return {"$": "tensor", "dtype": name, "shape": list(tensor.shape), "buffer": len(buffers) - 1}


def decode(data, buffers: list, depth: int = 0):
    """The value that :func:`encode` made ``data`` and ``buffers`` from; ChannelError for anything else."""
    if depth > MAX_DEPTH:
        raise ChannelError("value nested too deeply")
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decode(item, buffers, depth + 1) for item in data]
    if type(data) is not dict:
        raise ChannelError(f"unexpected JSON value of type {type(data).__name__}")
    tag = data.get("$")
    if tag == "tuple":
        return tuple(decode(item, buffers, depth + 1) for item in _field(data, "items", list))
    if tag == "dict":
        pairs = _field(data, "items", list)
        if not all(type(p) is list and len(p) == 2 and type(p[0]) is str for p in pairs):
            raise ChannelError("malformed dict")
        return {key: decode(value, buffers, depth + 1) for key, value in pairs}
    if tag == "fraction":
        numerator, denominator = _field(data, "n", int), _field(data, "d", int)
        if denominator <= 0:
            raise ChannelError("malformed fraction")
        return Fraction(numerator, denominator)
    if tag in ("ndarray", "scalar"):
        array = _decode_array(data, _field(data, "dtype", str), buffers)
        return array[()] if tag == "scalar" else array
    if tag == "tensor":
        return _decode_tensor(data, buffers)
    raise ChannelError(f"unknown value tag {tag!r}")


def _field(data: dict, key: str, kind: type):
    value = data.get(key)
    if type(value) is not kind:
        raise ChannelError(f"field {key!r} of a {data.get('$')!r} value is missing or malformed")
    return value


def _decode_array(data: dict, dtype: str, buffers: list):
    import numpy

    if dtype not in NUMPY_DTYPES:
        raise ChannelError(f"dtype {dtype!r} is not accepted")
    shape = _field(data, "shape", list)
    if len(shape) > 32 or not all(type(n) is int and 0 <= n for n in shape):
        raise ChannelError("malformed shape")
    index = _field(data, "buffer", int)
    if not 0 <= index < len(buffers):
        raise ChannelError("an array refers to a buffer the message does not have")
    raw = buffers[index]
    count = 1
    for n in shape:
        count *= n
    if count * numpy.dtype(dtype).itemsize != len(raw):
        raise ChannelError(f"{len(raw)} bytes do not make an array of shape {shape} and dtype {dtype}")
    return numpy.frombuffer(raw, dtype=dtype).reshape(shape).astype(numpy.dtype(dtype).newbyteorder("="))


def _decode_tensor(data: dict, buffers: list):
    import torch

    name = _field(data, "dtype", str)
    if name not in TORCH_DTYPES:
        raise ChannelError(f"tensor dtype {name!r} is not accepted")
    tensor = torch.from_numpy(_decode_array(data, TORCH_DTYPES[name], buffers))
    return tensor.view(torch.bfloat16) if name == "bfloat16" else tensor


def through_channel(function):
    """``function`` with its arguments and result sent through the encoding, in this process.

    A check that works with ``run_check(eid, through_channel(answer))`` works in
    the grader: it passes and reads only values the channel carries.
    """
    def forwarded(*args, **kwargs):
        buffers: list = []
        request = _roundtrip({"args": encode(list(args), buffers), "kwargs": encode(kwargs, buffers),
                              BUFFERS: buffers})
        result = function(*decode(request["args"], request[BUFFERS]),
                          **decode(request["kwargs"], request[BUFFERS]))
        buffers = []
        reply = _roundtrip({"value": encode(result, buffers), BUFFERS: buffers})
        return decode(reply["value"], reply[BUFFERS])

    forwarded.__name__ = getattr(function, "__name__", "answer")
    return forwarded


def _roundtrip(message: dict) -> dict:
    frame = dumps(message)
    size = int.from_bytes(frame[:4], "big")
    return _with_buffers(loads(frame[4:4 + size]), frame[4 + size:])


# ---------------------------------------------------------------------------
# Messages and pipes
# ---------------------------------------------------------------------------

def dumps(message: dict) -> bytes:
    """A message as bytes (JSON, then its buffers); ChannelError when it is too large."""
    buffers = message.get(BUFFERS) or []
    header = dict(message, **{BUFFERS: [len(b) for b in buffers]})
    body = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    size = len(body) + sum(len(b) for b in buffers)
    if size > MAX_MESSAGE_BYTES:
        raise ChannelError(f"a message of {size / 2**20:.0f} MB is larger than the "
                           f"{MAX_MESSAGE_BYTES / 2**20:.0f} MB the channel carries")
    return b"".join([len(body).to_bytes(4, "big"), body, *buffers])


def loads(body: bytes) -> dict:
    """The JSON part of a message; ChannelError when it is not a JSON object."""
    try:
        message = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as err:  # includes UnicodeDecodeError, huge integers
        raise ChannelError(f"not a JSON message ({type(err).__name__})") from None
    if type(message) is not dict:
        raise ChannelError("a message must be a JSON object")
    return message


def _buffer_sizes(message: dict, limit: int) -> list[int]:
    sizes = message.get(BUFFERS, [])
    if type(sizes) is not list or not all(type(n) is int and n >= 0 for n in sizes) or sum(sizes) > limit:
        raise ChannelError("malformed or oversized list of buffers")
    return sizes


def _with_buffers(message: dict, raw: bytes) -> dict:
    sizes = _buffer_sizes(message, len(raw))
    if sum(sizes) != len(raw):
        raise ChannelError("the buffers do not add up")
    view, buffers, start = memoryview(raw), [], 0
    for n in sizes:
        buffers.append(view[start:start + n])
        start += n
    message[BUFFERS] = buffers
    return message


def send(fd: int, message: dict, deadline: float | None = None) -> None:
    """Write one message to ``fd``; ChannelTimeout after ``deadline`` (time.monotonic()),
    ChannelClosed when the reader is gone."""
    data = memoryview(dumps(message))
    while data:
        _wait(fd, deadline, write=True)
        try:
            written = os.write(fd, data[:1 << 20])
        except BlockingIOError:
            continue
        except OSError as err:  # BrokenPipeError among them
            raise ChannelClosed(str(err)) from None
        data = data[written:]


def receive(fd: int, deadline: float | None = None, limit: int = MAX_MESSAGE_BYTES) -> dict:
    """Read one message from ``fd``; ChannelTimeout, ChannelClosed or ChannelError."""
    size = int.from_bytes(_read_exactly(fd, 4, deadline), "big")
    if size > limit:
        raise ChannelError(f"a message of {size / 2**20:.0f} MB is larger than the "
                           f"{limit / 2**20:.0f} MB the channel carries")
    message = loads(_read_exactly(fd, size, deadline))
    return _with_buffers(message, _read_exactly(fd, sum(_buffer_sizes(message, limit - size)), deadline))


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes:
    chunks, missing = [], size
    while missing:
        _wait(fd, deadline, write=False)
        try:
            chunk = os.read(fd, min(missing, 1 << 20))
        except BlockingIOError:
            continue
        except OSError as err:
            raise ChannelClosed(str(err)) from None
        if not chunk:
            raise ChannelClosed("end of file")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def _wait(fd: int, deadline: float | None, *, write: bool) -> None:
    if deadline is None:
        return
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ChannelTimeout()
    ready = select.select([], [fd], [], remaining) if write else select.select([fd], [], [], remaining)
    if not any(ready):
        raise ChannelTimeout()
