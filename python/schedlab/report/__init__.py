"""`schedlab report DIR`: PNG and SVG figures in DIR/report/ and one self-contained HTML file
(inline SVG and CSS, no script, no external file) that opens offline."""

from __future__ import annotations

import html as _html
import io
import math
import re
import time
from pathlib import Path
from typing import Any

import pandas as pd

from schedlab.report.plots import PLOTTERS, Context, Plot, plt
from schedlab.sweep import load_results

__all__ = ["make_report"]


def _config(manifest: dict[str, Any]) -> Any:
    from schedlab.experiment import ReportFields

    return ReportFields.model_validate(manifest.get("experiment", {}).get("report", {}))


def make_report(directory: str | Path, html: str | Path | None = None) -> Path:
    """Draws every plot the experiment asks for; returns the HTML file's path."""
    res = load_results(directory)
    cfg = _config(res.manifest)
    keys = res.sweep_keys
    x = cfg.x if cfg.x in keys else (keys[0] if keys else None)
    npoints = max(len(res.manifest.get("points") or [{}]), 1)
    point = cfg.point if cfg.point is not None and 0 <= cfg.point < npoints else npoints - 1
    ctx = Context(res=res, cfg=cfg, x=x, point=point)
    fig_dir = Path(directory) / "report"
    fig_dir.mkdir(exist_ok=True)
    plots: list[Plot] = []
    for name in cfg.plots:
        try:
            plot = PLOTTERS[name](ctx)
        except Exception as e:  # a plot that fails is a note, never a failed report
            plot = Plot(name, name, "", note=f"{name}: not drawn ({type(e).__name__}: {e})")
        if plot.figure is not None:
            plot.figure.savefig(fig_dir / f"{name}.png")
            buf = io.StringIO()
            plot.figure.savefig(buf, format="svg")
            plot.figure.savefig(fig_dir / f"{name}.svg")
            plt.close(plot.figure)
            plot.svg = _inline_svg(buf.getvalue())  # type: ignore[attr-defined]
        plots.append(plot)
    out = Path(html) if html else Path(directory) / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = _html_page(res, cfg, ctx, plots)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return out


def _inline_svg(svg: str) -> str:
    """An SVG document as an element: no XML prolog, scales with the page."""
    svg = re.sub(r"^.*?(<svg\b)", r"\1", svg, count=1, flags=re.S)
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, count=1, flags=re.S)
    return re.sub(r"<svg\b", '<svg class="plot" role="img" preserveAspectRatio="xMidYMid meet"',
                  svg, count=1)


CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
       max-width: 1100px; padding: 1.5em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
figure { margin: 1.5em 0; } figcaption { color: #555; font-size: 13px; max-width: 900px; }
svg.plot { max-width: 100%; height: auto; display: block; }
.notes li { color: #8a5300; } .meta td { text-align: left; }
.off { color: #b00; } .ok { color: #070; }
"""


def _num(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _e(v: Any) -> str:
    return _html.escape(str(v))


def _response_table(res: Any) -> str:
    st = res.metric("response_mean")
    if st.empty:
        return "<p>No response times in the results.</p>"
    keys = res.sweep_keys
    multi_world = st["world"].nunique() > 1
    head = (["world"] if multi_world else []) + keys + ["policy", "mean", "± (CI half-width)",
                                                        "n", "method", "theory", "vs theory"]
    rows = []
    for _, r in st.iterrows():
        theory = r["theory"]
        diff = ""
        if pd.notna(theory) and theory:
            rel = (r["mean"] - theory) / theory
            inside = pd.notna(r["half_width"]) and abs(r["mean"] - theory) <= r["half_width"]
            diff = (f'<span class="{"ok" if inside else "off"}">{100 * rel:+.1f}%'
                    f'{" (theory inside CI)" if inside else ""}</span>')
        left = ([r["world"]] if multi_world else []) + [_num(r[k]) for k in keys] + [r["label"]]
        right = [_num(r["mean"]), _num(r["half_width"], 3), str(r["n"]), _e(r["method"]),
                 _num(theory), diff]
        rows.append("<tr>" + "".join(f'<td class="l">{_e(c)}</td>' for c in left)
                    + "".join(f"<td>{c}</td>" for c in right) + "</tr>")
    return ("<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"
            + "".join(rows) + "</table>")


def _html_page(res: Any, cfg: Any, ctx: Context, plots: list[Plot]) -> str:
    m = res.manifest
    exp = m.get("experiment", {}).get("experiment", {})
    title = cfg.title or m.get("name", "schedlab report")
    unique = len({r["id"] for r in m.get("runs", [])})
    meta = [
        ("world", ", ".join(ctx.worlds)),
        ("policies", ", ".join(res.labels)),
        ("sweep", ", ".join(f"{k} ({len(set(map(str, res.summaries[k])))} values)"
                            for k in res.sweep_keys) or "none"),
        ("points × policies × replications", f"{len(m.get('points') or [{}])} × "
         f"{len(res.labels)} × {m.get('replications')} = {len(m.get('runs', []))} "
         f"({unique} distinct runs)"),
        ("seed", exp.get("seed", 1)),
        ("quick", "yes: scaled down with --quick" if m.get("quick") else "no"),
        ("source", m.get("source") or "(a dict)"),
        ("schedlab", m.get("environment", {}).get("schedlab", "?")),
        ("machine", m.get("environment", {}).get("platform", "?")),
        ("written", time.strftime("%Y-%m-%d %H:%M", time.localtime(m.get("updated", 0)))),
    ]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title>", f"<style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
    ]
    if exp.get("description"):
        parts.append(f"<p>{_e(exp['description'])}</p>")
    parts.append('<table class="meta">' + "".join(
        f'<tr><th class="l">{_e(k)}</th><td>{_e(v)}</td></tr>' for k, v in meta) + "</table>")
    parts += ["<h2>Mean response time</h2>", _response_table(res)]
    notes = [p.note for p in plots if p.note]
    for p in plots:
        if p.figure is None and not hasattr(p, "svg"):
            continue
        parts.append(f'<h2 id="{_e(p.name)}">{_e(p.title)}</h2>')
        parts.append(f'<figure class="figure" data-plot="{_e(p.name)}">{p.svg}'  # type: ignore
                     f"<figcaption>{_e(p.caption)}</figcaption></figure>")
    if notes:
        parts.append("<h2>Not drawn</h2><ul class=\"notes\">"
                     + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    parts.append("<p><small>Figures also in report/ beside this file (PNG and SVG); data in "
                  "summaries.parquet and stats.parquet (<code>schedlab.load_results</code>)."
                  "</small></p></body></html>")
    return "\n".join(parts)
