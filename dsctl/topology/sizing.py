"""Closed-form sizes of the five topologies the paper compares (ISCA '25 Table 3), as functions of the radix.

Every formula takes ``radix`` k = ports per switch (even, >= ``MIN_RADIX``) and returns whole counts.
"Links" counts switch-to-switch links only (the paper's convention: endpoint-to-leaf cables are excluded).
Costs follow the fitted model ``cost_usd = switch_usd * switches + link_usd * links`` (see docs/topology.md).

- FT2  two-layer non-blocking leaf/spine: k leaves (k/2 down, k/2 up), k/2 spines.
       endpoints k²/2, switches 3k/2, links k²/2.
- MPFT P independent FT2 planes (P = 8 in the paper): P times every FT2 count.
- FT3  k-ary three-layer fat tree: endpoints k³/4, switches 5k²/4, links k³/2.
- SF   Slim Fly (MMS graph): the largest q = 4w + δ (δ in {-1, 0, 1}) whose network radix
       k' = (3q - δ)/2 plus p = ceil(k'/2) endpoint ports fits in k; switches 2q², endpoints 2q²·p,
       links q²·k'. "Formula-sized": a real MMS graph also needs q to be a prime power (q = 28 is not).
- DF   balanced canonical Dragonfly: p = h = floor((k + 1)/4) endpoints and global ports per switch,
       a = 2p switches per group (radix used p + a - 1 + h = 4p - 1); g = a·h - 1 groups (this reproduces
       the paper's 511; the full-size maximum is a·h + 1); switches a·g, endpoints p·a·g,
       links g·(a(a-1)/2 + a·h/2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dsctl.errors import InputError

#: smallest radix all five topologies can be sized for (Slim Fly needs q >= 3: 5 network + 3 endpoint ports)
MIN_RADIX = 8
#: largest radix accepted (well beyond any switch ASIC; keeps the numbers meaningful)
MAX_RADIX = 1024
TOPOLOGY_NAMES = ("FT2", "MPFT", "FT3", "SF", "DF")


def check_radix(radix: int) -> int:
    """Return ``radix`` if a fat tree can be built from it (even, MIN_RADIX..MAX_RADIX); else raise InputError
    naming the field ``radix``."""
    if isinstance(radix, bool) or not isinstance(radix, int):
        raise InputError(f"must be a whole number of switch ports, got {radix!r}", field="radix")
    if radix < MIN_RADIX:
        raise InputError(
            f"{radix} is too small: every topology here needs at least {MIN_RADIX} ports per switch",
            hint="Slim Fly's smallest MMS graph (q = 3) uses 5 network + 3 endpoint ports", field="radix",
        )
    if radix > MAX_RADIX:
        raise InputError(f"{radix} is larger than {MAX_RADIX}; no switch has that many ports", field="radix")
    if radix % 2:
        raise InputError(
            f"{radix} is odd: a fat tree splits every switch's ports half down, half up, so the radix "
            f"must be even (e.g. {radix - 1} or {radix + 1})", field="radix",
        )
    return radix


@dataclass(frozen=True)
class TopologySize:
    """One column of Table 3: counts for topology ``name`` at one radix, and its cost under the linear model.

    ``links`` are switch-to-switch links; ``cost_usd`` = switch_usd·switches + link_usd·links.
    ``params`` holds the design parameters (q, p, a, h, g, planes ...) and is not part of ``to_data``.
    """

    name: str
    endpoints: int
    switches: int
    links: int
    cost_usd: float
    cost_per_endpoint_usd: float
    params: tuple[tuple[str, int], ...] = ()

    def to_data(self) -> dict[str, object]:
        return {
            "name": self.name,
            "endpoints": self.endpoints,
            "switches": self.switches,
            "links": self.links,
            "cost_usd": self.cost_usd,
            "cost_per_endpoint_usd": self.cost_per_endpoint_usd,
        }


class Comparison(list[TopologySize]):
    """The result of ``compare``: a plain list of ``TopologySize`` (printed as a bare JSON list).

    A list subclass only so the table view can have its own renderer; ``radix`` and the unit costs used
    are attributes for that view.
    """

    radix: int = 0
    switch_usd: float = 0.0
    link_usd: float = 0.0

    def to_data(self) -> list[dict[str, object]]:
        return [row.to_data() for row in self]


def ft2_counts(radix: int) -> tuple[int, int, int]:
    """(endpoints, switches, links) of a non-blocking two-layer fat tree of ``radix``-port switches."""
    k = radix
    return k * k // 2, 3 * k // 2, k * k // 2


def ft3_counts(radix: int) -> tuple[int, int, int]:
    """(endpoints, switches, links) of a k-ary three-layer fat tree."""
    k = radix
    return k**3 // 4, 5 * k * k // 4, k**3 // 2


def slimfly_params(radix: int) -> dict[str, int]:
    """MMS Slim Fly parameters for ``radix``: q, delta, network radix k', endpoints per switch p.

    Largest q = 4w + δ (δ ∈ {-1, 0, 1}, q >= 3) with k' + p <= radix, k' = (3q - δ)/2, p = ceil(k'/2).
    """
    best: dict[str, int] | None = None
    q = 3
    while True:
        delta = {0: 0, 1: 1, 3: -1}.get(q % 4)
        if delta is not None:
            net = (3 * q - delta) // 2
            per = math.ceil(net / 2)
            if net + per > radix:
                break
            best = {"q": q, "delta": delta, "network_radix": net, "endpoints_per_switch": per}
        q += 1
    if best is None:
        raise InputError(f"{radix} is too small for a Slim Fly (needs at least {MIN_RADIX} ports)", field="radix")
    return best


def slimfly_counts(radix: int) -> tuple[int, int, int, dict[str, int]]:
    """(endpoints, switches, links, params) of the formula-sized MMS Slim Fly for ``radix``."""
    prm = slimfly_params(radix)
    q = prm["q"]
    switches = 2 * q * q
    return switches * prm["endpoints_per_switch"], switches, q * q * prm["network_radix"], prm


def dragonfly_params(radix: int) -> dict[str, int]:
    """Balanced canonical Dragonfly for ``radix``: p = h = floor((k+1)/4), a = 2p, g = a·h - 1."""
    p = (radix + 1) // 4
    a, h = 2 * p, p
    return {"endpoints_per_switch": p, "switches_per_group": a, "global_ports_per_switch": h, "groups": a * h - 1}


def dragonfly_counts(radix: int) -> tuple[int, int, int, dict[str, int]]:
    """(endpoints, switches, links, params): intra-group all-to-all a(a-1)/2 plus a·h/2 global links per group."""
    prm = dragonfly_params(radix)
    p, a, h, g = (prm["endpoints_per_switch"], prm["switches_per_group"], prm["global_ports_per_switch"],
                  prm["groups"])
    links = g * (a * (a - 1) // 2 + a * h // 2)
    return p * a * g, a * g, links, prm


def _row(name: str, counts: tuple[int, int, int], switch_usd: float, link_usd: float,
         params: dict[str, int]) -> TopologySize:
    endpoints, switches, links = counts
    cost = switch_usd * switches + link_usd * links
    return TopologySize(name, endpoints, switches, links, cost, cost / endpoints, tuple(params.items()))


def compare_topologies(radix: int, switch_usd: float, link_usd: float, num_planes: int = 8) -> Comparison:
    """Table 3 for ``radix``-port switches: FT2, MPFT (``num_planes`` FT2 planes), FT3, SF and DF.

    ``switch_usd`` is the price of one switch, ``link_usd`` of one switch-to-switch link (optics included).
    """
    check_radix(radix)
    if switch_usd < 0 or link_usd < 0 or not (math.isfinite(switch_usd) and math.isfinite(link_usd)):
        raise InputError("and {link_cost} must be finite and >= 0 (US dollars)", field="switch_cost",
                         mentions=("link_cost",))
    if num_planes < 1 or num_planes > 64:
        raise InputError(f"{num_planes} is out of range; use 1..64 (the paper uses 8)", field="planes")
    ft2 = ft2_counts(radix)
    mpft = (ft2[0] * num_planes, ft2[1] * num_planes, ft2[2] * num_planes)
    sf_e, sf_s, sf_l, sf_p = slimfly_counts(radix)
    df_e, df_s, df_l, df_p = dragonfly_counts(radix)
    result = Comparison([
        _row("FT2", ft2, switch_usd, link_usd, {"leaves": radix, "spines": radix // 2}),
        _row("MPFT", mpft, switch_usd, link_usd, {"planes": num_planes}),
        _row("FT3", ft3_counts(radix), switch_usd, link_usd, {"pods": radix}),
        _row("SF", (sf_e, sf_s, sf_l), switch_usd, link_usd, sf_p),
        _row("DF", (df_e, df_s, df_l), switch_usd, link_usd, df_p),
    ])
    result.radix = radix
    result.switch_usd = switch_usd
    result.link_usd = link_usd
    return result
