"""Plots of ``make bench`` results (``regressions.bench``): ``plot(results, path)`` draws one run,
``plot_history(runs, path)`` the trend over the runs of ``build/bench/history.jsonl``.

Figures are drawn on a bare ``matplotlib.figure.Figure`` with the Agg canvas: no pyplot, no global
backend switch, so the regression report can import and call ``plot()`` from any process or thread.
Any key may be missing (a section skipped or failed); its panel then says "not measured".
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from dlaio import write_atomic

#: Engine bars: (label, rate key, ratio key, unit).
ENGINES = (
    ("conv", "golden_conv_mac_per_s", "golden_conv_gemm_ratio", "MAC/s"),
    ("sdp", "golden_sdp_elements_per_s", "golden_sdp_gemm_ratio", "elem/s"),
    ("pdp", "golden_pdp_elements_per_s", "golden_pdp_gemm_ratio", "elem/s"),
    ("cdp", "golden_cdp_elements_per_s", "golden_cdp_gemm_ratio", "elem/s"),
)
SIMULATORS = ("verilator", "icarus")
SIM_COLORS = {"golden": "#4c72b0", "verilator": "#dd8452", "icarus": "#55a868"}
CONFIG_COLORS = {"nv_small": "#4c72b0", "nv_large": "#dd8452", "nv_full": "#55a868"}
TARGET_STYLE = {"color": "#c44e52", "linestyle": "--", "linewidth": 1.2}
#: Trend panels of ``plot_history``: (key, title, log scale).
HISTORY = (
    ("golden_conv_gemm_ratio", "golden conv / GEMM", False),
    ("nv_small_suite_seconds", "nv_small suite on golden [s]", False),
    ("verilator_cycles_per_s", "Verilator cycles/s", True),
    ("icarus_cycles_per_s", "Icarus cycles/s", True),
    ("compile_resnet50_seconds", "compile ResNet-50, nv_small [s]", False),
    ("regress_parallel_speedup", "regress speedup, 2 workers", False),
)


def _num(results: dict, key: str) -> float | None:
    v = results.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _si(x: float) -> str:
    for div, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{prefix}"
    return f"{x:.3g}"


def _target(results: dict, key: str) -> tuple[str, float] | None:
    t = (results.get("targets") or {}).get(key)
    return (t["op"], float(t["value"])) if isinstance(t, dict) and "value" in t else None


def _empty(ax, title: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def _bar_labels(ax, bars, labels: Sequence[str]) -> None:
    for bar, text in zip(bars, labels):
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), xytext=(0, 2),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8)


def _panel_engines(ax, r: dict) -> None:
    title = "golden engines / float64 GEMM rate"
    rows = [(name, _num(r, rate), _num(r, ratio), unit) for name, rate, ratio, unit in ENGINES]
    rows = [row for row in rows if row[2] is not None]
    if not rows:
        return _empty(ax, title)
    bars = ax.bar([n for n, *_ in rows], [ratio for _, _, ratio, _ in rows], color="#4c72b0")
    ax.set_yscale("log")
    _bar_labels(ax, bars, [f"{_si(rate)} {unit}" if rate else "" for _, rate, _, unit in rows])
    target = _target(r, "golden_conv_gemm_ratio")
    names = [n for n, *_ in rows]
    if target and "conv" in names:
        i = names.index("conv")
        ax.hlines(target[1], i - 0.45, i + 0.45, **TARGET_STYLE, label=f"conv target {target[0]} {target[1]:g}")
        ax.legend(fontsize=8, loc="upper right")
    gemm = _num(r, "gemm_mac_per_s")
    ax.set_title(title + (f" ({_si(gemm)} MAC/s)" if gemm else ""), fontsize=10)
    ax.set_ylabel("rate / GEMM MAC rate (log)")
    ax.margins(y=0.25)


def _panel_suites(ax, r: dict) -> None:
    title = "nv_small trace suite, wall time"
    rows = [("golden", _num(r, "nv_small_suite_seconds"))]
    rows += [(sim, _num(r, f"nv_small_{sim}_suite_seconds")) for sim in SIMULATORS]
    rows = [(n, v) for n, v in rows if v is not None]
    if not rows:
        return _empty(ax, title)
    bars = ax.bar([n for n, _ in rows], [v for _, v in rows], color=[SIM_COLORS[n] for n, _ in rows])
    _bar_labels(ax, bars, [f"{v:.1f} s" for _, v in rows])
    target = _target(r, "nv_small_suite_seconds")
    if target and rows[0][0] == "golden":
        ax.hlines(target[1], -0.45, 0.45, **TARGET_STYLE, label=f"golden target {target[0]} {target[1]:g} s")
        ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title + (" (quick: 2 traces on RTL)" if r.get("quick") else ""), fontsize=10)
    ax.set_ylabel("seconds")
    ax.margins(y=0.2)


def _panel_simulators(ax, r: dict) -> None:
    title = "simulated cycles per second, our RTL"
    rows = [(sim, _num(r, f"{sim}_cycles_per_s")) for sim in SIMULATORS]
    rows = [(n, v) for n, v in rows if v is not None]
    if not rows:
        return _empty(ax, title)
    bars = ax.bar([n for n, _ in rows], [v for _, v in rows], color=[SIM_COLORS[n] for n, _ in rows])
    _bar_labels(ax, bars, [_si(v) for _, v in rows])
    ratio = _num(r, "verilator_icarus_speed_ratio")
    ax.set_title(title + (f": Verilator {ratio:.2f}x Icarus" if ratio else ""), fontsize=10)
    ax.set_ylabel("cycles / s")
    ax.margins(y=0.2)


def _panel_compile(ax, r: dict) -> None:
    title = "compile time (frontend + passes + codegen)"
    table: dict[str, dict[str, float]] = {m: dict(c) for m, c in (r.get("compile_zoo_seconds") or {}).items()}
    if r.get("compile_resnet50_seconds_by_config"):
        table["resnet50"] = dict(r["compile_resnet50_seconds_by_config"])
    if not table:
        return _empty(ax, title)
    models = list(table)
    configs = [c for c in CONFIG_COLORS if any(c in t for t in table.values())]
    configs += sorted({c for t in table.values() for c in t} - set(configs))
    width = 0.8 / max(len(configs), 1)
    for j, cfg in enumerate(configs):
        xs = [i + (j - (len(configs) - 1) / 2) * width for i, m in enumerate(models) if cfg in table[m]]
        ys = [table[m][cfg] for m in models if cfg in table[m]]
        ax.bar(xs, ys, width, label=cfg, color=CONFIG_COLORS.get(cfg))
    ax.set_xticks(range(len(models)), models)
    ax.set_yscale("log")
    target = _target(r, "compile_resnet50_seconds")
    if target and "resnet50" in table:
        i = models.index("resnet50")
        ax.hlines(target[1], i - 0.45, i + 0.45, **TARGET_STYLE, label=f"target {target[0]} {target[1]:g} s")
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel("seconds (log)")


def _panel_regress(ax, r: dict) -> None:
    title = "regression wall time"
    rows = [(f"{n} worker{'s' if n > 1 else ''}", _num(r, f"regress_seconds_{n}")) for n in (1, 2)]
    rows = [(n, v) for n, v in rows if v is not None]
    if not rows:
        return _empty(ax, title)
    bars = ax.bar([n for n, _ in rows], [v for _, v in rows], color=["#8172b3", "#937860"][: len(rows)])
    _bar_labels(ax, bars, [f"{v:.0f} s" if v >= 10 else f"{v:.1f} s" for _, v in rows])
    speedup = _num(r, "regress_parallel_speedup")
    target = _target(r, "regress_parallel_speedup")
    if speedup:
        title += f": speedup {speedup:.2f}x"
        if target:
            title += f" (target {target[0]} {target[1]:g})"
    level = r.get("regress_level")
    ax.set_title(title + (f", --level {level}" if level else ""), fontsize=10)
    ax.set_ylabel("seconds")
    ax.margins(y=0.2)


def _panel_machine(ax, r: dict) -> None:
    ax.axis("off")
    m = r.get("machine") or {}
    blas = m.get("blas") or {}
    lines = [
        f"date      {m.get('date', '?')}",
        f"commit    {(m.get('commit') or '?')[:12]}",
        f"cpu       {m.get('cpu', '?')}",
        f"cores     {m.get('cpus', '?')} (usable {m.get('cpus_usable', '?')}), load {m.get('load_average', '?')}",
        f"python    {m.get('python', '?')}, numpy {m.get('numpy', '?')}",
        f"BLAS      {blas.get('name', '?')} {blas.get('version', '')}, {blas.get('threads', '?')} threads",
        f"mode      {'quick' if r.get('quick') else 'full'}; warm-up {'yes' if r.get('regress_warmup') else '-'}",
    ]
    for name, secs in (r.get("section_seconds") or {}).items():
        lines.append(f"{name:<9} {secs:.1f} s")
    for name, err in (r.get("errors") or {}).items():
        lines.append(f"FAILED {name}: {err[:60]}")
    ax.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", family="monospace", fontsize=8, transform=ax.transAxes)
    ax.set_title("machine and run", fontsize=10)


def _save(fig, path: Path) -> None:
    """Through the one output writer (dlaio): readers never see a partial PNG, a device is never replaced."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=100))


def plot(results: dict, path: Path) -> Path:
    """One run's results as a 2x3 panel PNG at ``path``; returns ``path``."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 8.5), layout="constrained")
    axes = fig.subplots(2, 3)
    _panel_engines(axes[0][0], results)
    _panel_suites(axes[0][1], results)
    _panel_simulators(axes[0][2], results)
    _panel_compile(axes[1][0], results)
    _panel_regress(axes[1][1], results)
    _panel_machine(axes[1][2], results)
    date = (results.get("machine") or {}).get("date", "")
    fig.suptitle(f"make bench{' --quick' if results.get('quick') else ''}  {date}", fontsize=12)
    _save(fig, Path(path))
    return Path(path)


def plot_history(runs: Sequence[dict], path: Path) -> Path:
    """The trend of the headline figures over ``runs`` (oldest first), one panel each, with targets."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 7), layout="constrained")
    axes = fig.subplots(2, 3)
    for ax, (key, title, log) in zip((a for row in axes for a in row), HISTORY):
        points = [(i, _num(run, key)) for i, run in enumerate(runs)]
        points = [(i, v) for i, v in points if v is not None]
        if not points:
            _empty(ax, title)
            continue
        ax.plot([i for i, _ in points], [v for _, v in points], marker="o", color="#4c72b0")
        target = next((_target(run, key) for run in reversed(runs) if _target(run, key)), None)
        if target:
            ax.axhline(target[1], **TARGET_STYLE, label=f"target {target[0]} {target[1]:g}")
            ax.legend(fontsize=8)
        if log:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("run")
        dates = [str((runs[i].get("machine") or {}).get("date", ""))[5:16].replace("T", " ") for i, _ in points]
        if len(points) <= 12:
            ax.set_xticks([i for i, _ in points], dates, rotation=30, fontsize=7)
    fig.suptitle(f"make bench history ({len(runs)} runs)", fontsize=12)
    _save(fig, Path(path))
    return Path(path)
