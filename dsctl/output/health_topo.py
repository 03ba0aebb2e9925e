"""Table view of ``dsctl health topo``: the nvidia-smi style matrix, its legend and the plane table."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.health.topo import TopoMatrix
from dsctl.output.registry import table_renderer

COLUMNS_PER_BLOCK = 10
LEGEND = ("X = self; NV# = joined by # NVLinks; PIX = at most one PCIe bridge; PXB = several PCIe bridges; "
          "PHB = through a PCIe host bridge (CPU); NODE = across host bridges of one NUMA node; SYS = across NUMA "
          "nodes (the SMP link)")


@table_renderer(TopoMatrix)
def _topo(topo: TopoMatrix) -> Iterable[RenderableType]:
    # plain grids like nvidia-smi topo -m, cut into blocks of at most COLUMNS_PER_BLOCK device columns so that an
    # HGX node (8 GPUs, 8-9 NICs) stays inside 80 columns; the JSON view carries the whole matrix
    yield Text(f"{topo.hostname}: GPU/NIC topology", style="bold")
    labels = [d.label for d in topo.devices]
    width = max([len("NUMA"), *(len(x) for x in labels), *(len(c) for row in topo.cells for c in row)]) + 1
    for start in range(0, len(labels), COLUMNS_PER_BLOCK):
        cols = range(start, min(start + COLUMNS_PER_BLOCK, len(labels)))
        last = cols.stop == len(labels)
        lines = [["", *(labels[j] for j in cols), *(["NUMA"] if last else [])]]
        for i, device in enumerate(topo.devices):
            numa = [str(device.numa_node) if device.numa_node >= 0 else "n/a"] if last else []
            lines.append([device.label, *(topo.cells[i][j] for j in cols), *numa])
        yield Text("\n".join("".join(cell.ljust(width) for cell in line).rstrip() for line in lines))
    nics = [f"{d.label}: {d.name}" for d in topo.devices if d.label.startswith("NIC")]
    if nics:
        yield Text("NIC legend: " + ", ".join(nics))
    yield Text(LEGEND, style="dim")
    if topo.planes:
        planes = Table(title=f"compute NICs ({topo.compute_link_layer}) and the plane each serves",
                       title_justify="left")
        for column in ("nic", "gpu", "level", "numa", "plane"):
            planes.add_column(column, no_wrap=True)
        for p in topo.planes:
            planes.add_row(Text(p.nic), Text("-" if p.gpu is None else f"GPU{p.gpu}"), Text(p.level),
                           Text(str(p.numa_node)), Text("-" if p.plane is None else str(p.plane)))
        yield planes
    else:
        yield Text(f"no compute NIC ({topo.compute_link_layer}): no planes")
