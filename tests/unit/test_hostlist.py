"""dsctl's hostlist grammar (dsctl/cluster/hostlist.py): Slurm's cases, refusals, bounds checked before any
name is made, and properties: expand agrees with a port of Slurm's own algorithm, compress round-trips.

SLURM_CASES are what ``scontrol show hostnames`` (Slurm 22.05.8) printed; tests/e2e/test_hostlist_scontrol_e2e.py
asks a real scontrol again, with these and a few hundred generated expressions."""

from __future__ import annotations

import random
import time
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsctl.cluster import hostlist
from dsctl.errors import InputError

SLURM_CASES: list[tuple[str, list[str]]] = [
    ("n[1-3]", ["n1", "n2", "n3"]),
    ("node[0001-0004]", ["node0001", "node0002", "node0003", "node0004"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ("a[1-2]b[3-4]c[5-6]", ["a1b3c5", "a1b3c6", "a2b3c5", "a2b3c6", "a1b4c5", "a1b4c6", "a2b4c5", "a2b4c6"]),
    ("a[1-2]b[3-4]c[5-6]d[7-8]",
     ["a1b3c5d7", "a1b3c5d8", "a2b3c5d7", "a2b3c5d8", "a1b4c5d7", "a1b4c5d8", "a2b4c5d7", "a2b4c5d8",
      "a1b3c6d7", "a1b3c6d8", "a2b3c6d7", "a2b3c6d8", "a1b4c6d7", "a1b4c6d8", "a2b4c6d7", "a2b4c6d8"]),
    ("n[98-100]", ["n98", "n99", "n100"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("n[1-010]", [f"n{i}" for i in range(1, 11)]),
    ("n[00-01]", ["n00", "n01"]),
    ("n[1-2],n1", ["n1", "n2", "n1"]),
    ("n[3,1-2]", ["n3", "n1", "n2"]),
    ("n[1-3,2]", ["n1", "n2", "n3", "n2"]),
    ("n[1-2,5-6]x[1,3]", ["n1x1", "n1x3", "n2x1", "n2x3", "n5x1", "n5x3", "n6x1", "n6x3"]),
    ("n[1-2]-[3-4]", ["n1-3", "n1-4", "n2-3", "n2-4"]),
    ("n[1-2]x[3],[7-8]", ["n1x3", "n2x3", "7", "8"]),
    ("[1-2]", ["1", "2"]),
    ("gpu01,gpu02", ["gpu01", "gpu02"]),
    ("n-1.x_y", ["n-1.x_y"]),
]

#: refused by Slurm as well ("Invalid hostlist"): the same in tests/e2e/test_hostlist_scontrol_e2e.py
SLURM_REFUSES = ["n[1-2]x", "n[1,]", "n[]", "n[1-2]]", "n[[1-2]]", "n[2-1]", "n[-1]", "n[1--2]", "n[1-2]x[3]y"]

REFUSED: list[tuple[str, str]] = [
    ("n[1-2]x", "goes on after its last ']'"),
    ("n[1,]", "an empty entry in brackets"),
    ("n[]", "an empty entry in brackets"),
    ("n[1-2]]", "']' without '['"),
    ("n[[1-2]]", "'[' inside brackets"),
    ("n[2-1]", "runs backwards"),
    ("n[-1]", "is not a number or a range"),
    ("n[1--2]", "is not a number or a range"),
    ("n[1-3", "'[' is never closed"),
    ("a,,b", "an empty name between commas"),
    (",a", "an empty name between commas"),
    ("n1 n2", "' ' cannot stand in a hostlist"),
    ("n[1-2],/x", "'/' cannot stand in a hostlist"),
    ("n[١-٣]", "'١' cannot stand in a hostlist"),
    ("n[1-99999999999999999999]", "past Slurm's largest number"),
    ("", "empty hostlist"),
    ("  ", "empty hostlist"),
]


@pytest.mark.parametrize(("expression", "names"), SLURM_CASES)
def test_expands_as_slurm_does(expression: str, names: list[str]) -> None:
    assert hostlist.expand(expression) == names
    assert hostlist.count(expression) == len(names)
    assert hostlist.expand(hostlist.compress(names)) == names


@pytest.mark.parametrize(("expression", "message"), REFUSED)
def test_refusals_name_the_option_and_the_fault(expression: str, message: str) -> None:
    with pytest.raises(InputError, match=r"^-w[ :]") as caught:
        hostlist.expand(expression, option="-w")
    assert message in caught.value.message and caught.value.hint


def test_every_case_slurm_refuses_is_refused() -> None:
    for expression in SLURM_REFUSES:
        with pytest.raises(InputError):
            hostlist.expand(expression)


def test_node_names_drop_repeats_and_refuse_what_is_no_node_name() -> None:
    assert hostlist.node_names("n[1-3],gpu[08-09],n2") == ["n1", "n2", "n3", "gpu08", "gpu09"]
    for bad in ("-x", "n[1-2],.hidden", "x" * 65):
        with pytest.raises(InputError, match=r"not a node name|characters"):
            hostlist.node_names(bad)


def test_compress_keeps_order_and_is_never_longer() -> None:
    assert hostlist.compress(["node0001", "node0002", "node0003", "node0007"]) == "node[0001-0003,0007]"
    assert hostlist.compress(["a1"]) == "a1"
    assert hostlist.compress(["x", "p0-leaf01", "p0-leaf02"]) == "x,p0-leaf[01-02]"
    assert hostlist.compress(["n9", "n10"]) == "n9,n10"  # two widths: two groups
    assert hostlist.compress(["node3", "node4", "node1"]) == "node[3-4,1]"
    assert hostlist.compress(["n2", "n1"]) == "n2,n1"  # "n[2,1]" is longer
    assert hostlist.compress(["n1", "n2"]) == "n1,n2"  # "n[1-2]" is longer
    assert hostlist.compress(["node1", "node2"]) == "node[1-2]"
    assert hostlist.compress([f"gpu{i:05d}" for i in range(1, 65537)]) == "gpu[00001-65536]"
    assert hostlist.compress([]) == ""
    for bad in ("", "a,b", "n[1]"):
        with pytest.raises(ValueError):
            hostlist.compress([bad])


def _bounded(expression: str) -> InputError:
    """The InputError of ``expression``, after checking it came in well under a second and 10 MB."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(InputError) as caught:
            hostlist.node_names(expression, option="--nodelist")
        elapsed_s = time.perf_counter() - start
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed_s < 1.0 and peak_bytes < 10e6 + 4 * len(expression), (elapsed_s, peak_bytes)
    assert len(caught.value.message) < 300  # the input is shown cut, never whole
    return caught.value


def test_issue_33_a_5000_digit_range_is_an_input_error() -> None:
    """Before: exit 4 (int() of 5,000 digits raised ValueError past Python's 4,300-digit limit)."""
    error = _bounded("node[1-" + "9" * 5000 + "]")
    assert "a number of 5,000 digits in brackets; at most 30" in error.message


def test_issue_33_a_10_gb_expansion_is_refused_from_its_ranges() -> None:
    """Before: ``a*100000[0-99998]`` was expanded (~10 GB) and the error message then failed (exit 1)."""
    error = _bounded("a" * 100000 + "[0-99998]")
    assert "more than 65,536 names" in error.message and "(100,009 characters)" in error.message
    error = _bounded("a" * 60000 + "[0-60000]")  # under the node count: the name length stops it
    assert "a name of 60,005 characters; node names have at most 64" in error.message
    error = _bounded("n[0-255]" * 3 + "n[0-1]")  # 2^25 names counted, not made
    assert "more than 65,536 names" in error.message
    error = _bounded(",".join(["n[1-65536]"] * 2))
    assert "more than 65,536 names" in error.message
    error = _bounded("n" * (hostlist.MAX_HOSTLIST_CHARS + 1))
    assert f"hostlist of {hostlist.MAX_HOSTLIST_CHARS + 1:,} characters" in error.message


def test_the_largest_allowed_expansion_is_fast() -> None:
    start = time.perf_counter()
    names = hostlist.node_names("gpu[00001-65536]")
    assert len(names) == 65536 and names[-1] == "gpu65536"
    assert time.perf_counter() - start < 2.0


# --- properties --------------------------------------------------------------------------------------------------


def slurm_reference(expression: str) -> list[str]:
    """A port of Slurm's own expansion (src/common/hostlist.c, ``_hostlist_create_bracketed`` and
    ``_push_range_list``): split at the last ``[`` of a term, then expand the brackets left in the prefix from
    the right, recursing while a ``[`` remains. Only for well-formed expressions."""
    names: list[str] = []
    for token in _slurm_tokens(expression):
        open_at = token.rfind("[")
        if open_at < 0:
            names.append(token)
            continue
        ranges = _slurm_ranges(token[open_at + 1:token.index("]", open_at)])
        names.extend(_slurm_push(token[:open_at], ranges))
    return names


def _slurm_tokens(expression: str) -> list[str]:
    tokens, depth, start = [], 0, 0
    for pos, char in enumerate(expression):
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            tokens.append(expression[start:pos])
            start = pos + 1
    return [*tokens, expression[start:]]


def _slurm_ranges(body: str) -> list[str]:
    numbers = []
    for part in body.split(","):
        low, _, high = part.partition("-")
        numbers += [f"{n:0{len(low)}d}" for n in range(int(low), int(high or low) + 1)]
    return numbers


def _slurm_push(prefix: str, numbers: list[str]) -> list[str]:
    open_at = prefix.rfind("[")
    if open_at < 0:
        return [prefix + n for n in numbers]
    close_at = prefix.index("]", open_at)
    head, tail = prefix[:open_at], prefix[close_at + 1:]
    out = []
    for value in _slurm_ranges(prefix[open_at + 1:close_at]):
        out += _slurm_push(head + value + tail, numbers)
    return out


def random_hostlist(rng: random.Random) -> str:
    """A well-formed hostlist of 1-4 terms, each with 0-4 bracket groups of padded numbers and ranges (at most
    1,296 names a term); also used by tests/e2e/test_hostlist_scontrol_e2e.py."""
    terms = []
    for _ in range(rng.randint(1, 4)):
        text = rng.choice(["n", "gpu", "rack", "node-", "a.b_", "x1y"])
        for _ in range(rng.randint(0, 3 if rng.random() < 0.3 else 2)):
            parts = []
            for _ in range(rng.randint(1, 2)):
                low = rng.choice([rng.randint(0, 12), rng.randint(90, 120)])
                width = rng.choice([1, 1, 2, 3, 4])
                high = low + rng.choice([0, 0, 1, 2])
                parts.append(f"{low:0{width}d}" if high == low and rng.random() < 0.5
                             else f"{low:0{width}d}-{high:0{rng.randint(1, width)}d}")
            text += f"[{','.join(parts)}]" + rng.choice(["", "-", "p", "x9-"])
        if "[" in text and not text.endswith("]"):
            text += f"[{rng.randint(0, 9)}]"  # Slurm allows nothing after the last ']'
        terms.append(text)
    return ",".join(terms)


@given(st.randoms(use_true_random=False))
def test_expand_matches_slurms_algorithm_and_compress_round_trips(rng: random.Random) -> None:
    expression = random_hostlist(rng)
    names = hostlist.expand(expression)
    assert names == slurm_reference(expression)
    assert hostlist.count(expression) == len(names)
    compressed = hostlist.compress(names)
    assert hostlist.expand(compressed) == names
    assert len(compressed) <= len(",".join(names))


_NODE = st.builds(lambda prefix, number, width: f"{prefix}{number:0{width}d}" if number >= 0 else prefix,
                  st.sampled_from(["n", "gpu", "rack1-n", "a.b", "x_"]), st.integers(-1, 40), st.integers(1, 4))


@given(st.lists(_NODE, max_size=60))
def test_compress_then_expand_gives_the_names_back(names: list[str]) -> None:
    compressed = hostlist.compress(names)
    assert (hostlist.expand(compressed) if names else []) == names
    assert len(compressed) <= len(",".join(names))


@given(st.text(alphabet="n1-,[]0x ", max_size=30))
def test_any_text_is_names_or_one_input_error(text: str) -> None:
    try:
        names = hostlist.expand(text)
    except InputError as error:
        assert error.message.startswith("--nodelist")
    else:
        assert names and all(name and not set(name) & set(",[] ") for name in names)
