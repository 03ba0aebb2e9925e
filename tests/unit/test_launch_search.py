"""dsctl.launch.explanation and batch_suggestion: why each candidate pp was passed over, the error naming the
preferred layout, fixes."""

from __future__ import annotations

import pytest

from dsctl.launch.batch import batch_suggestion
from dsctl.launch.candidates import Candidate
from dsctl.launch.explanation import (
    missed_fit_notes,
    no_layout_error,
    preferred_candidate,
    rejection_lines,
    rejection_reason,
)
from dsctl.launch.memory import MemoryEstimate
from dsctl.units import GIB

HBM = 80 * GIB


def _memory(total_gib: float) -> MemoryEstimate:
    total = int(total_gib * GIB)
    return MemoryEstimate(hbm_bytes=HBM, tokens_per_micro_batch=4096, activation_bytes_per_token_layer=1,
                          fits=total <= HBM, worst_pp_rank=0, max_total_bytes=total, headroom_bytes=HBM - total,
                          per_rank=())


CONSIDERED = [
    Candidate(2, 1024, "PP2 EP64 TP1 DP1024", "--global-batch 3840 % dp 1024 = 768", None, _memory(221.8)),
    Candidate(8, 256, "PP8 EP64 TP1 DP256", memory=_memory(93.6)),
    Candidate(16, 128, "PP16 EP64 TP1 DP128", "dualpipe needs ... >= 2 x pp = 32; got 30", None, _memory(69.1)),
    Candidate(32, 64, "PP32 EP64 TP1 DP64", "dualpipe needs ... >= 2 x pp = 64; got 60", None, _memory(58.8)),
]


def test_reasons() -> None:
    assert rejection_reason(CONSIDERED[1]) == "does not fit: needs 93.6 GiB per GPU > 80.0 GiB HBM"
    assert rejection_reason(CONSIDERED[2]).endswith("(it would fit in memory: 69.1 GiB per GPU)")
    full = rejection_reason(CONSIDERED[0])
    assert full.startswith("--global-batch 3840 % dp 1024") and "would not fit either: needs 221.8 GiB" in full
    assert rejection_reason(CONSIDERED[0], terse=True) == "does not fit: needs 221.8 GiB per GPU > 80.0 GiB HBM"
    assert rejection_reason(Candidate(4, 512, "pp 4", "ep 7 bad")) == "ep 7 bad"


def test_preferred_is_the_smallest_that_fits_even_if_rejected_by_a_batch_rule() -> None:
    preferred, why = preferred_candidate(CONSIDERED)
    assert preferred.pp == 16 and "smallest pp whose memory fits" in why
    closest, why = preferred_candidate(CONSIDERED[:2])
    assert closest.pp == 8 and "closest" in why
    first, _ = preferred_candidate([Candidate(4, 512, "pp 4", "bad"), Candidate(8, 256, "pp 8", "worse")])
    assert first.pp == 4


def test_no_layout_error_names_the_preferred_layout() -> None:
    only_rejected = [c for c in CONSIDERED if c.error]
    err = no_layout_error(only_rejected, 256, "dualpipe", 3840, None)
    assert err.message.startswith("PP16 EP64 TP1 DP128, the layout dsctl would choose for 256 nodes")
    assert err.message.endswith("got 30")
    assert err.hint is not None and err.hint.startswith("use --global-batch 4096")
    assert "pp 2: does not fit" in err.hint and "pp 32: dualpipe" in err.hint


def test_lines_and_missed_fit_notes() -> None:
    lines = rejection_lines(CONSIDERED, chosen_pp=8)
    assert [line.split(":")[0] for line in lines] == ["pp 2 rejected", "pp 16 rejected", "pp 32 rejected"]
    notes = missed_fit_notes(CONSIDERED, chosen_fits=False, schedule="dualpipe", global_batch=None,
                             micro_batches=30)
    assert len(notes) == 1
    assert notes[0].startswith("PP16 EP64 TP1 DP128 would fit in memory (69.1 GiB per GPU)")
    assert notes[0].endswith("--micro-batches 32 lets dsctl choose it")
    assert missed_fit_notes(CONSIDERED, True, "dualpipe", None, 30) == []


@pytest.mark.parametrize(
    ("schedule", "pp", "dp", "global_batch", "micro_batches", "expected"),
    [
        ("dualpipe", 16, 128, 3840, None, "--global-batch 4096 (dp 128 x 32 micro-batches of 1 sequence)"),
        ("dualpipe", 16, 128, 1000, None, "--global-batch 4096 (dp 128 x 32 micro-batches of 1 sequence)"),
        ("dualpipe", 8, 256, 15360 * 2, None, None),
        ("dualpipe", 16, 128, None, 31, "--micro-batches 32"),
        ("dualpipe", 16, 128, None, 40, None),
        ("dualpipe", 16, 128, 15360, 7, "--micro-batches 32 --global-batch 16384 (dp 128 x 32 micro-batches x 4 "
                                        "sequence(s))"),
        ("1f1b", 8, 64, 1000, None, "--global-batch 1024 (dp 64 x 16 micro-batches of 1 sequence)"),
        ("dualpipev", 4, 64, None, 5, "--micro-batches 8"),
    ],
)
def test_batch_suggestion(schedule: str, pp: int, dp: int, global_batch: int | None, micro_batches: int | None,
                          expected: str | None) -> None:
    assert batch_suggestion(schedule, pp, dp, global_batch, micro_batches) == expected
