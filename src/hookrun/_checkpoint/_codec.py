"""How a checkpoint's state becomes bytes: the ``Codec`` protocol, the default
``MsgpackCodec`` and the opt-in ``PickleCodec``.

The default format never runs code on load. The structure (nested dicts,
lists and tuples of ``None``, bools, ints, floats, strings and bytes) is
MessagePack written by msgspec; NumPy arrays and scalars become placeholders
in that structure pointing into a section of raw, 64-byte-aligned buffers
(safetensors style: dtype, shape, offset and length, no code). The payload::

    u64 little-endian length of the structure | structure | padding | buffers

Invariants: ``encode`` returns buffers that no later change to the state can
alter (arrays are copied, once, into one buffer holding the whole buffer
section, so the payload is three chunks however many arrays there are), so a
write may finish in the background; ``decode``
returns exactly what was encoded (types, dtypes, shapes and byte order) and
rejects a malformed payload with ``ValueError``, never by running anything,
nor by recursing deeper than ``MAX_DEPTH`` or allocating what the payload does
not hold (array buffers are views of it, bounds-checked first).
"""

from __future__ import annotations

import struct
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["MAX_DEPTH", "Codec", "MsgpackCodec", "PickleCodec", "UnsafeCodecWarning"]

#: How deep dicts, lists and tuples may nest in a state (the state itself is level 1):
#: ``encode`` refuses a deeper one, ``decode`` a payload holding one.
MAX_DEPTH = 100

#: A piece of an encoded payload.
Chunk = bytes | bytearray | memoryview

_ALIGN = 64
_LENGTH = struct.Struct("<Q")
_EXT_ARRAY, _EXT_TUPLE, _EXT_BIGINT, _EXT_SCALAR, _EXT_BYTEARRAY = 1, 2, 3, 4, 5
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
_PLAIN = (type(None), bool, int, float, str, bytes)


@runtime_checkable
class Codec(Protocol):
    """Turns a checkpoint's state into bytes and back.

    ``name`` is recorded in every checkpoint; restoring a checkpoint written by
    a codec of another name is an error naming both. ``encode`` runs in a worker
    thread and must return buffers the caller may keep while the state changes
    (copy what is mutable). ``decode`` gets the payload exactly as ``encode``
    produced it.
    """

    name: str

    def encode(self, state: Mapping[str, Any]) -> Sequence[Chunk]:
        """The payload for ``state``, as a sequence of buffers written in order."""
        ...

    def decode(self, payload: memoryview) -> dict[str, Any]:
        """The state held by ``payload``."""
        ...


class UnsafeCodecWarning(UserWarning):
    """A codec that can run code from the file it loads was chosen."""


class MsgpackCodec:
    """The default codec: MessagePack structure (msgspec) plus raw NumPy buffers.

    Round-trips nested dicts (string or int keys), lists and tuples of
    ``None``, bools, ints of any size, floats, strings, bytes and bytearrays,
    and NumPy arrays and scalars (dtype, shape and byte order kept; arrays come
    back C-contiguous and writable). Anything else is a ``TypeError`` naming
    where in the state it is. Object and structured dtypes are refused. Dicts,
    lists and tuples nest at most 100 levels deep (the state is the first): a
    deeper state is a ``ValueError`` naming where, and so is a payload holding one.
    """

    name = "hookrun-msgpack-1"

    def __repr__(self) -> str:
        return "MsgpackCodec()"

    def encode(self, state: Mapping[str, Any]) -> list[Chunk]:
        return self._encode(state, copy=True)

    def _encode(self, state: Mapping[str, Any], *, copy: bool) -> list[Chunk]:
        """The payload for ``state``; with ``copy=False`` its arrays' chunks are views of
        the arrays themselves (no copy: the arrays must not change until written)."""
        from msgspec import msgpack

        numpy = sys.modules.get("numpy")  # no array can exist unless NumPy is loaded
        encoder = _Encoder(numpy)
        tree = encoder.walk(state, "state", 1)
        structure = msgpack.encode(tree)
        chunks: list[Chunk] = [_LENGTH.pack(len(structure)), structure]
        if encoder.arrays:
            chunks.append(bytes(-(_LENGTH.size + len(structure)) % _ALIGN))
            chunks.extend([encoder.snapshot()] if copy else encoder.views())
        return chunks

    def decode(self, payload: memoryview) -> dict[str, Any]:
        structure = _structure(lambda start, count: payload[start : start + count], payload.nbytes)
        return _decode(structure, _Decoder(payload, payload.nbytes, _LENGTH.size + structure.nbytes))

    def _check(self, read: Callable[[int, int], Chunk], payload_bytes: int) -> None:
        """Check a payload of ``payload_bytes`` as ``decode`` would, reading its structure only
        (``read(start, count)``: those bytes of the payload): its array buffers are checked to
        lie within it, not read. Raises ``ValueError`` for what ``decode`` would reject."""
        structure = _structure(read, payload_bytes)
        _decode(structure, _Decoder(None, payload_bytes, _LENGTH.size + structure.nbytes))


def _structure(read: Callable[[int, int], Chunk], payload_bytes: int) -> memoryview:
    """The MessagePack structure at the start of a payload, its length checked first."""
    if payload_bytes < _LENGTH.size:
        raise ValueError("payload too short for its structure length")
    head = memoryview(read(0, _LENGTH.size))
    if head.nbytes < _LENGTH.size:
        raise ValueError("payload too short for its structure length")
    (length,) = _LENGTH.unpack_from(head)
    if length > payload_bytes - _LENGTH.size:
        raise ValueError(f"structure length {length} runs past the payload ({payload_bytes} bytes)")
    structure = memoryview(read(_LENGTH.size, length))
    if structure.nbytes != length:
        raise ValueError(f"structure length {length} runs past the payload ({payload_bytes} bytes)")
    return structure


def _decode(structure: memoryview, decoder: _Decoder) -> dict[str, Any]:
    """The state a structure holds, checked: a mapping, at most ``MAX_DEPTH`` deep."""
    from msgspec import DecodeError, msgpack

    try:
        state = msgpack.Decoder(ext_hook=decoder.ext).decode(structure)
    except RecursionError:
        raise ValueError(f"the structure nests deeper than {MAX_DEPTH} levels") from None
    except DecodeError as exc:
        raise ValueError(f"malformed structure: {exc}") from None
    except (TypeError, KeyError, IndexError, OverflowError) as exc:  # from an extension
        raise ValueError(f"malformed extension: {exc!r}") from None
    if not isinstance(state, dict):
        raise ValueError(f"the structure holds a {type(state).__name__}, not a mapping")
    _check_tree(state)
    return state


def _check_tree(state: dict[str, Any]) -> None:
    """Walk the decoded tree (no recursion): containers at most ``MAX_DEPTH`` deep, keys
    str or int, leaves only what the encoder writes."""
    numpy = sys.modules.get("numpy")
    leaves = (*_PLAIN, bytearray) if numpy is None else (*_PLAIN, bytearray, numpy.ndarray, numpy.generic)
    stack: list[tuple[object, int]] = [(state, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"the structure nests deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            for key in node:
                if type(key) not in (str, int):
                    raise ValueError(f"the structure has a key of type {type(key).__name__}")
            items: Any = node.values()
        else:
            items = node
        for item in items:
            if type(item) in (dict, list, tuple):
                stack.append((item, depth + 1))
            elif item is not _UNREAD and not isinstance(item, leaves):
                raise ValueError(f"the structure holds a {type(item).__name__}")


class _Encoder:
    """Walks a state, checking each value and replacing what msgpack lacks by extensions."""

    def __init__(self, numpy: Any) -> None:
        self.numpy = numpy
        self.arrays: list[tuple[int, Any]] = []  # (offset in the buffer section, array)
        self.offset = 0  # of the next buffer, within the buffer section

    def walk(self, value: object, where: str, depth: int) -> object:
        kind = type(value)
        if kind in _PLAIN:
            if isinstance(value, int) and kind is int and not _INT_MIN <= value <= _INT_MAX:
                return _ext(_EXT_BIGINT, str(value).encode())
            return value
        if isinstance(value, (Mapping, list, tuple)) and depth > MAX_DEPTH:
            raise ValueError(
                f"cannot checkpoint {where}: it is nested {depth} levels deep, and checkpoints "
                f"hold at most {MAX_DEPTH} levels of dicts, lists and tuples"
            )
        inner = depth + 1
        if isinstance(value, Mapping):
            return {
                self.key(key, where): self.walk(item, f"{where}[{key!r}]", inner)
                for key, item in value.items()
            }
        if isinstance(value, list) and kind is list:
            return [self.walk(item, f"{where}[{i}]", inner) for i, item in enumerate(value)]
        if isinstance(value, tuple) and kind is tuple:
            items = [self.walk(item, f"{where}[{i}]", inner) for i, item in enumerate(value)]
            return _ext(_EXT_TUPLE, _pack(items))
        if isinstance(value, bytearray) and kind is bytearray:
            return _ext(_EXT_BYTEARRAY, bytes(value))
        numpy = self.numpy
        if numpy is not None and isinstance(value, numpy.ndarray):
            return self.array(value, where)
        if numpy is not None and isinstance(value, numpy.generic):
            dtype = self.dtype(value.dtype, where)
            return _ext(_EXT_SCALAR, _pack([dtype, value.tobytes()]))
        raise TypeError(
            f"cannot checkpoint {where}: {kind.__qualname__} is not supported by the default "
            "codec (use None, bool, int, float, str, bytes, dict, list, tuple or NumPy arrays, "
            "or pass another codec)"
        )

    def key(self, key: object, where: str) -> object:
        if type(key) is str or (isinstance(key, int) and type(key) is int and _INT_MIN <= key <= _INT_MAX):
            return key
        raise TypeError(f"cannot checkpoint {where}: key {key!r} is not a str or an int of at most 64 bits")

    def dtype(self, dtype: Any, where: str) -> str:
        if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
            raise TypeError(
                f"cannot checkpoint {where}: dtype {dtype} holds Python objects or fields, "
                "which the default codec does not store"
            )
        return str(dtype.str)

    def array(self, value: Any, where: str) -> object:
        dtype = self.dtype(value.dtype, where)
        nbytes = int(value.size) * value.dtype.itemsize
        self.offset += -self.offset % _ALIGN
        descriptor = [dtype, list(value.shape), self.offset, nbytes]
        if nbytes:
            self.arrays.append((self.offset, value))
        self.offset += nbytes
        return _ext(_EXT_ARRAY, _pack(descriptor))

    def views(self) -> list[Chunk]:
        """The buffer section as the arrays' own bytes (C order) and the padding between."""
        numpy = self.numpy
        chunks: list[Chunk] = []
        end = 0
        for offset, value in self.arrays:
            if offset > end:
                chunks.append(bytes(offset - end))
            flat = numpy.ascontiguousarray(value).reshape(-1).view(numpy.uint8)  # a copy only if strided
            chunks.append(memoryview(flat))
            end = offset + flat.nbytes
        if self.offset > end:  # empty arrays placed after the last one: the section still ends there
            chunks.append(bytes(self.offset - end))
        return chunks

    def snapshot(self) -> memoryview:
        """The buffer section: a copy of every array (C order) at its offset, zeros elsewhere.

        One allocation and one copy per array, each releasing the GIL; the
        caller may change the arrays as soon as this returns.
        """
        numpy = self.numpy
        section = numpy.empty(self.offset, dtype=numpy.uint8)
        end = 0
        for offset, value in self.arrays:
            section[end:offset] = 0  # the alignment padding
            end = offset + int(value.size) * value.dtype.itemsize
            numpy.copyto(section[offset:end].view(value.dtype).reshape(value.shape), value, casting="no")
        section[end:] = 0
        return memoryview(section)


#: What ``MsgpackCodec._check`` puts where an array would be (its buffer is not read).
_UNREAD = object()


class _Decoder:
    """Turns the extensions back into tuples, big ints, bytearrays and NumPy values. Without
    a ``payload`` (``_check``), arrays are checked against ``payload_bytes`` but not made."""

    def __init__(self, payload: memoryview | None, payload_bytes: int, structure_end: int) -> None:
        self.payload = payload
        self.payload_bytes = payload_bytes
        self.base = structure_end + (-structure_end % _ALIGN)
        self.depth = 0  # of nested tuple extensions being decoded

    def ext(self, code: int, data: memoryview) -> object:
        from msgspec import msgpack

        if code == _EXT_TUPLE:
            if self.depth >= MAX_DEPTH:
                raise ValueError(f"the structure nests deeper than {MAX_DEPTH} levels")
            self.depth += 1
            try:
                return tuple(msgpack.decode(data, ext_hook=self.ext))
            finally:
                self.depth -= 1
        if code == _EXT_BIGINT:
            return int(bytes(data).decode())
        if code == _EXT_BYTEARRAY:
            return bytearray(data)
        if code == _EXT_ARRAY:
            return self.array(msgpack.decode(data))
        if code == _EXT_SCALAR:
            dtype, raw = msgpack.decode(data)
            if self.payload is None and "numpy" not in sys.modules:
                return _UNREAD
            return _numpy().frombuffer(raw, dtype=_dtype(dtype), count=1)[0]
        raise ValueError(f"unknown extension type {code}")

    def array(self, descriptor: object) -> object:
        if not (isinstance(descriptor, list) and len(descriptor) == 4):
            raise ValueError(f"an array's descriptor is {descriptor!r:.80}, not [dtype, shape, offset, length]")
        dtype, shape, offset, nbytes = descriptor
        if not (isinstance(shape, list) and len(shape) <= 64 and all(_count(n) for n in [*shape, offset, nbytes])):
            raise ValueError(f"an array's shape {shape!r:.80}, offset or length is not made of ints >= 0")
        start = self.base + offset
        if start + nbytes > self.payload_bytes:
            raise ValueError(f"an array's buffer ({nbytes} bytes at {offset}) runs past the payload")
        if self.payload is None and "numpy" not in sys.modules:
            return _UNREAD
        numpy = _numpy()
        dtype = _dtype(dtype)
        count = nbytes // dtype.itemsize if dtype.itemsize else 0
        elements = 1
        for n in shape:
            elements *= n
        if dtype.itemsize * count != nbytes or elements != count:
            raise ValueError(f"an array's shape {shape} does not match its {nbytes} bytes of {dtype}")
        if self.payload is None:
            return _UNREAD
        flat = numpy.frombuffer(self.payload, dtype=dtype, count=count, offset=start)
        return flat.reshape(shape)


def _count(value: object) -> bool:
    return type(value) is int and 0 <= value <= _INT_MAX


def _dtype(name: object) -> Any:
    """The plain NumPy dtype ``name`` describes (never one holding objects or fields)."""
    numpy = _numpy()
    if not isinstance(name, str):
        raise ValueError(f"an array's dtype is {name!r:.80}, not a dtype name")
    try:
        dtype = numpy.dtype(name)
    except TypeError:
        raise ValueError(f"an array's dtype {name!r:.80} is not a NumPy dtype") from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"an array's dtype {name!r:.80} holds objects or fields")
    return dtype


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        raise ValueError("the checkpoint holds NumPy arrays, but NumPy is not installed") from None
    return numpy


def _ext(code: int, data: bytes) -> object:
    from msgspec import msgpack

    return msgpack.Ext(code, data)


def _pack(value: object) -> bytes:
    from msgspec import msgpack

    return msgpack.encode(value)


class PickleCodec:
    """Stores the state with :mod:`pickle` (any picklable object).

    Loading a pickle runs whatever code the file names: restore only
    checkpoints you wrote yourself into a directory nobody else can write.
    Choosing this codec emits an :class:`UnsafeCodecWarning` saying so.

    Args:
        protocol: The pickle protocol to write with. ``None``: the highest.
    """

    name = "pickle"

    def __init__(self, *, protocol: int | None = None) -> None:
        warnings.warn(
            "PickleCodec: restoring a pickle checkpoint runs code from the file; "
            "load only checkpoints you trust (the default MsgpackCodec never runs code)",
            UnsafeCodecWarning,
            stacklevel=2,
        )
        #: The pickle protocol (``None``: the highest).
        self.protocol = protocol if protocol is not None else -1

    def __repr__(self) -> str:
        return f"PickleCodec(protocol={self.protocol})"

    def encode(self, state: Mapping[str, Any]) -> list[Chunk]:
        import pickle

        return [pickle.dumps(dict(state), protocol=self.protocol)]

    def decode(self, payload: memoryview) -> dict[str, Any]:
        import pickle

        state = pickle.loads(payload)
        if not isinstance(state, dict):
            raise ValueError(f"the pickle holds a {type(state).__name__}, not a mapping")
        return state
