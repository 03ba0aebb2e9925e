"""Every file of ``dsctl topology plan --out-dir``, rendered on use and a piece at a time (issue 32).

``PlanFiles`` is a mapping from file name to text; ``files.pieces(name)`` yields the text in pieces (bytes), which
is how :func:`dsctl.output.files.write_files` streams it into the staged folder, so that no more than one piece of
the big files (cabling.csv, plan.json, the expected-plane dumps: 670 MB for ft3 at 524,288 endpoints) is held.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping

from dsctl.errors import InputError
from dsctl.topology.expected_dumps import Names, expected_ibnetdiscover_pieces, topology_file_pieces
from dsctl.topology.export import (
    cabling_pieces,
    expected_topology_header,
    ibnl_files,
    plan_json_pieces,
    slurm_topology,
    slurm_topology_yaml,
    switches_csv,
)
from dsctl.topology.graphics import topology_dot, topology_svg
from dsctl.topology.plan import Plan
from dsctl.topology.slurm_tree import SwitchEntry, switch_tree
from dsctl.topology.summary import PlanSummary

#: the link every port should train at, by port rate (Gb/s), where the switch profile names none
LINK_BY_GBPS = {800.0: "4xXDR", 400.0: "4xNDR", 200.0: "4xHDR", 100.0: "4xEDR"}


class PlanFiles(Mapping[str, str]):
    """The plan's files by name (see ``dsctl.topology.api.PLAN_FILES``): one ``expected-plane<P>.ibnet`` and one
    ``expected-plane<P>.topo`` per plane and the IBNL files the latter name. The ibdiagnet files are left out
    where a device name cannot be an ibdm system name ('/'): the plan stays valid for every other tool."""

    def __init__(self, plan: Plan, summary: PlanSummary) -> None:
        self.plan, self.summary = plan, summary
        self.link = plan.spec.link or LINK_BY_GBPS.get(float(plan.spec.port_gbps), "4xNDR")
        self._tree: list[SwitchEntry] | None = None
        self._names: Names | None = None
        planes = range(plan.spec.num_planes)
        render: dict[str, Callable[[], Iterator[bytes | str]]] = {
            "cabling.csv": lambda: cabling_pieces(plan),
            "switches.csv": lambda: iter([switches_csv(plan)]),
            "plan.json": lambda: plan_json_pieces(plan, dataclasses.asdict(summary)),
            "topology.dot": lambda: iter([topology_dot(plan, summary)]),
            "topology.conf": lambda: iter([slurm_topology(plan, summary, self.tree())]),
            "topology.yaml": lambda: iter([slurm_topology_yaml(plan, self.tree())]),
            "topology.svg": lambda: iter([topology_svg(plan, summary)]),
        }
        for p in planes:
            render[f"expected-plane{p}.ibnet"] = lambda p=p: expected_ibnetdiscover_pieces(  # type: ignore[misc]
                plan, p, self.link, self.names())
        try:
            ibnl = ibnl_files(plan)
        except InputError:
            ibnl = {}
        if ibnl:
            for p in planes:
                render[f"expected-plane{p}.topo"] = lambda p=p: self._topology_file(p)  # type: ignore[misc]
            for name, text in ibnl.items():
                render[name] = lambda text=text: iter([text])  # type: ignore[misc]
        self._render = render

    def tree(self) -> list[SwitchEntry]:
        """Plane 0's switch tree (topology.conf and topology.yaml share it)."""
        if self._tree is None:
            self._tree = switch_tree(self.plan)
        return self._tree

    def names(self) -> Names:
        if self._names is None:
            self._names = Names(self.plan)
        return self._names

    def _topology_file(self, plane: int) -> Iterator[bytes]:
        host, header, _ = expected_topology_header(self.plan, plane, self.link)
        return topology_file_pieces(self.plan, plane, self.link, host, header, self.names())

    def __getitem__(self, name: str) -> str:
        return b"".join(p.encode() if isinstance(p, str) else p for p in self.pieces(name)).decode()

    def __iter__(self) -> Iterator[str]:
        return iter(self._render)

    def __len__(self) -> int:
        return len(self._render)

    def pieces(self, name: str) -> Iterator[bytes | str]:
        """The text of ``name`` in pieces (KeyError for a name it does not hold)."""
        return self._render[name]()

