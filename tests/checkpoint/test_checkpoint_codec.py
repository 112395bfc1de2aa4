"""The default checkpoint codec round-trips exactly and never runs code; the pickle codec
is opt-in and warns."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hookrun
from hookrun import MsgpackCodec, PickleCodec, UnsafeCodecWarning


def roundtrip(state: dict[Any, Any], codec: hookrun.Codec | None = None) -> dict[Any, Any]:
    codec = codec or MsgpackCodec()
    payload = bytearray(b"".join(bytes(memoryview(chunk).cast("B")) for chunk in codec.encode(state)))
    return codec.decode(memoryview(payload))


def test_plain_values_round_trip_with_their_types() -> None:
    """None, bools, ints of any size, floats, strings, bytes, lists, tuples and dicts come back equal and of the same type."""
    state = {
        "none": None, "yes": True, "no": False, "int": -7, "huge": 2**100, "tiny": -(2**90),
        "float": 0.1, "inf": float("inf"), "text": "héllo", "raw": b"\x00\xff", "mutable": bytearray(b"ab"),
        "list": [1, [2, [3]]], "tuple": (1, ("a", None)), "nested": {"a": {"b": [{"c": 1}]}}, 3: "int key",
    }
    out = roundtrip(state)
    assert out == state
    for key, value in state.items():
        assert type(out[key]) is type(value), key
    assert type(out["tuple"][1]) is tuple


def test_nan_round_trips() -> None:
    """A NaN float stays a NaN."""
    out = roundtrip({"x": float("nan")})
    assert out["x"] != out["x"]


def test_numpy_arrays_keep_dtype_shape_and_byte_order() -> None:
    """Arrays of many dtypes and shapes (empty, 0-d, Fortran-ordered, big-endian) round-trip exactly."""
    arrays = {
        "f32": np.arange(12, dtype=np.float32).reshape(3, 4),
        "big_endian": np.arange(5, dtype=">i8"),
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        "empty": np.zeros((0, 3), dtype=np.int16),
        "scalar_array": np.array(2.5),
        "bools": np.array([True, False]),
        "complex": np.array([1 + 2j], dtype=np.complex64),
        "text": np.array(["ab", "c"]),
        "dates": np.array(["2020-01-01"], dtype="datetime64[D]"),
        "sliced": np.arange(10)[::3],
    }
    out = roundtrip({"arrays": arrays})["arrays"]
    for key, array in arrays.items():
        assert out[key].dtype == array.dtype, key
        assert out[key].shape == array.shape, key
        np.testing.assert_array_equal(out[key], array)
        assert out[key].flags.writeable


def test_numpy_scalars_round_trip_as_numpy_scalars() -> None:
    """A NumPy scalar comes back as a scalar of the same dtype."""
    out = roundtrip({"a": np.float32(1.5), "b": np.int64(-3), "c": np.bool_(True)})
    assert type(out["a"]) is np.float32 and out["a"] == np.float32(1.5)
    assert type(out["b"]) is np.int64 and out["b"] == -3
    assert type(out["c"]) is np.bool_


def test_encoding_snapshots_arrays() -> None:
    """Changing an array after encoding does not change what was encoded."""
    codec = MsgpackCodec()
    array = np.zeros(4)
    chunks = codec.encode({"a": array})
    array[:] = 9
    payload = bytearray(b"".join(bytes(memoryview(chunk).cast("B")) for chunk in chunks))
    np.testing.assert_array_equal(codec.decode(memoryview(payload))["a"], np.zeros(4))


@pytest.mark.parametrize(
    ("value", "culprit"),
    [({1, 2}, "set"), (object(), "object"), (np.array([object()]), "dtype object")],
)
def test_unsupported_values_name_where_they_are(value: object, culprit: str) -> None:
    """A value the default codec cannot store is a TypeError naming its place in the state."""
    with pytest.raises(TypeError, match=r"state\['hooks'\]\['h'\]\[1\].*" + culprit):
        MsgpackCodec().encode({"hooks": {"h": [0, value]}})


def test_unsupported_keys_are_named() -> None:
    """A key that is neither a str nor an int is a TypeError naming it."""
    with pytest.raises(TypeError, match=r"key \(1, 2\) is not a str or an int"):
        MsgpackCodec().encode({"a": {(1, 2): 0}})


def test_default_codec_never_unpickles() -> None:
    """A pickle payload (which would run code) is rejected by the default codec with ValueError."""
    evil = pickle.dumps({"x": 1})
    with pytest.raises(ValueError):
        MsgpackCodec().decode(memoryview(bytearray(evil)))


def test_malformed_payloads_are_value_errors() -> None:
    """Truncated payloads are ValueErrors, not crashes."""
    codec = MsgpackCodec()
    payload = b"".join(bytes(memoryview(chunk).cast("B")) for chunk in codec.encode({"a": np.arange(100)}))
    for cut in (3, 12, len(payload) - 8):
        with pytest.raises(ValueError):
            codec.decode(memoryview(bytearray(payload[:cut])))


def test_pickle_codec_warns_about_trust_and_round_trips_anything_picklable() -> None:
    """PickleCodec is opt-in: choosing it warns; it stores any picklable object."""
    with pytest.warns(UnsafeCodecWarning, match="runs code from the file"):
        codec = PickleCodec()
    assert roundtrip({"s": {1, 2}}, codec) == {"s": {1, 2}}


def test_codec_protocol_is_structural() -> None:
    """Both codecs satisfy the Codec protocol."""
    assert isinstance(MsgpackCodec(), hookrun.Codec)
    with pytest.warns(UnsafeCodecWarning):
        assert isinstance(PickleCodec(), hookrun.Codec)


_leaves = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary()
)
_trees = st.recursive(
    _leaves,
    lambda children: st.lists(children, max_size=4)
    | st.lists(children, max_size=4).map(tuple)
    | st.dictionaries(st.text(max_size=5) | st.integers(-(2**63), 2**63 - 1), children, max_size=4),
    max_leaves=30,
)


def _same(a: object, b: object) -> bool:
    """Equal, with the same types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple))
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@given(st.dictionaries(st.text(max_size=5), _trees, max_size=5))
def test_any_supported_structure_round_trips_exactly(state: dict[str, Any]) -> None:
    """Generated nested states come back equal and of the same types at every level."""
    assert _same(roundtrip(state), state)
