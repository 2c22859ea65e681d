"""runtime.inputs: image decoding, --mean/--normalize, batch assembly, --rawdump; and ``dla run`` on images
end to end with a loadable the real compiler built."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.cli import main as dla
from dlaio import OutputError
from runtime.inputs import (
    InputError,
    Preprocess,
    decode_image,
    gather_inputs,
    image_geometry,
    parse_mean,
    parse_normalize,
    preprocess,
    publish,
    rawdump_files,
    safe_stems,
)

RNG = np.random.default_rng(11)


def rgb(h: int = 8, w: int = 8) -> np.ndarray:
    return RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)


def gray(h: int = 8, w: int = 8) -> np.ndarray:
    return RNG.integers(0, 256, (h, w), dtype=np.uint8)


def save(path: Path, pixels: np.ndarray, **kw) -> Path:
    Image.fromarray(pixels).save(path, **kw)
    return path


def decoded(path: Path, mode: str) -> np.ndarray:
    """What the file decodes to (JPEG is lossy: compare against this, not the original), as (C, H, W)."""
    with Image.open(path) as img:
        a = np.asarray(img.convert(mode), dtype=np.uint8)
    return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)


# ---- options -------------------------------------------------------------------------------------------
def test_parse_mean_and_normalize() -> None:
    assert parse_mean("104,117.5, 123") == (104.0, 117.5, 123.0)
    assert parse_mean("-1") == (-1.0,)
    for bad in ("", "1,,2", "a,b,c", "1;2", "nan", "1,inf"):
        with pytest.raises(InputError, match="--mean"):
            parse_mean(bad)
    assert parse_normalize("255") == 255.0 and parse_normalize("0.5") == 0.5
    for bad in ("0", "-1", "abc", "nan", "inf", "-0"):
        with pytest.raises(InputError, match="--normalize"):
            parse_normalize(bad)


def test_preprocess_subtracts_mean_per_channel_then_divides() -> None:
    p = RNG.integers(0, 256, (2, 3, 4, 5), dtype=np.uint8)
    x = preprocess(p, Preprocess(mean=(10.0, 20.0, 30.0), normalize=4.0))
    assert x.dtype == np.float32 and x.shape == p.shape
    want = (p.astype(np.float64) - np.array([10, 20, 30]).reshape(1, 3, 1, 1)) / 4.0
    np.testing.assert_array_equal(x, want.astype(np.float32))
    np.testing.assert_array_equal(preprocess(p, Preprocess(mean=(7.0,))), (p - 7.0).astype(np.float32))
    np.testing.assert_array_equal(preprocess(p, Preprocess()), p.astype(np.float32))  # 0..255 by default
    with pytest.raises(InputError, match=r"--mean 1,2: 2 values for input 'data' with 3 channels \(give 1 or 3\)"):
        preprocess(p, Preprocess(mean=(1.0, 2.0)))


# ---- decoding ------------------------------------------------------------------------------------------
def test_png_rgb_and_bgr_are_exact(tmp_path) -> None:
    px = rgb()
    f = save(tmp_path / "a.png", px)
    np.testing.assert_array_equal(decode_image(f, (3, 8, 8)), px.transpose(2, 0, 1))
    np.testing.assert_array_equal(decode_image(f, (3, 8, 8), bgr=True), px.transpose(2, 0, 1)[::-1])
    # Alpha and palettes are converted away.
    rgba = np.dstack([px, np.full((8, 8), 7, np.uint8)])
    np.testing.assert_array_equal(decode_image(save(tmp_path / "a4.png", rgba), (3, 8, 8)), px.transpose(2, 0, 1))
    Image.fromarray(px).convert("P").save(tmp_path / "p.png")
    np.testing.assert_array_equal(decode_image(tmp_path / "p.png", (3, 8, 8)), decoded(tmp_path / "p.png", "RGB"))


def test_pgm_and_gray_png_and_jpeg(tmp_path) -> None:
    g = gray(6, 5)
    for name in ("g.pgm", "g.png"):
        out = decode_image(save(tmp_path / name, g), (1, 6, 5))
        assert out.dtype == np.uint8 and out.shape == (1, 6, 5)
        np.testing.assert_array_equal(out, g[None])
    assert (tmp_path / "g.pgm").read_bytes().startswith(b"P5")
    for name, pixels, c, mode in (("c.jpg", rgb(), 3, "RGB"), ("c.jpeg", gray(), 1, "L")):
        f = save(tmp_path / name, pixels, quality=80)
        np.testing.assert_array_equal(decode_image(f, (c, 8, 8)), decoded(f, mode))


@pytest.mark.parametrize("case, message", [
    ("color_into_gray", "a colour image (RGB), but input 'data' takes 1 channel"),
    ("gray_into_color", "a grayscale image, but input 'data' takes 3 channels"),
    ("size", "image is 7x8 (width x height), input 'data' expects 8x8; resize it first"),
    ("truncated", "not a readable image"),
    ("not_an_image", "not a readable image"),
    ("16bit", "I;16 images are not supported"),
])
def test_decode_errors_name_the_file(tmp_path, case, message) -> None:
    geometry = (1, 8, 8) if case in ("color_into_gray", "16bit") else (3, 8, 8)
    f = tmp_path / "img.png"
    if case == "color_into_gray":
        save(f, rgb())
    elif case == "gray_into_color":
        save(f, gray())
    elif case == "size":
        save(f, rgb(8, 7))
    elif case == "truncated":
        save(f, rgb(64, 64))
        f.write_bytes(f.read_bytes()[:200])
    elif case == "not_an_image":
        f.write_text("hello")
    elif case == "16bit":
        Image.fromarray(gray().astype(np.uint16) * 200).save(f)
    with pytest.raises(InputError) as info:
        decode_image(f, geometry)
    text = str(info.value)
    assert text.startswith(f"{f}: ") and message in text and "\n" not in text


def test_image_geometry_needs_nchw_with_1_or_3_channels() -> None:
    assert image_geometry("data", (1, 3, 4, 5)) == (3, 4, 5)
    with pytest.raises(InputError, match="input 'x' has 4 channels; images feed 1 .* or 3"):
        image_geometry("x", (1, 4, 8, 8))
    with pytest.raises(InputError, match=r"input 'v' has shape \(1, 10\), not NCHW"):
        image_geometry("v", (1, 10))


# ---- --input specs -------------------------------------------------------------------------------------
SHAPES = {"data": (1, 3, 8, 8)}


def test_images_batch_in_order_directories_sorted_and_labelled(tmp_path) -> None:
    a, b, c = (save(tmp_path / n, rgb()) for n in ("a.png", "b.png", "c.jpg"))
    d = tmp_path / "dir"
    d.mkdir()
    for n, src in (("2.png", a), ("1.jpg", c), ("note.txt", None), (".hidden.png", a)):
        (d / n).write_bytes(src.read_bytes() if src else b"x")
    pre = Preprocess(mean=(1.0, 2.0, 3.0), normalize=2.0)
    got = gather_inputs([str(b), str(d), f"data={a}"], SHAPES, pre)
    assert got.labels == ["b.png", "1.jpg", "2.png", "a.png"]
    pixels = np.stack([decoded(p, "RGB") for p in (b, c, a, a)])
    np.testing.assert_array_equal(got.arrays["data"], preprocess(pixels, pre))
    assert got.arrays["data"].shape == (4, 3, 8, 8) and got.arrays["data"].dtype == np.float32


def test_arrays_work_as_before(tmp_path) -> None:
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    got = gather_inputs([str(tmp_path / "x.npy")], SHAPES)
    assert got.labels is None
    np.testing.assert_array_equal(got.arrays["data"], x)
    np.savez(tmp_path / "two.npz", a=x, b=x[:, :1])
    got = gather_inputs([str(tmp_path / "two.npz")], {"a": (1, 3, 8, 8), "b": (1, 1, 8, 8)})
    assert sorted(got.arrays) == ["a", "b"]


def test_multi_input_networks_take_named_images(tmp_path) -> None:
    shapes = {"rgb": (1, 3, 8, 8), "mask": (1, 1, 8, 8)}
    img, m = save(tmp_path / "i.png", rgb()), save(tmp_path / "m.pgm", gray())
    np.save(tmp_path / "mask.npy", np.zeros((1, 1, 8, 8), np.float32))
    got = gather_inputs([f"mask={m}", f"rgb={img}"], shapes, Preprocess(mean=(5.0,)))
    np.testing.assert_array_equal(got.arrays["mask"], decoded(m, "L")[None] - np.float32(5))
    assert got.labels == ["i.png"]  # the first input in the network's order
    got = gather_inputs([str(tmp_path / "mask.npy"), f"rgb={img}"], shapes)  # the array fills the free input
    np.testing.assert_array_equal(got.arrays["mask"], np.zeros((1, 1, 8, 8), np.float32))
    assert got.arrays["rgb"].shape == (1, 3, 8, 8)
    with pytest.raises(InputError, match=r"the network has 2 inputs \(rgb, mask\); say which one .* --input NAME="):
        gather_inputs([str(img)], shapes)


@pytest.mark.parametrize("specs, pre, message", [
    (["x.npy"], Preprocess(mean=(1.0,)), "--mean: only apply to image inputs"),
    (["x.npy"], Preprocess(normalize=2.0, bgr=True), "--normalize, --bgr: only apply to image inputs"),
    (["x.npy", "a.png"], Preprocess(), "input 'data' is given both as an array and as images"),
    (["net.onnx"], Preprocess(), "--input net.onnx: unknown input type '.onnx'"),
    (["noext"], Preprocess(), "--input noext: unknown input type '(no extension)'"),
    (["gone.png"], Preprocess(), "gone.png: no such file"),
    (["empty"], Preprocess(), "empty: no .png/.jpg/.jpeg/.pgm images in this directory"),
    (["other=a.png"], Preprocess(), "--input other=a.png: the network has no input 'other' (inputs: data)"),
])
def test_gather_errors(tmp_path, monkeypatch, specs, pre, message) -> None:
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.zeros((1, 3, 8, 8), np.float32))
    save(tmp_path / "a.png", rgb())
    Path("net.onnx").write_bytes(b"")
    Path("noext").write_bytes(b"")
    Path("empty").mkdir()
    with pytest.raises(InputError) as info:
        gather_inputs(specs, SHAPES, pre)
    assert message in str(info.value)


# ---- --rawdump -----------------------------------------------------------------------------------------
def test_safe_stems_are_unique_and_harmless() -> None:
    stems = safe_stems(["conv1/out:0", "conv1_out_0", "CONV1/OUT:0", "..", "", "con", "a" * 200, "x y"])
    assert stems["conv1/out:0"] == "conv1_out_0"
    assert stems["conv1_out_0"] == "conv1_out_0-2" and stems["CONV1/OUT:0"] == "CONV1_OUT_0-3"
    assert stems[".."] == "output" and stems[""] == "output-2" and stems["con"] == "_con"
    assert len(stems["a" * 200]) == 64 and stems["x y"] == "x_y"
    assert all("/" not in s and not s.startswith(".") for s in stems.values())


def test_rawdump_files_hold_every_output_and_sample() -> None:
    scale = 0.25
    q = RNG.integers(-128, 128, (3, 4, 2, 2)).astype(np.int8)
    results = {"feat/1": q.astype(np.float32) * np.float32(scale),
               "prob": RNG.random((3, 10)).astype(np.float32)}
    files = rawdump_files(results, {"feat/1": (1, 4, 2, 2), "prob": (1, 10)}, {"feat/1": scale, "prob": None},
                          loadable="n.dla")
    index = json.loads(files["index.json"])
    assert index["format"] == "dla-rawdump/1" and index["samples"] == 3 and index["byte_order"] == "little"
    feat, prob = index["outputs"]
    assert feat["name"] == "feat/1" and feat["shape"] == [1, 4, 2, 2] and feat["scale"] == scale
    assert prob["int8"] is None and prob["scale"] is None
    for i in range(3):
        assert files[feat["float32"][i]] == results["feat/1"][i].astype("<f4").tobytes()
        assert files[feat["int8"][i]] == q[i].tobytes()
        assert files[feat["dimg"][i]] == "".join(f"{v} " for v in q[i].reshape(-1)).encode()
        assert np.array_equal(np.frombuffer(files[prob["float32"][i]], "<f4"), results["prob"][i])
        text = np.array(files[prob["dimg"][i]].decode().split(), dtype=np.float32)
        assert np.array_equal(text, results["prob"][i])
    assert feat["float32"][0] == "feat_1.0.f32"
    # Values off the int8 grid (should not happen) dump the floats only.
    files = rawdump_files({"y": np.full((1, 2), 0.3, np.float32)}, {"y": (1, 2)}, {"y": 0.25})
    assert json.loads(files["index.json"])["outputs"][0]["int8"] is None


def test_publish_is_all_or_nothing(tmp_path, monkeypatch) -> None:
    files = {"a.f32": b"1234", "index.json": b"{}"}
    publish(tmp_path / "new" / "dump", files)
    assert sorted(p.name for p in (tmp_path / "new" / "dump").iterdir()) == ["a.f32", "index.json"]
    existing = tmp_path / "old"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine")
    publish(existing, files)
    assert sorted(p.name for p in existing.iterdir()) == ["a.f32", "index.json", "keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "old"]  # no staging left behind

    calls = []
    real = Path.write_bytes

    def failing(self, data):
        calls.append(self)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", failing)
    for target in (tmp_path / "fresh", existing):
        calls.clear()
        before = sorted(p.name for p in tmp_path.rglob("*"))
        with pytest.raises(OutputError, match=f"cannot write {target}: No space left on device"):
            publish(target, {"b.f32": b"x", "index.json": b"{}"})
        assert sorted(p.name for p in tmp_path.rglob("*")) == before
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="it is a regular file, not a folder"):
        publish(tmp_path / "file", files)


# ---- end to end: dla compile, then dla run on images -----------------------------------------------------
def _tiny_model(path: Path, channels: int) -> Path:
    """conv3x3 -> relu -> maxpool -> classifier, with two outputs: the softmax (a CPU task, float) and the
    logits (an int8 DLA tensor)."""
    import onnx
    from onnx import TensorProto, helper

    from regressions.lib.zoo.models import NetBuilder

    nb = NetBuilder(f"tiny{channels}", channels, (channels, 8, 8))
    x = nb.max_pool(nb.relu(nb.conv("data", 8, 3)), 2, 2)
    logits = nb.classifier(nb.flatten(x))
    model = nb.model(nb.softmax(logits))
    model.graph.output.append(helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, 10]))
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def loadables(tmp_path_factory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("nets")
    out = {}
    for c in (3, 1):
        out[c] = root / f"tiny{c}.dla"
        assert dla(["compile", str(_tiny_model(root / f"tiny{c}.onnx", c)), "--config", "nv_small",
                    "-o", str(out[c]), "--calib-random", "4"]) == 0
    return out


def test_run_on_images_equals_run_on_the_same_array(loadables, tmp_path, capsys) -> None:
    net = loadables[3]
    a, b = save(tmp_path / "a.png", rgb()), save(tmp_path / "b.jpg", rgb(), quality=75)
    mean, norm = (120.0, 110.0, 100.0), 64.0
    pixels = np.stack([decoded(a, "RGB"), decoded(b, "RGB")]).astype(np.float64)
    x = ((pixels - np.array(mean).reshape(1, 3, 1, 1)) / norm).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    capsys.readouterr()
    assert dla(["run", str(net), "--input", str(a), "--input", str(b), "--mean", "120,110,100", "--normalize", "64",
                "--rawdump", str(tmp_path / "d"), "--topk", "3", "--output", str(tmp_path / "img.npz")]) == 0
    text = capsys.readouterr().out.splitlines()
    assert dla(["run", str(net), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "arr.npz")]) == 0
    with np.load(tmp_path / "img.npz") as got, np.load(tmp_path / "arr.npz") as want:
        assert sorted(got.files) == sorted(want.files) and len(got.files) == 2
        results = {k: got[k] for k in got.files}
        for k in got.files:
            assert got[k].shape == (2, 10)
            np.testing.assert_array_equal(got[k], want[k])
    # --topk: per sample, the first output's best classes with scores, and the image it came from.
    index = json.loads((tmp_path / "d" / "index.json").read_text())
    first = index["outputs"][0]["name"]
    for i, label in enumerate(["a.png", "b.jpg"]):
        row = results[first][i]
        best = np.argsort(-row, kind="stable")[:3]
        line = f"{first}[{i}] top-3: " + ", ".join(f"{j} ({row[j]:.4f})" for j in best) + f"  [{label}]"
        assert line in text
    # --rawdump: every output, every sample; the files equal the returned outputs.
    assert index["samples"] == 2 and {o["name"] for o in index["outputs"]} == set(results)
    kinds = set()
    for o in index["outputs"]:
        for i in range(2):
            y = results[o["name"]][i]
            f32 = np.fromfile(tmp_path / "d" / o["float32"][i], dtype="<f4")
            np.testing.assert_array_equal(f32, y.reshape(-1))
            dimg = (tmp_path / "d" / o["dimg"][i]).read_text().split()
            if o["int8"] is not None:
                q = np.fromfile(tmp_path / "d" / o["int8"][i], dtype=np.int8)
                np.testing.assert_array_equal(q.astype(np.float32) * np.float32(o["scale"]), y.reshape(-1))
                assert [int(v) for v in dimg] == q.tolist()
                kinds.add("int8")
            else:
                np.testing.assert_array_equal(np.array(dimg, dtype=np.float32), y.reshape(-1))
                kinds.add("float")
    assert kinds == {"int8", "float"}
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == sorted(
        ["index.json"] + [f for o in index["outputs"] for k in ("float32", "int8", "dimg") for f in (o[k] or [])])


def test_run_bgr_directories_and_grayscale(loadables, tmp_path, capsys) -> None:
    d = tmp_path / "imgs"
    d.mkdir()
    a, b = save(d / "1.png", rgb()), save(d / "0.png", rgb())
    pixels = np.stack([decoded(b, "RGB"), decoded(a, "RGB")])[:, ::-1].astype(np.float64)  # sorted, BGR
    x = ((pixels - np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1)) / 2.5).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for argv, y in ((["--input", str(d), "--bgr", "--mean", "1,2,3", "--normalize", "2.5"], "img.npz"),
                    (["--input", str(tmp_path / "x.npy")], "arr.npz")):
        assert dla(["run", str(loadables[3]), *argv, "--output", str(tmp_path / y)]) == 0
    with np.load(tmp_path / "img.npz") as got, np.load(tmp_path / "arr.npz") as want:
        for k in want.files:
            np.testing.assert_array_equal(got[k], want[k])
    g = save(tmp_path / "g.pgm", gray())
    np.save(tmp_path / "g.npy", ((decoded(g, "L")[None].astype(np.float64) - 128) / 255).astype(np.float32))
    for argv, y in ((["--input", f"data={g}", "--mean", "128", "--normalize", "255"], "g1.npz"),
                    (["--input", str(tmp_path / "g.npy")], "g2.npz")):
        assert dla(["run", str(loadables[1]), *argv, "--output", str(tmp_path / y)]) == 0
    with np.load(tmp_path / "g1.npz") as got, np.load(tmp_path / "g2.npz") as want:
        for k in want.files:
            np.testing.assert_array_equal(got[k], want[k])


@pytest.mark.parametrize("argv, message", [
    (["--input", "big.png"], "big.png: image is 9x8 (width x height), input 'data' expects 8x8"),
    (["--input", "g.pgm"], "g.pgm: a grayscale image, but input 'data' takes 3 channels"),
    (["--input", "cut.jpg"], "cut.jpg: not a readable image"),
    (["--input", "a.png", "--mean", "1,2"], "--mean 1,2: 2 values for input 'data' with 3 channels"),
    (["--input", "a.png", "--mean", "1,x,3"], "--mean '1,x,3': expected comma-separated numbers"),
    (["--input", "a.png", "--normalize", "0"], "--normalize 0: needs a positive number"),
    (["--input", "a.png", "--normalize", "-2"], "--normalize -2: needs a positive number"),
    (["--input", "a.bmp"], "--input a.bmp: unknown input type '.bmp'"),
    (["--input", "a.png", "--rawdump", "a.png"], "--rawdump a.png: it is a regular file, not a folder"),
])
def test_run_image_errors_are_one_line_exit_2(loadables, tmp_path, monkeypatch, capsys, argv, message) -> None:
    monkeypatch.chdir(tmp_path)
    save(tmp_path / "a.png", rgb())
    save(tmp_path / "a.bmp", rgb())
    save(tmp_path / "big.png", rgb(8, 9))
    save(tmp_path / "g.pgm", gray())
    save(tmp_path / "cut.jpg", rgb(64, 64))
    Path("cut.jpg").write_bytes(Path("cut.jpg").read_bytes()[:300])
    before = sorted(p.name for p in tmp_path.iterdir())
    capsys.readouterr()
    rc = dla(["run", str(loadables[3]), "--rawdump", "dump", "--output", "y.npz", *argv])
    err = capsys.readouterr().err
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dla: ") and message in lines[0] and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
