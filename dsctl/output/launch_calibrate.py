"""Table view of ``dsctl launch calibrate``: fitted rates, the cells of the fit, the pair before and after."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.output.registry import table_renderer
from dsctl.steptime.calibrate import Calibration


@table_renderer(Calibration)
def _calibration(result: Calibration) -> Iterable[RenderableType]:
    name = result.source.replace("\\", "/").rsplit("/", 1)[-1]
    rates = Table(title=f"Rates fitted to {name} ({result.model}, {result.node}, EP{result.ep})",
                  title_justify="left")
    for name, justify in (("rate", "left"), ("x time", "right"), ("before", "right"), ("after", "right"),
                          ("share", "right"), ("note", "left")):
        rates.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in result.rates:
        rates.add_row(r.name, f"{r.factor:.3f}", f"{r.before:.3f}", f"{r.after:.3f}", f"{r.share:.1%}",
                      r.note if not r.fitted else "")
    yield rates
    cells = Table(title="Kernel ms per cell (compute: share of the busy time)", title_justify="left")
    for name in ("phase", "class", "traced", "before", "after"):
        cells.add_column(name, justify="left" if name in ("phase", "class") else "right")
    for c in result.cells:
        cells.add_row(c.phase, c.op_class, f"{c.measured_s * 1e3:.3f}", f"{c.before_s * 1e3:.3f}",
                      f"{c.after_s * 1e3:.3f}")
    yield cells
    yield Text(f"fit residual: {result.residual_fraction:.1%} of the fitted kernel time "
               f"(rms {result.residual_rms_s * 1e3:.3f} ms per cell)")
    yield Text(f"F&B pair ({result.num_layers} MoE layers per chunk): traced wall {result.wall_s * 1e3:.1f} ms; "
               f"predicted {result.pair_before_s * 1e3:.1f} ms ({result.pair_before_error:+.1%}) from the profile, "
               f"{result.pair_after_s * 1e3:.1f} ms ({result.pair_after_error:+.1%}) calibrated")
    for note in result.notes:
        yield Text(f"note: {note}")
    if result.written:
        yield Text(f"wrote {result.written}")
