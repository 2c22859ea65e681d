"""Failures the fuzzer found, kept forever: ``regressions/found/<property>/<config>-<hash>.json``.

Each JSON holds the property, the preset, the run seed, the shrunk example (``Property.to_json``) and
the first line of the error. Beside it, ``<config>-<hash>/<config>/<property>.cfg`` (plus ``.dat``
files) is the example's register program as an NVDLA trace checking the CRC the *reference* computes,
so ``dla trace regressions/found/<property>/<config>-<hash>`` replays it on golden (or ``--target
verilator``) without this package. ``regressions/fuzz/test_engines.py`` turns every JSON into a
hypothesis ``@example`` of its property's test, so a bug once found is checked on every run.
"""
from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import hypothesis

from dlaio import write_atomic
from golden.config import HwConfig, get_config
from regressions.fuzz.properties import Property

#: The repository's collection (``--found-dir`` and the tests may point elsewhere).
FOUND_DIR = Path(__file__).resolve().parent.parent / "found"


class FoundError(ValueError):
    """A saved failure that cannot be read (names the file)."""


@dataclass(frozen=True)
class Found:
    path: Path
    property: str
    config: str
    seed: int | None
    example: Any  # decoded with the property's from_json
    error: str

    @property
    def trace_dir(self) -> Path:
        return self.path.with_suffix("")


def first_line(error: BaseException | str) -> str:
    """``Type: first line of the message`` (or the string's first line)."""
    if isinstance(error, BaseException):
        text = str(error).strip().splitlines()
        return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
    return (error.strip().splitlines() or [""])[0]


def short_hash(document: Any) -> str:
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:10]


def _dumps(data: dict) -> str:
    """One top-level key per line, each value compact: readable, and the arrays stay short."""
    body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in data.items())
    return "{\n" + body + "\n}\n"


def save(prop: Property, config: str, example: Any, error: BaseException | str, seed: int | None = None,
         found_dir: Path = FOUND_DIR, extra: dict | None = None, hw: HwConfig | None = None) -> Path:
    """Write the JSON and (for properties with a register program) the replayable trace; returns the
    JSON's path. Saving the same example twice rewrites the same files. ``hw`` is the config the trace's
    CRC is computed with (default: the preset; a simulator failure passes its DUT's ``tb.duts.dut_config``,
    the config its batch's traces were checked with)."""
    document = prop.to_json(example)
    stem = f"{config}-{short_hash(document)}"
    directory = Path(found_dir) / prop.name
    directory.mkdir(parents=True, exist_ok=True)
    data = {"property": prop.name, "config": config, "seed": seed, "example": document,
            "error": first_line(error), **(extra or {})}
    if prop.program is not None:
        try:
            program, expected = prop.program(get_config(config) if hw is None else hw, example)
            program.write_trace(directory / stem / config, prop.name, zlib.crc32(expected))
        except Exception as exc:  # the JSON is still worth keeping
            data["trace_error"] = first_line(exc)
    path = directory / f"{stem}.json"
    write_atomic(path, _dumps(data))
    return path


def _read(path: Path, props: dict[str, Property]) -> Found:
    try:
        data = json.loads(path.read_text())
        prop = props[data["property"]]
        return Found(path, prop.name, data["config"], data.get("seed"), prop.from_json(data["example"]),
                     data.get("error", ""))
    except KeyError as exc:
        raise FoundError(f"{path}: missing or unknown {exc.args[0]!r}") from None
    except (ValueError, TypeError) as exc:
        raise FoundError(f"{path}: {exc}") from None


def load(props: dict[str, Property], found_dir: Path = FOUND_DIR, prop: str | None = None,
         config: str | None = None) -> list[Found]:
    """Every saved failure under ``found_dir`` (optionally of one property / preset), sorted by path. One
    property's failures are read from its own folder only, so a test that registered some properties is not
    stopped by the saved failures of another."""
    out = []
    for path in sorted(Path(found_dir).glob(f"{prop if prop is not None else '*'}/*.json")):
        found = _read(path, props)
        if (prop is None or found.property == prop) and (config is None or found.config == config):
            out.append(found)
    return out


def examples(props: dict[str, Property], prop: str, config: str, found_dir: Path = FOUND_DIR) -> Iterator[Any]:
    """The saved examples of one property on one preset (what becomes its ``@example``s)."""
    for found in load(props, found_dir, prop, config):
        yield found.example


def with_found_examples(test: Callable, props: dict[str, Property], prop: str, config: str,
                        found_dir: Path = FOUND_DIR, argname: str = "example") -> Callable:
    """``test`` (a ``@given(example=...)`` test) with every saved example of ``prop`` on ``config`` as an
    ``@example``: hypothesis runs them first, before anything it generates."""
    for saved in examples(props, prop, config, found_dir):
        test = hypothesis.example(**{argname: saved})(test)
    return test
