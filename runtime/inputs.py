"""What ``dla run`` feeds a network and what ``--rawdump`` writes.

Inputs: ``.npy``/``.npz`` float NCHW arrays, or 8-bit images (``.png``, ``.jpg``/``.jpeg``, ``.pgm``, or a
directory of them) decoded with Pillow into the input tensor's (C, H, W): C = 1 takes grayscale, C = 3 colour
(RGB, or BGR with ``bgr``). Each image is one sample, in the order given. Pixels (0..255) become
``(pixel - mean[c]) / normalize``, the float the loadable then quantizes with its input scale.

Raw dumps: every output, every sample, as little-endian float32 (``.f32``), as the int8 the DLA wrote for
int8 feature outputs (``.int8``), and as nvdla_runtime's ``--rawdump`` text (``.dimg``), listed by
``index.json``; the files of one dump appear together or not at all.

Every user error raises :class:`InputError` with a one-line message naming the file or option.
"""
from __future__ import annotations

import json
import math
import re
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable, Mapping, Sequence

import numpy as np

from dlaio import check_output, publish_dir
from dlaio.inputs import not_a_file
from golden.budget import check_size
from golden.errors import DlaError

ARRAY_SUFFIXES = (".npy", ".npz")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".pgm")
RAWDUMP_FORMAT = "dla-rawdump/1"

#: Pillow modes decoded as 8-bit grayscale / colour (alpha and palettes dropped by the conversion).
_GRAY_MODES = frozenset({"1", "L", "LA", "La"})
_COLOR_MODES = frozenset({"RGB", "RGBA", "RGBa", "RGBX", "P", "PA", "CMYK", "YCbCr", "LAB", "HSV"})
_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))})


class InputError(Exception):
    """A bad input file or preprocessing option: printed as one line, exit 2."""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# ---- options ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preprocess:
    """Image preprocessing: per-channel ``mean`` (None = 0) subtracted, then divided by ``normalize``
    (None = 1); ``bgr`` feeds colour images as B, G, R instead of R, G, B."""

    mean: tuple[float, ...] | None = None
    normalize: float | None = None
    bgr: bool = False

    def given(self) -> list[str]:
        """The options the user set, as command-line flags."""
        return [flag for flag, on in (("--mean", self.mean is not None), ("--normalize", self.normalize is not None),
                                      ("--bgr", self.bgr)) if on]


def parse_mean(text: str) -> tuple[float, ...]:
    """``"104,117,123"`` or ``"128"`` -> finite floats, in the input tensor's channel order."""
    values = []
    for part in text.split(","):
        try:
            v = float(part.strip())
        except ValueError:
            raise InputError(f"--mean {text!r}: expected comma-separated numbers (one, or one per channel)") from None
        if not math.isfinite(v):
            raise InputError(f"--mean {text!r}: {part.strip()} is not a finite number")
        values.append(v)
    return tuple(values)


def parse_normalize(text: str) -> float:
    """The ``--normalize`` divisor: a finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"--normalize {text!r}: expected a positive number") from None
    if not math.isfinite(v) or v <= 0:
        raise InputError(f"--normalize {text}: needs a positive number")
    return v


# ---- arrays and images -----------------------------------------------------------------------------------
def _npy_bytes(f: IO[bytes]) -> int:
    """Bytes of the array a .npy header declares, read from the header alone (the data is not touched)."""
    version = np.lib.format.read_magic(f)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(f)  # a v3 header differs from v2 only in its text encoding
    n = dtype.itemsize
    for d in shape:
        n *= d
    return n


def _check_array_budget(path: Path) -> None:
    """Refuse, before numpy allocates them, arrays whose headers (or a .npz's members) declare more than the
    memory budget: numpy allocates the declared shape first and only then finds the file too short."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                check_size(f"{path}: member {info.filename!r} of {info.file_size} bytes", info.file_size)
                with z.open(info) as f:
                    check_size(f"{path}: array {info.filename!r}", _npy_bytes(f))
    else:
        with path.open("rb") as f:
            check_size(f"{path}: array", _npy_bytes(f))


def load_array(path: Path) -> np.ndarray | dict[str, np.ndarray]:
    """A .npy array (or the arrays of a .npz by name), with the file named in any error."""
    why = not_a_file(path)
    if why:
        raise InputError(f"{path}: {why}")
    try:
        _check_array_budget(path)
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                return {k: data[k] for k in data.files}
    except DlaError:  # golden.budget.MemoryBudgetError: names the file already
        raise
    except Exception as exc:  # numpy's and zipfile's readers fail in many ways (ValueError, BadZipFile,
        # zlib.error, TokenError from the header, EOFError, OSError): each means a file that is not an array
        raise InputError(f"{path}: not a .npy/.npz array ({type(exc).__name__}: {_one_line(exc)[:200]})") from None
    if not np.issubdtype(data.dtype, np.number):
        raise InputError(f"{path}: holds {data.dtype} values, not numbers")
    return data


def image_files(directory: Path) -> list[Path]:
    """The image files (by extension) directly in ``directory``, sorted by name; hidden files skipped."""
    found = sorted(p for p in directory.iterdir()
                   if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in IMAGE_SUFFIXES)
    if not found:
        raise InputError(f"{directory}: no {'/'.join(IMAGE_SUFFIXES)} images in this directory")
    return found


def image_geometry(name: str, shape: Sequence[int]) -> tuple[int, int, int]:
    """(C, H, W) of an input tensor that images can feed: NCHW with C = 1 or 3."""
    if len(shape) != 4:
        raise InputError(f"input {name!r} has shape {tuple(shape)}, not NCHW: feed it a .npy array, not images")
    c, h, w = (int(v) for v in shape[1:])
    if c not in (1, 3):
        raise InputError(f"input {name!r} has {c} channels; images feed 1 (grayscale) or 3 (colour) channels: "
                         "feed it a .npy array")
    return c, h, w


def decode_image(path: Path, geometry: tuple[int, int, int], *, bgr: bool = False, name: str = "data") -> np.ndarray:
    """An 8-bit image as uint8 (C, H, W) for an input of ``geometry`` (C, H, W), never resized: grayscale
    for C = 1, R, G, B (or B, G, R) for C = 3."""
    try:
        from PIL import Image
    except ImportError:
        raise InputError(f"{path}: reading images needs Pillow (pip install Pillow)") from None
    channels, height, width = geometry
    why = not_a_file(path)
    if why:  # a FIFO would block Image.open forever
        raise InputError(f"{path}: {why}")
    try:
        with Image.open(path) as img:
            img.load()  # decode now: truncated or corrupt data fails here, not later
            mode, (w, h) = img.mode, img.size
            if mode not in _GRAY_MODES | _COLOR_MODES:
                raise InputError(f"{path}: {mode} images are not supported (8-bit grayscale or colour only)")
            color = mode in _COLOR_MODES
            if channels == 1 and color:
                raise InputError(f"{path}: a colour image ({mode}), but input {name!r} takes 1 channel (grayscale)")
            if channels == 3 and not color:
                raise InputError(f"{path}: a grayscale image, but input {name!r} takes 3 channels (colour)")
            if (h, w) != (height, width):
                raise InputError(f"{path}: image is {w}x{h} (width x height), input {name!r} expects "
                                 f"{width}x{height}; resize it first")
            pixels = np.asarray(img.convert("RGB" if color else "L"), dtype=np.uint8)
    except InputError:
        raise
    except (OSError, SyntaxError, ValueError, EOFError, struct.error, Image.DecompressionBombError) as exc:
        raise InputError(f"{path}: not a readable image ({_one_line(exc)})") from None
    if pixels.ndim == 2:
        return pixels[None].copy()
    chw = pixels.transpose(2, 0, 1)
    return np.ascontiguousarray(chw[::-1] if bgr else chw)


def preprocess(pixels: np.ndarray, pre: Preprocess, *, name: str = "data") -> np.ndarray:
    """uint8 (N, C, H, W) pixels -> float32 ``(pixel - mean[c]) / normalize`` (computed in float64)."""
    c = pixels.shape[1]
    mean = np.zeros(c) if pre.mean is None else np.asarray(pre.mean, dtype=np.float64)
    if mean.size not in (1, c):
        raise InputError(f"--mean {','.join(f'{v:g}' for v in pre.mean or ())}: {mean.size} values for input "
                         f"{name!r} with {c} channels (give 1 or {c})")
    mean = np.broadcast_to(mean, (c,)).reshape(1, c, 1, 1)
    return ((pixels.astype(np.float64) - mean) / (pre.normalize or 1.0)).astype(np.float32)


# ---- --input specs -> input arrays -----------------------------------------------------------------------
@dataclass
class Inputs:
    """The float NCHW arrays by input name, and per sample the image file it came from (None for arrays)."""

    arrays: dict[str, np.ndarray]
    labels: list[str] | None = None


def _kind(path: Path, spec: str) -> str:
    if path.is_dir():
        return "dir"
    if not path.exists():
        raise InputError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix in ARRAY_SUFFIXES:
        return "array"
    if suffix in IMAGE_SUFFIXES:
        return "image"
    raise InputError(f"--input {spec}: unknown input type {path.suffix or '(no extension)'!r} (use "
                     f"{', '.join(ARRAY_SUFFIXES + IMAGE_SUFFIXES)} or a directory of images)")


def gather_inputs(specs: Iterable[str], shapes: Mapping[str, Sequence[int]], pre: Preprocess = Preprocess()
                  ) -> Inputs:
    """``--input`` specs -> arrays. ``X.npy`` fills the next input not given otherwise, ``NAME=X.npy`` names
    it, a ``.npz`` names its arrays itself. Images and directories of images are samples, batched in the
    order given: for the only input of the network, or for ``NAME=`` (repeatable)."""
    names = list(shapes)
    arrays: dict[str, np.ndarray] = {}
    images: dict[str, list[Path]] = {}
    unnamed: list[Path] = []
    for spec in specs:
        name, sep, rest = spec.partition("=")
        if sep and name in names:
            path = Path(rest)
            kind = _kind(path, spec)
            if kind == "array":
                if name in arrays:
                    raise InputError(f"--input {spec}: input {name!r} given twice")
                arr = load_array(path)
                if isinstance(arr, dict):
                    raise InputError(f"--input {spec}: a named input needs a .npy array")
                arrays[name] = arr
            else:
                images.setdefault(name, []).extend(image_files(path) if kind == "dir" else [path])
        elif sep and not Path(spec).exists():
            raise InputError(f"--input {spec}: the network has no input {name!r} (inputs: {', '.join(names)})")
        else:
            path = Path(spec)
            if _kind(path, spec) == "array":
                unnamed.append(path)
            elif len(names) != 1:
                raise InputError(f"--input {spec}: the network has {len(names)} inputs ({', '.join(names)}); "
                                 f"say which one the images feed: --input NAME={spec}")
            else:
                images.setdefault(names[0], []).extend(image_files(path) if path.is_dir() else [path])
    for path in unnamed:
        arr = load_array(path)
        if isinstance(arr, dict):
            for k, v in arr.items():
                if k not in names:
                    raise InputError(f"{path}: array {k!r} is no input of the network (inputs: {', '.join(names)})")
                arrays[k] = v
            continue
        free = [n for n in names if n not in arrays and n not in images]
        fed = [n for n in names if n in images and n not in arrays]
        if not free and fed:
            raise InputError(f"--input {path}: input {fed[0]!r} is given both as an array and as images")
        if not free:
            raise InputError(f"--input {path}: every input of the network ({', '.join(names)}) is already given")
        arrays[free[0]] = arr
    if not images and pre.given():
        raise InputError(f"{', '.join(pre.given())}: only apply to image inputs ({', '.join(IMAGE_SUFFIXES)})")
    labels = None
    for name in names:
        if name not in images:
            continue
        if name in arrays:
            raise InputError(f"input {name!r} is given both as an array and as images")
        geometry = image_geometry(name, shapes[name])
        pixels = np.stack([decode_image(p, geometry, bgr=pre.bgr, name=name) for p in images[name]])
        arrays[name] = preprocess(pixels, pre, name=name)
        if labels is None:
            labels = [p.name for p in images[name]]
    return Inputs(arrays, labels)


# ---- --rawdump -------------------------------------------------------------------------------------------
def safe_stems(names: Iterable[str]) -> dict[str, str]:
    """Tensor name -> a file-name stem that is safe on every file system and unique (case-insensitively)."""
    used: set[str] = set()
    out: dict[str, str] = {}
    for name in names:
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._-")[:64] or "output"
        if stem.split(".")[0].upper() in _RESERVED:
            stem = "_" + stem
        unique, k = stem, 2
        while unique.lower() in used:
            unique, k = f"{stem}-{k}", k + 1
        used.add(unique.lower())
        out[name] = unique
    return out


def int8_scales(net) -> dict[str, float | None]:
    """Per output of a ``runtime.executor.Network``: the scale of the int8 feature tensor the DLA writes,
    or None (host tensors, computed in float on the CPU)."""
    from loadable import loadable_pb2 as pb

    out: dict[str, float | None] = {}
    for name in net.outputs:
        t = net.tensors[name]
        feature = t.storage == pb.Tensor.FEATURE and t.dtype == pb.Tensor.INT8
        out[name] = float(t.scale) if feature else None
    return out


def check_rawdump_dir(directory: Path, *, inputs: Iterable[Path | str] = ()) -> Path:
    """Fail before running when ``--rawdump DIR`` cannot be written: not a folder, or a folder holding one
    of ``inputs`` (``dlaio.OutputError``)."""
    check_output(directory, inputs=inputs, kind="dir")
    return directory


def _dimg_text(values: np.ndarray) -> bytes:
    """nvdla_runtime's ``--rawdump`` text: every element followed by one space, no newline."""
    if values.dtype == np.int8:
        return "".join(f"{int(v)} " for v in values).encode()
    return "".join(f"{float(v):.9g} " for v in values).encode()


def rawdump_files(results: Mapping[str, np.ndarray], shapes: Mapping[str, Sequence[int]],
                  scales: Mapping[str, float | None], *, loadable: str = "") -> dict[str, bytes]:
    """File name -> contents of a raw dump of ``results`` (the float32 outputs of a run, samples stacked)."""
    stems = safe_stems(results)
    files: dict[str, bytes] = {}
    entries = []
    samples: int | None = None
    for name, y in results.items():
        shape = tuple(int(v) for v in shapes[name])
        per = int(np.prod(shape)) if shape else 1
        y = np.ascontiguousarray(y, dtype=np.float32).reshape(-1)
        n = y.size // per if per else 0
        if n * per != y.size or (samples is not None and n != samples):
            raise ValueError(f"output {name!r}: {y.size} values do not split into samples of {shape}")
        samples = n
        scale = scales.get(name)
        q = None
        if scale:
            q = np.clip(np.rint(y.astype(np.float64) / scale), -128, 127).astype(np.int8)
            if not np.array_equal(q.astype(np.float32) * np.float32(scale), y):
                q = None  # not an exact int8 grid: dump the floats only
        entry = {"name": name, "shape": list(shape), "scale": scale if q is not None else None,
                 "float32": [], "int8": [] if q is not None else None, "dimg": []}
        for i in range(n):
            part = y[i * per:(i + 1) * per]
            base = f"{stems[name]}.{i}"
            files[f"{base}.f32"] = part.astype("<f4").tobytes()
            entry["float32"].append(f"{base}.f32")
            if q is not None:
                files[f"{base}.int8"] = q[i * per:(i + 1) * per].tobytes()
                entry["int8"].append(f"{base}.int8")
            files[f"{base}.dimg"] = _dimg_text(q[i * per:(i + 1) * per] if q is not None else part)
            entry["dimg"].append(f"{base}.dimg")
        entries.append(entry)
    index = {"format": RAWDUMP_FORMAT, "loadable": loadable, "samples": samples or 0,
             "byte_order": "little", "outputs": entries}
    files["index.json"] = (json.dumps(index, indent=2) + "\n").encode()
    return files


def publish(directory: Path, files: Mapping[str, bytes], *, inputs: Iterable[Path | str] = ()) -> None:
    """Write ``files`` into ``directory`` all or nothing (``dlaio.publish_dir``: staged in a hidden folder,
    then renamed: the whole folder when it is new, else file by file with index.json last)."""
    publish_dir(directory, dict(files), inputs=inputs)


def write_rawdump(directory: Path, net, results: Mapping[str, np.ndarray], *, loadable: str = "",
                  inputs: Iterable[Path | str] = ()) -> int:
    """Dump every output of ``net`` (a ``runtime.executor.Network``) for every sample; returns the number
    of files written (index.json included). Never into a folder holding one of ``inputs``."""
    files = rawdump_files(results, net.output_shapes(), int8_scales(net), loadable=loadable)
    publish(directory, files, inputs=inputs)
    return len(files)
