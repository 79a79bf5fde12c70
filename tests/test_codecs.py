"""Codec decoders against real Spark event logs and against the codec libraries' own output."""

from __future__ import annotations

import contextlib
import json
import struct
from collections import Counter
from pathlib import Path

import cramjam
import lz4.block  # type: ignore[import-untyped]
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.errors import CodecUnavailable, CorruptStream, UnknownCodec
from agent.spark.eventlog.blocks import LzfDecoder
from agent.spark.eventlog.codecs import decoder_for
from agent.spark.eventlog.zstd import ZstdDecoder
from tests.samples import block_encoded
from tests.spark_logs import (
    LAYOUTS,
    LZF_MISSING,
    SparkLogs,
    codec_params,
    event_files,
    session_spark_logs,
)

COMPRESSED = ("zstd", "lz4", "snappy", "lzf")


@pytest.fixture(scope="session")
def spark_logs(tmp_path_factory: pytest.TempPathFactory) -> SparkLogs:
    """The session's real Spark event logs."""
    return session_spark_logs(tmp_path_factory)


def decode(codec: str, data: bytes) -> bytes:
    decoder = decoder_for(codec)
    out = decoder.feed(data)
    decoder.finish()
    return out


def real_file(logs: SparkLogs, layout: str, codec: str) -> Path:
    (path,) = event_files(logs.directory(layout, codec))
    return path


def event_counts(decoded: bytes) -> Counter[str]:
    lines = decoded.split(b"\n")
    assert lines.pop() == b""
    return Counter(json.loads(line)["Event"] for line in lines)


def boundaries(codec: str, data: bytes) -> list[int]:
    """Offsets where the blocks or frames of a stream end, found without the decoder tested."""
    ends: list[int] = []
    if codec == "zstd":
        pos = 0
        while pos < len(data):  # libzstd's single-frame mode stops at the frame's end
            single = zstandard.ZstdDecompressor().decompressobj()
            single.decompress(data[pos:])
            pos = len(data) - len(single.unused_data)
            ends.append(pos)
    elif codec == "lz4":
        pos = 0
        while pos < len(data):
            pos += 21 + struct.unpack_from("<i", data, pos + 9)[0]
            ends.append(pos)
    elif codec == "snappy":
        pos = 16
        while pos < len(data):
            pos += 4 + struct.unpack_from(">i", data, pos)[0]
            ends.append(pos)
    elif codec == "lzf":
        pos = 0
        while pos < len(data):
            kind = data[pos + 2]
            pos += (5 if kind == 0 else 7) + struct.unpack_from(">H", data, pos + 3)[0]
            ends.append(pos)
    return ends


@pytest.mark.spark
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("codec", codec_params())
def test_real_log_decodes_to_the_same_events_as_the_uncompressed_log(
    spark_logs: SparkLogs, layout: str, codec: str
) -> None:
    """Every codec x layout decodes to JSON lines with the same events as the `none` log."""
    data = real_file(spark_logs, layout, codec).read_bytes()
    decoded = decode(codec, data)
    plain = real_file(spark_logs, layout, "none").read_bytes()
    counts = event_counts(decoded)
    assert counts == event_counts(plain)
    assert counts["SparkListenerApplicationStart"] == counts["SparkListenerApplicationEnd"] == 1
    assert decoded.startswith(b'{"Event":"SparkListenerLogStart"')
    if codec == "none":
        assert decoded == data
    if codec == "zstd":  # libzstd's own reader, across frames, as an independent decoder
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        assert decoded == reader.read()


@pytest.mark.spark
@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=1, max_value=4096), min_size=1, max_size=60))
def test_feeding_real_log_in_random_pieces_gives_the_same_bytes(
    spark_logs: SparkLogs, codec: str, cuts: list[int]
) -> None:
    """A real log fed in random small pieces decodes to exactly the bytes of one whole feed."""
    data = real_file(spark_logs, "single", codec).read_bytes()
    decoder = decoder_for(codec)
    out, pos, turn = [], 0, 0
    while pos < len(data):
        size = cuts[turn % len(cuts)]
        out.append(decoder.feed(data[pos : pos + size]))
        pos, turn = pos + size, turn + 1
    decoder.finish()
    assert decoder.idle
    assert b"".join(out) == decode(codec, data)


@pytest.mark.spark
@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
def test_idle_exactly_at_block_and_frame_boundaries(spark_logs: SparkLogs, codec: str) -> None:
    """`idle` holds after a block or frame ends and not one byte earlier."""
    data = real_file(spark_logs, "rolling", codec).read_bytes()
    for end in boundaries(codec, data)[:40]:
        decoder = decoder_for(codec)
        decoder.feed(data[: end - 1])
        assert not decoder.idle
        decoder.feed(data[end - 1 : end])
        assert decoder.idle


@pytest.mark.spark
@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
def test_fresh_decoder_takes_over_at_a_boundary(spark_logs: SparkLogs, codec: str) -> None:
    """A new decoder started at a mid-stream boundary continues the output exactly."""
    data = real_file(spark_logs, "single", codec).read_bytes()
    ends = boundaries(codec, data)
    middle = ends[len(ends) // 2]
    first = decoder_for(codec)
    head = first.feed(data[:middle])
    assert first.idle
    second = decoder_for(codec, offset=middle)
    tail = second.feed(data[middle:])
    second.finish()
    assert head + tail == decode(codec, data)


TRUNCATED = {
    "zstd": "zstd: stream ends inside the frame that starts at byte {at}",
    "lz4": "lz4: stream ends inside a block (10 bytes of an incomplete block at byte {at})",
    "snappy": "snappy: stream ends inside a block (10 bytes of an incomplete block at byte {at})",
    "lzf": "lzf: stream ends inside a block (10 bytes of an incomplete block at byte {at})",
}


@pytest.mark.spark
@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
def test_truncated_stream_fails_on_finish(spark_logs: SparkLogs, codec: str) -> None:
    """A stream cut 10 bytes into its second block yields the first block's output and fails
    when declared complete, naming where the incomplete block starts."""
    data = real_file(spark_logs, "single", codec).read_bytes()
    at = boundaries(codec, data)[0]
    decoder = decoder_for(codec)
    out = decoder.feed(data[: at + 10])
    assert out == decode(codec, data[:at])
    with pytest.raises(CorruptStream) as caught:
        decoder.finish()
    assert str(caught.value) == TRUNCATED[codec].format(at=at)


@pytest.mark.spark
@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
def test_stream_cut_in_the_middle_yields_a_prefix(spark_logs: SparkLogs, codec: str) -> None:
    """Cut mid-block, a stream yields a prefix of its output, then fails on finish."""
    data = real_file(spark_logs, "single", codec).read_bytes()
    decoder = decoder_for(codec)
    out = decoder.feed(data[: len(data) // 2 + 7])
    assert out and decode(codec, data).startswith(out)
    with pytest.raises(CorruptStream):
        decoder.finish()


GARBAGE = b"garbage!" * 3  # longer than any block header
BAD_AT = {
    "zstd": "zstd: bad frame magic 0x62726167 at byte {at}",
    "lz4": "lz4: bad block magic b'garbage!' at byte {at}",
    "snappy": "snappy: chunk length 1734439522 exceeds 67108864 at byte {at}",
    "lzf": "lzf: bad chunk signature b'ga' at byte {at}",
}


@pytest.mark.spark
@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
def test_garbage_at_a_boundary_keeps_the_output_before_it(
    spark_logs: SparkLogs, codec: str
) -> None:
    """Garbage spliced in after a block raises CorruptStream naming its offset; `partial`
    holds everything decoded before it in that same call."""
    data = real_file(spark_logs, "single", codec).read_bytes()
    ends = boundaries(codec, data)
    at = ends[len(ends) // 2]
    decoder = decoder_for(codec)
    with pytest.raises(CorruptStream) as caught:
        decoder.feed(data[:at] + GARBAGE + data[at:])
    assert str(caught.value) == BAD_AT[codec].format(at=at)
    assert caught.value.offset == at
    assert caught.value.partial == decode(codec, data[:at])


@pytest.mark.spark
@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
def test_trailing_garbage_after_a_complete_log_is_corrupt(
    spark_logs: SparkLogs, codec: str
) -> None:
    """Garbage after the last block of a complete log raises CorruptStream, losing nothing."""
    data = real_file(spark_logs, "rolling", codec).read_bytes()
    decoder = decoder_for(codec)
    whole = decoder.feed(data)
    with pytest.raises(CorruptStream) as caught:
        decoder.feed(GARBAGE)
    assert str(caught.value) == BAD_AT[codec].format(at=len(data))
    assert whole == decode(codec, data)


def test_corrupt_zstd_block_loses_only_its_own_frame() -> None:
    """A damaged block inside the second frame keeps the first frame's output."""
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    first = compressor.compress(b'{"Event":"one"}\n' * 50)
    second = bytearray(compressor.compress(bytes(range(256)) * 40))
    second[-10] ^= 0xFF  # inside the last block's payload; the checksum catches it
    decoder = ZstdDecoder()
    with pytest.raises(CorruptStream) as caught:
        decoder.feed(first + bytes(second))
    assert str(caught.value).startswith(
        f"zstd: undecodable frame starting at byte {len(first)} (zstd decompressor error: "
    )
    assert caught.value.partial == b'{"Event":"one"}\n' * 50


def test_zstd_checksums_content_sizes_and_skippable_frames() -> None:
    """Frames with checksums and content sizes, and skippable frames, are walked correctly."""
    plain = zstandard.ZstdCompressor().compress(b"a\n" * 1000)
    sized = zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(
        b"b\n" * 100_000
    )
    skippable = struct.pack("<II", 0x184D2A5A, 5) + b"12345"
    data = plain + skippable + sized + struct.pack("<II", 0x184D2A50, 0)
    decoder = ZstdDecoder()
    out = b"".join(decoder.feed(data[i : i + 3]) for i in range(0, len(data), 3))
    decoder.finish()
    assert out == b"a\n" * 1000 + b"b\n" * 100_000


def test_zstd_reserved_block_type_is_corrupt() -> None:
    """A block header with the reserved block type is reported with its offset."""
    frame = zstandard.ZstdCompressor().compress(b"x" * 100)
    header_end = 6  # magic (4), descriptor (1), window descriptor (1)
    broken = frame[:header_end] + bytes([frame[header_end] | 0b110]) + frame[header_end + 1 :]
    with pytest.raises(CorruptStream) as caught:
        ZstdDecoder(offset=1000).feed(broken)
    assert str(caught.value) == "zstd: reserved block type at byte 1006"


def lz4_block(data: bytes, *, level: int = 5) -> bytes:
    payload: bytes = lz4.block.compress(data, store_size=False)
    return struct.pack("<8sBiii", b"LZ4Block", 0x20 | level, len(payload), len(data), 0) + payload


@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
def test_pieces_are_bounded_by_a_block_whatever_the_ratio(codec: str) -> None:
    """64 MiB of one byte fed at once comes out in pieces of at most one block (128 KiB)."""
    size, block = 64 * 1024 * 1024, 32 * 1024
    if codec == "zstd":
        frame = zstandard.ZstdCompressor(level=1).compressobj()
        data = frame.compress(b"x" * size) + frame.flush()
    else:
        data = b"".join(block_encoded(codec, [b"x" * block] * (size // block)))
    decoder = decoder_for(codec)
    total = 0
    for piece in decoder.pieces(data):
        assert 0 < len(piece) <= 128 * 1024
        assert piece == b"x" * len(piece)
        total += len(piece)
    assert total == size
    decoder.finish()


def test_lz4_end_marker_and_concatenated_streams() -> None:
    """An empty block ends one LZ4Block stream; a second stream after it is read on."""
    end = struct.pack("<8sBiii", b"LZ4Block", 0x15, 0, 0, 0)
    raw = struct.pack("<8sBiii", b"LZ4Block", 0x15, 3, 3, 0) + b"raw"
    data = lz4_block(b"one\n" * 100) + end + raw + lz4_block(b"two\n") + end
    assert decode("lz4", data) == b"one\n" * 100 + b"raw" + b"two\n"


def test_lz4_header_longer_than_its_block_size_is_corrupt() -> None:
    """A header claiming more than its block size (from the token) is rejected at once."""
    header = struct.pack("<8sBiii", b"LZ4Block", 0x20, 10, 2000, 0)  # level 0: 1 KiB blocks
    with pytest.raises(CorruptStream) as caught:
        decoder_for("lz4").feed(header)
    assert str(caught.value) == (
        "lz4: bad block header (token 0x20, compressed 10, original 2000) at byte 0"
    )


def test_snappy_concatenated_streams_and_oversized_claims() -> None:
    """A second snappy-java header mid-stream is accepted; a block claiming a huge decoded
    size is rejected before anything is allocated."""
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)

    def chunk(data: bytes) -> bytes:
        block = bytes(cramjam.snappy.compress_raw(data))
        return struct.pack(">i", len(block)) + block

    data = header + chunk(b"one\n") + header + chunk(b"two\n")
    assert decode("snappy", data) == b"one\n" + b"two\n"
    huge = struct.pack(">i", 5) + b"\xff\xff\xff\xff\x0f"  # varint length 2**32 - 1
    with pytest.raises(CorruptStream) as caught:
        decoder_for("snappy").feed(header + huge)
    assert str(caught.value) == (
        "snappy: chunk claims 4294967295 decoded bytes, more than 67108864 at byte 16"
    )


def test_lzf_stored_chunks_are_framed_without_the_lzf_module() -> None:
    """Stored (type 0) compress-lzf chunks decode, in any split, without raw LZF decoding.

    The raw decoder passed is a stand-in that fails if called: stored chunks never need it,
    and the python-lzf package is not a dependency yet."""

    def never(data: bytes, size: int) -> bytes:
        raise AssertionError("stored chunks need no LZF decoding")

    data = b"".join(b"ZV\x00" + struct.pack(">H", len(p)) + p for p in (b"one\n", b"two\n"))
    decoder = LzfDecoder(raw=never)
    out = b"".join(decoder.feed(data[i : i + 2]) for i in range(0, len(data), 2))
    decoder.finish()
    assert out == b"one\ntwo\n"
    with pytest.raises(CorruptStream) as caught:
        LzfDecoder(raw=never).feed(b"ZV\x07\x00\x01x")
    assert str(caught.value) == "lzf: unknown chunk type 7 at byte 0"


@pytest.mark.skipif(not LZF_MISSING, reason="the lzf module is installed")
def test_lzf_without_its_module_is_unavailable() -> None:
    """Without the python-lzf package, asking for an lzf decoder says what is missing."""
    with pytest.raises(CodecUnavailable) as caught:
        decoder_for("lzf")
    assert str(caught.value) == (
        "lzf: decoding needs the python-lzf package (module 'lzf'), which is not installed"
    )


def test_unknown_codec() -> None:
    """A codec Spark does not write is refused with the list of known ones."""
    with pytest.raises(UnknownCodec) as caught:
        decoder_for("gzip")
    assert str(caught.value) == "unknown codec 'gzip'; known: lz4, lzf, none, snappy, zstd"


def test_none_passes_bytes_through() -> None:
    """The uncompressed codec returns its input unchanged and is always idle."""
    decoder = decoder_for("none")
    assert decoder.feed(b'{"a":1}\n{"b"') == b'{"a":1}\n{"b"'
    assert decoder.idle
    decoder.finish()


STARTS = {
    "zstd": (b"", b"\x28\xb5\x2f\xfd"),
    "lz4": (b"", b"LZ4Block"),
    "snappy": (b"", b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"),
    "lzf": (b"", b"ZV\x01", b"ZV\x00"),
}


@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_input_raises_only_corrupt_stream(codec: str, data: st.DataObject) -> None:
    """Random bytes after a plausible start either wait for more or raise CorruptStream."""
    decoder = decoder_for(codec)
    start = data.draw(st.sampled_from(STARTS[codec]))
    payload = start + data.draw(st.binary(max_size=200))
    with contextlib.suppress(CorruptStream):
        decoder.feed(payload)
        decoder.finish()


# -- damage inside a block: every block before it is kept ---------------------------------------

DAMAGE_LINES = b"".join(
    b'{"Event":"SparkListenerTaskEnd","Stage ID":%d,"Task Info":{"Task ID":%d,"Host":"h%d"}}\n'
    % (i % 7, i, i * 7919 % 101)
    for i in range(8000)
)


def damaged(encoded: bytes) -> bytes:
    """16 bytes in the middle of `encoded` zeroed (a disk sector that reads back as zeros)."""
    mid = len(encoded) // 2
    return encoded[:mid] + bytes(16) + encoded[mid + 16 :]


def fed_until_corrupt(codec: str, data: bytes, piece: int) -> tuple[bytes, CorruptStream]:
    """Feed `data` in pieces of `piece` bytes; the output before the error (the pieces' and
    the failing call's `partial`) and the error."""
    decoder = decoder_for(codec)
    out: list[bytes] = []
    for at in range(0, len(data), piece):
        try:
            out.append(decoder.feed(data[at : at + piece]))
        except CorruptStream as error:
            return b"".join(out) + error.partial, error
    raise AssertionError("the damage was not noticed")


def streamed_until_corrupt(data: bytes) -> bytes:
    """What libzstd's streaming decoder gives of `data` fed one byte at a time, up to the
    error: the blocks before the damaged one (the reference, independent of `ZstdDecoder`)."""
    stream = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
    out: list[bytes] = []
    for at in range(len(data)):
        try:
            out.append(stream.decompress(data[at : at + 1]))
        except zstandard.ZstdError:
            return b"".join(out)
    raise AssertionError("libzstd did not notice the damage")


@pytest.mark.parametrize("pieces", [1, 3])
@pytest.mark.parametrize("frames", [1, 2])
def test_damage_inside_a_zstd_frame_keeps_the_blocks_before_it(frames: int, pieces: int) -> None:
    """Damage inside a multi-block frame (alone or after a good frame; fed at once, or in
    thirds so that the frame continues from an earlier feed) loses only the blocks from the
    damaged one on, as a streaming decoder would."""
    compressor = zstandard.ZstdCompressor(level=3)
    frame = compressor.compress(DAMAGE_LINES)
    first = b'{"Event":"one"}\n' * 50 if frames == 2 else b""
    good = compressor.compress(first) if first else b""
    data = good + damaged(frame)
    expected = streamed_until_corrupt(data)
    assert len(expected) > len(first) + 100_000  # whole blocks of the damaged frame
    out, error = fed_until_corrupt("zstd", data, -(-len(data) // pieces))
    assert out == expected
    assert out.startswith(first) and DAMAGE_LINES.startswith(out[len(first) :])
    assert str(error) == (
        f"zstd: undecodable frame starting at byte {len(good)} "
        "(zstd decompressor error: Data corruption detected)"
    )


DETAIL = {
    "lz4": "Decompression failed: corrupt input or insufficient space in destination buffer. "
    "Error code: 1186",
    "snappy": "snappy: corrupt input (expected valid offset but got offset 8778; "
    "dst position: 8741)",
}
DAMAGED_BLOCK = {
    "lz4": "lz4: undecodable block ({detail}) at byte {at}",
    "snappy": "snappy: undecodable chunk ({detail}) at byte {at}",
    "lzf": "lzf: chunk does not decode to 16384 bytes at byte {at}",
}


@pytest.mark.parametrize("piece", [1 << 30, 1000], ids=["one_feed", "pieces"])
@pytest.mark.parametrize("codec", codec_params(("lz4", "snappy", "lzf")))
def test_damage_inside_a_block_keeps_every_block_before_it(codec: str, piece: int) -> None:
    """Damage inside the third of five blocks: exactly the first two blocks' output, fed at
    once or in pieces, and an error naming the damaged block."""
    blocks = [DAMAGE_LINES[i : i + 16384] for i in range(0, 5 * 16384, 16384)]
    encoded = block_encoded(codec, blocks)
    third = len(encoded) - 3
    encoded[third] = damaged(encoded[third])
    out, error = fed_until_corrupt(codec, b"".join(encoded), piece)
    assert out == blocks[0] + blocks[1]
    at = len(b"".join(encoded[:third]))
    assert str(error) == DAMAGED_BLOCK[codec].format(at=at, detail=DETAIL.get(codec, ""))
    assert error.offset == at
