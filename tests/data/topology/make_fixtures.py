"""Regenerate the ibnetdiscover / links-CSV fixtures: ``python tests/data/topology/make_fixtures.py``.

The fabric is the plan of ``dsctl topology plan --nodes 10 --radix 8`` (mpft, 8 planes of 3 leaves and
2 spines: 160 cables). Each variant seeds named miswirings into that cable list, then renders it in
ibnetdiscover's format. ``tests/unit/test_topology_verify.py`` checks every seeded fault is found.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from dsctl.profiles.loader import ProfileStore  # noqa: E402
from dsctl.topology.api import make_spec  # noqa: E402
from dsctl.topology.export import cabling_csv  # noqa: E402
from dsctl.topology.observed import render_ibnetdiscover  # noqa: E402
from dsctl.topology.plan import build_plan  # noqa: E402

Link = tuple[str, str, str, str]


def small_plan():  # type: ignore[no-untyped-def]
    store = ProfileStore()
    return build_plan(make_spec("mpft", 10, store.node("h800-hgx"), store.switch("ib-ndr-64"), radix=8))


def planned_links(plan) -> list[Link]:  # type: ignore[no-untyped-def]
    rows = cabling_csv(plan).splitlines()[1:]
    return [tuple(r.split(",")[3:7]) for r in rows]  # type: ignore[misc]


def _replace(links: list[Link], old: Link, new: Link) -> None:
    links[links.index(old)] = new


def swapped(links: list[Link]) -> None:
    """Cables at p2-leaf01 ports 1 and 2 exchanged."""
    _replace(links, ("node0001", "mlx5_2", "p2-leaf01", "1"), ("node0001", "mlx5_2", "p2-leaf01", "2"))
    _replace(links, ("node0002", "mlx5_2", "p2-leaf01", "2"), ("node0002", "mlx5_2", "p2-leaf01", "1"))


def missing(links: list[Link]) -> None:
    """A NIC cable and a leaf-spine cable not plugged in."""
    links.remove(("node0005", "mlx5_1", "p1-leaf02", "1"))
    leaf_spine = next(link for link in links if link[0] == "p6-leaf03" and link[1] == "5")
    links.remove(leaf_spine)


def cross_plane(links: list[Link]) -> None:
    """node0007's mlx5_3 and mlx5_4 cables exchanged at the node: each lands in the other plane."""
    a = next(link for link in links if link[:2] == ("node0007", "mlx5_3"))
    b = next(link for link in links if link[:2] == ("node0007", "mlx5_4"))
    _replace(links, a, ("node0007", "mlx5_3", b[2], b[3]))
    _replace(links, b, ("node0007", "mlx5_4", a[2], a[3]))


def extra(links: list[Link]) -> None:
    """A cable between two unused ports."""
    links.append(("p0-leaf03", "3", "p0-spine02", "8"))


def unmatched(links: list[Link]) -> None:
    """A host the plan does not know, plugged into an unused leaf port."""
    links.append(("node0099", "mlx5_0", "p5-leaf03", "4"))


VARIANTS = {"swapped": [swapped], "missing": [missing], "cross_plane": [cross_plane], "extra": [extra],
            "unmatched": [unmatched], "miswired": [swapped, missing, cross_plane, extra, unmatched]}


def main() -> None:
    plan = small_plan()
    radix = {name: plan.spec.radix for name, tier in zip(plan.device_names, plan.device_tier, strict=True) if tier > 0}
    base = planned_links(plan)
    (HERE / "perfect.ibnet").write_text(render_ibnetdiscover(base, radix))
    for name, mutations in VARIANTS.items():
        links = list(base)
        for mutate in mutations:
            mutate(links)
        (HERE / f"{name}.ibnet").write_text(render_ibnetdiscover(links, radix))
        if name == "miswired":
            csv = "a_device,a_port,b_device,b_port\n" + "".join(",".join(link) + "\n" for link in links)
            (HERE / "miswired.csv").write_text(csv)
    (HERE / "perfect.csv").write_text("# links as cabled\na_device,a_port,b_device,b_port\n"
                                      + "".join(",".join(link) + "\n" for link in base))
    lines = (HERE / "perfect.ibnet").read_text().splitlines()
    lines[40] = "[3]\tthis is not a port line"
    (HERE / "malformed.ibnet").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
