"""Calibrate the achieved rates from a PyTorch profiler trace of the same model (issue 27).

The traced unit is one DualPipe F&B chunk pair (DeepSeek's profile-data ``train.json``: the forward chunk of one
stage overlapped with the backward chunk of another, ``num_layers`` MoE layers each, one micro-batch). The model
predicts that pair as ``Σ_x a[cell, x] u_x`` where ``x`` is one achieved rate of the node profile, ``u_x`` the
factor its seconds take (``1`` = the profile as it is; ``u = old rate / new rate``) and a cell is a (phase, op
class) pair:

- op classes of a kernel (:data:`KERNEL_CLASSES`, first match wins): ``attention`` (FlashAttention/MLA kernels),
  ``expert_gemm`` (M-grouped GEMMs), ``gemm`` (every other GEMM), ``communication`` (what ``dsctl trace``'s
  table calls communication: DeepEP, NCCL), ``elementwise`` (every other kernel, copies and memsets);
- phases: the ``user_annotation`` the host was inside when it launched the kernel, DeepSeek's names
  (``attn(F)``, ``mlp(B)``, ``dispatch(F)``, ...: :data:`PHASES`); a trace without them has one phase, ``all``.

The model's side of each cell comes from evaluating one layer with each rate made infinite in turn: the layer's
seconds are a sum of ``work / rate`` terms (``dsctl.steptime.gemm``, ``layers``), so the difference is exactly that
rate's share. Compute is counted at the SM-slowed speed the overlapped pair runs at (every slot of a MoE pair has
an all-to-all beside it). The rates fitted, by least squares over the cells: FP8 GEMM, grouped expert GEMM,
attention forward and backward, HBM (elementwise kernels and the GEMMs' memory phase) and the EP all-to-all (NIC
efficiency and achievable NVLink scale together). The BF16 GEMM rate (router) is too small a share to fit and
stays. The residual is what one factor per rate cannot explain across phases; the pair's wall, predicted through
the overlap rule with the calibrated rates, is checked against the trace's GPU wall (``dsctl trace overlap``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from dsctl.errors import InputError
from dsctl.profiles.schema import AchievedCompute, ModelProfile, NodeProfile
from dsctl.steptime.ep import EpCostModel, EpSeconds, fabric_ep
from dsctl.steptime.hardware import GpuRates, gpu_rates
from dsctl.steptime.layers import BlockSeconds, LayerSeconds, layer_seconds
from dsctl.steptime.stages import StageSeconds, overlapped_seconds
from dsctl.trace.classify import CLASS_CODE, Classifier, classify_names
from dsctl.trace.kernels import COMM
from dsctl.trace.overlap import analyse_trace, launch_times
from dsctl.trace.parse import TraceData

OP_CLASSES = ("attention", "gemm", "expert_gemm", "elementwise", "communication")
#: kernel name -> op class, in order (communication is decided first, by dsctl.trace's table)
KERNEL_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("attention", re.compile(r"flash|fmha|FlashAttn|flash_attn|mla_|_mla|attention", re.IGNORECASE)),
    ("expert_gemm", re.compile(r"m_grouped|grouped_gemm_contiguous|moe_gemm|GroupedGemm", re.IGNORECASE)),
    ("gemm", re.compile(r"gemm|xmma|cublas|nvjet|cutlass.*Kernel|wgmma", re.IGNORECASE)),
)
#: DeepSeek's annotations -> (block, direction) of the model; the comm phases' compute kernels (casts, layout)
#: count with the FFN block of their direction
PHASES = {
    "attn(F)": ("attention", "f"), "attn(B)": ("attention", "i"), "attn(W)": ("attention", "w"),
    "mlp(F)": ("ffn", "f"), "mlp(B)": ("ffn", "i"), "mlp(W)": ("ffn", "w"),
    "dispatch(F)": ("ffn", "f"), "combine(F)": ("ffn", "f"), "dispatch(B)": ("ffn", "i"),
    "combine(B)": ("ffn", "i"),
}
#: communication annotations -> the model's all-to-all (the dispatch's backward is a combine kernel and back)
COMM_PHASES = {"dispatch(F)": "dispatch_f", "combine(F)": "combine_f", "combine(B)": "dispatch_b",
               "dispatch(B)": "combine_b"}
_DIRECTION = {"f": "forward", "i": "input-gradient", "w": "weight-gradient"}


def cell_of(phase: str, cls: str) -> tuple[str, str]:
    """The fit's cell of a kernel of op class ``cls`` launched in ``phase``.

    GEMMs (dense and expert together: DeepSeek runs the experts' weight gradients as ordinary GEMMs) and the
    attention core count per annotation, attention or MLP block; elementwise kernels per direction only (the
    implementation's block boundaries differ from the model's: the router's top-k and the FFN norm launch inside
    ``attn(F)``); communication per annotation.
    """
    if phase not in PHASES:
        return phase, "gemm" if cls == "expert_gemm" else cls
    _, direction = PHASES[phase]
    if cls == "elementwise":
        return _DIRECTION[direction], cls
    if cls in ("gemm", "expert_gemm"):
        if phase in COMM_PHASES:
            phase = f"mlp({'F' if direction == 'f' else 'B'})"
        return phase, "gemm"
    return phase, cls


#: fitted rates: the node profile's ``gpu.achieved`` fractions of these names, and ``ep`` (the compute NIC's
#: efficiency and NVLink's achievable rate together)
ACHIEVED_FITTED = ("fp8_gemm", "moe_gemm", "attention_forward", "attention_backward", "hbm")
FITTED = (*ACHIEVED_FITTED, "ep")
#: GpuRates field -> the op class its time lands in, and the fitted rate it belongs to ("": not fitted)
_RATE_CLASS = {"fp8_gemm_flops": "gemm", "bf16_gemm_flops": "gemm", "gemm_hbm_bytes_per_s": "gemm",
               "moe_gemm_flops": "expert_gemm", "attention_forward_flops": "attention",
               "attention_backward_flops": "attention", "hbm_bytes_per_s": "elementwise"}
_RATE_PARAM = {"fp8_gemm_flops": "fp8_gemm", "moe_gemm_flops": "moe_gemm", "gemm_hbm_bytes_per_s": "hbm",
               "attention_forward_flops": "attention_forward", "attention_backward_flops": "attention_backward",
               "hbm_bytes_per_s": "hbm", "bf16_gemm_flops": ""}
#: a fitted rate whose cells hold less than this share of the traced kernel time keeps its profile value
MIN_SHARE = 0.005
#: communication kernels overlapped with compute for more than this fraction of their time are not timed
#: transfers: under overlap a DeepEP kernel starts when the host launches it and spins until its peers' data
#: arrive, so its duration is an upper bound of the transfer (train.json: 96% overlapped, notify/barrier kernels
#: 29% of the communication time). The EP rate then keeps its profile value (calibrated against Fig. 7)
MAX_COMM_OVERLAP_TO_FIT = 0.5
#: a trace whose compute kernels take more than this factor more or less than the model's pair is not a pair of
#: this model at this shape (wrong --chunk-layers, --tokens-per-gpu, --ep or model): refused
MAX_TRACE_SCALE = 3.0
#: a rate the fit moves by more than this factor either way is implausible for kernels of the same shapes (the
#: trace's kernels of that class are not the model's): kept, said so, and the others fitted without it
MAX_RATE_FACTOR = 3.0


@dataclass(frozen=True)
class MeasuredKernels:
    """Kernel seconds of one trace per (phase, op class); ``wall_s`` the GPU wall of its step window."""

    seconds: dict[tuple[str, str], float]
    by_class: dict[str, float]
    wall_s: float
    annotated: bool
    num_kernels: int
    #: communication kernel time that ran while compute ran (``dsctl trace overlap``'s overlapped / comm busy)
    comm_overlapped_fraction: float


def op_class(name: str, comm: bool) -> str:
    """The op class of one kernel name (``comm``: dsctl.trace's table calls it communication)."""
    if comm:
        return "communication"
    for cls, pattern in KERNEL_CLASSES:
        if pattern.search(name):
            return cls
    return "elementwise"


def shared_durations(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each interval's share of the busy time of their union, shape ``(n,)``: where ``k`` intervals run at once
    each gets ``1/k`` of that stretch (concurrent compute kernels share the SMs, so their durations add up to
    more than the time they took together; the shares add up to the busy time exactly)."""
    if start.size == 0:
        return np.zeros(0)
    edges = np.unique(np.concatenate([start, end]))
    i0, i1 = np.searchsorted(edges, start), np.searchsorted(edges, end)
    active = np.zeros(edges.size + 1)
    np.add.at(active, i0, 1.0)
    np.add.at(active, i1, -1.0)
    active = np.cumsum(active)[:-1]
    lengths = np.diff(edges)
    weight = np.where(active[:-1] > 0, lengths / np.maximum(active[:-1], 1.0), 0.0)
    cumulative = np.concatenate([[0.0], np.cumsum(weight)])
    return np.asarray(cumulative[i1] - cumulative[i0])


def measure(trace: TraceData) -> MeasuredKernels:
    """Sum the device kernels of ``trace`` (every device, every step) per (phase, op class): compute kernels by
    their share of the compute-busy time (:func:`shared_durations`), communication kernels by duration."""
    gpu = trace.gpu
    if gpu.size == 0:
        raise InputError(f"{trace.source}: no GPU kernels in the trace; calibration needs a trace with device "
                         "activity (torch.profiler with ProfilerActivity.CUDA)")
    codes, _ = classify_names(gpu.names, Classifier())
    name_class = np.array([OP_CLASSES.index(op_class(n, bool(c == CLASS_CODE[COMM])))
                           for n, c in zip(gpu.names, codes, strict=True)], dtype=np.int64)
    cls = name_class[gpu.name_code]
    cpu = trace.cpu
    phase_names = list(PHASES)
    code_phase = np.array([phase_names.index(n) if n in PHASES else -1 for n in cpu.names] or [-1], dtype=np.int64)
    marks = np.flatnonzero(cpu.annotation & (code_phase[cpu.name_code] >= 0)) if cpu.size else np.zeros(0, int)
    order = marks[np.argsort(cpu.start_us[marks], kind="stable")]
    starts, ends, mark_phase = cpu.start_us[order], cpu.end_us[order], code_phase[cpu.name_code[order]]
    annotated = bool(order.size)
    durations = (gpu.end_us - gpu.start_us) * 1e-6
    is_comm = cls == OP_CLASSES.index("communication")
    for device in np.unique(gpu.device):
        mask = (gpu.device == device) & ~is_comm
        durations[mask] = shared_durations(gpu.start_us[mask], gpu.end_us[mask]) * 1e-6
    outside = len(phase_names)  # "other" (annotated trace) or "all"
    phase = np.full(gpu.size, outside, dtype=np.int64)
    if annotated:
        launched = launch_times(gpu, trace)
        at = np.searchsorted(starts, launched, side="right") - 1
        inside = (at >= 0) & (launched <= ends[np.maximum(at, 0)])
        phase[inside] = mark_phase[at[inside]]
    n_cls = len(OP_CLASSES)
    sums = np.bincount(phase * n_cls + cls, weights=durations, minlength=(outside + 1) * n_cls)
    seconds: dict[tuple[str, str], float] = {}
    for key in np.flatnonzero(sums):
        p, c = divmod(int(key), n_cls)
        name = phase_names[p] if p < outside else ("other" if annotated else "all")
        cell = cell_of(name, OP_CLASSES[c])
        seconds[cell] = seconds.get(cell, 0.0) + float(sums[key])
    by_class = dict(zip(OP_CLASSES, (float(x) for x in np.bincount(cls, weights=durations, minlength=n_cls)),
                        strict=True))
    rows = analyse_trace(trace, 0, Classifier(), None, False, 1, False)
    wall = max((r.metrics.wall_us for r in rows), default=0.0) * 1e-6
    comm = sum(r.metrics.comm_busy_us for r in rows)
    both = sum(r.metrics.overlapped_us for r in rows)
    return MeasuredKernels(seconds, by_class, wall, annotated, gpu.size, both / comm if comm > 0 else 0.0)


def _layer(model: ModelProfile, rates: GpuRates, ep: int, tokens: int, seq_len: int,
           ep_cost: EpCostModel) -> LayerSeconds:
    return layer_seconds(model, True, float(tokens), seq_len, True, ep, rates, ep_cost, 1.0)


def _block_part(layer: LayerSeconds, block: str, direction: str) -> float:
    part: BlockSeconds = getattr(layer, block)
    return float(getattr(part, direction))


def model_cells(model: ModelProfile, rates: GpuRates, ep: int, num_layers: int, tokens: int, seq_len: int,
                ep_cost: EpCostModel, annotated: bool) -> dict[tuple[str, str], dict[str, float]]:
    """``cell -> {fitted rate: seconds}`` of the model's pair; the rate ``""`` is the part not fitted."""
    base = _layer(model, rates, ep, tokens, seq_len, ep_cost)
    s = rates.comm_slowdown
    cells: dict[tuple[str, str], dict[str, float]] = {}

    def add(cell: tuple[str, str], param: str, value: float) -> None:
        row = cells.setdefault(cell, {})
        row[param] = row.get(param, 0.0) + value

    for field_name in _RATE_CLASS:
        changed: dict[str, float] = {field_name: math.inf}
        if field_name == "hbm_bytes_per_s":  # keep the GEMMs' memory phase: it has its own field
            changed["gemm_hbm_bytes_per_s"] = rates.gemm_hbm
        without = _layer(model, replace(rates, **changed), ep, tokens, seq_len, ep_cost)  # type: ignore[arg-type]
        cls, param = _RATE_CLASS[field_name], _RATE_PARAM[field_name]
        for phase, (block, direction) in PHASES.items():
            if phase in COMM_PHASES:
                continue
            share = (_block_part(base, block, direction) - _block_part(without, block, direction)) * s * num_layers
            if share > 0:
                add(cell_of(phase if annotated else "all", cls), param, share)
    for phase, attr in COMM_PHASES.items():
        add((phase if annotated else "all", "communication"), "ep", float(getattr(base, attr)) * num_layers)
    return cells


@dataclass(frozen=True)
class FittedRate:
    """One fitted rate: ``factor`` its seconds took (``u``: > 1 slower than the profile), the profile value
    before and after, and its share of the traced kernel time."""

    name: str
    factor: float
    before: float
    after: float
    share: float
    fitted: bool
    note: str = ""


@dataclass(frozen=True)
class CellFit:
    """One (phase, op class) cell: measured and predicted kernel seconds before and after the fit."""

    phase: str
    op_class: str
    measured_s: float
    before_s: float
    after_s: float


@dataclass(frozen=True)
class Calibration:
    """What ``dsctl launch calibrate`` reports: the fitted rates, the cells, the residual and the pair's wall.

    ``residual_fraction`` = Σ |measured - fitted| over the cells / Σ measured (kernel time the fit leaves
    unexplained); ``residual_rms_s`` the root mean square of the cells' residuals.
    """

    source: str
    model: str
    node: str
    ep: int
    num_layers: int
    tokens: int
    num_kernels: int
    annotated: bool
    rates: tuple[FittedRate, ...]
    cells: tuple[CellFit, ...]
    residual_fraction: float
    residual_rms_s: float
    measured_by_class_s: dict[str, float]
    wall_s: float
    pair_before_s: float
    pair_after_s: float
    notes: tuple[str, ...]
    #: the calibrated node profile (not in the output: ``--out`` writes it)
    profile: NodeProfile = field(metadata={"output": False})
    #: the file ``--out`` wrote (set by the command)
    written: str = ""
    exit_code: int = field(default=0, metadata={"output": False})

    def to_data(self) -> dict[str, object]:
        from dataclasses import fields

        data: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self)
                                   if f.metadata.get("output", True)}
        data["pair_before_error"] = self.pair_before_error
        data["pair_after_error"] = self.pair_after_error
        return data

    @property
    def pair_before_error(self) -> float:
        return self.pair_before_s / self.wall_s - 1.0 if self.wall_s else math.nan

    @property
    def pair_after_error(self) -> float:
        return self.pair_after_s / self.wall_s - 1.0 if self.wall_s else math.nan


class _ScaledEp:
    """An EP cost model whose seconds are ``factor`` times another's."""

    def __init__(self, inner: EpCostModel, factor: float) -> None:
        self.inner, self.factor = inner, factor

    def __call__(self, tokens_per_gpu: float, dispatch_bytes_per_token: float,
                 combine_bytes_per_token: float) -> EpSeconds:
        x = self.inner(tokens_per_gpu, dispatch_bytes_per_token, combine_bytes_per_token)
        return EpSeconds(x.dispatch_s * self.factor, x.combine_s * self.factor)


def pair_seconds(model: ModelProfile, node: NodeProfile, ep: int, num_layers: int, tokens: int, seq_len: int,
                 ep_cost: EpCostModel) -> float:
    """One overlapped F&B op of two stages of ``num_layers`` MoE layers (no PP communication)."""
    rates = gpu_rates(node, model.training_precision)
    layer = _layer(model, rates, ep, tokens, seq_len, ep_cost)
    stage = StageSeconds(0, (layer,) * num_layers, BlockSeconds())
    return overlapped_seconds(stage, stage, rates.comm_slowdown)


def _solve(cells: dict[tuple[str, str], dict[str, float]], measured: dict[tuple[str, str], float],
           params: list[str], frozen: frozenset[str] = frozenset()) -> tuple[dict[str, float], dict[str, float]]:
    """Least-squares factors ``u`` per param (params without signal, or ``frozen``, keep 1), and each param's
    predicted share of the measured kernel time."""
    keys = sorted(set(cells) | set(measured))
    total = sum(measured.values()) or 1.0
    a = np.array([[cells.get(k, {}).get(p, 0.0) for p in params] for k in keys])
    fixed = np.array([cells.get(k, {}).get("", 0.0) for k in keys])
    m = np.array([measured.get(k, 0.0) for k in keys])
    share = {p: float(a[:, j].sum()) / total for j, p in enumerate(params)}
    active = [j for j, p in enumerate(params) if share[p] >= MIN_SHARE and p not in frozen]
    u = np.ones(len(params))
    if active:
        sub = a[:, active]
        target = m - fixed - a @ u + sub @ u[active]
        sol, *_ = np.linalg.lstsq(sub, target, rcond=None)
        for j, value in zip(active, sol, strict=True):
            u[j] = value if value > 0 else 1.0
    return {p: float(u[j]) for j, p in enumerate(params)}, share


def _saved(node: NodeProfile, factors: dict[str, float], notes: list[str]) -> tuple[NodeProfile, dict[str, tuple]]:
    """The node profile with each fitted rate divided by its factor; fractions above 1 are capped (noted)."""
    values, changes = {}, {}
    for name in ACHIEVED_FITTED:
        before = float(getattr(node.achieved, name))
        after = before / factors[name]
        if after > 1.0:
            notes.append(f"{name}: the trace implies {after:.3f} of peak, above 1; saved as 1.0 (check the "
                         "profile's peak figures)")
            after = 1.0
        values[name], changes[name] = after, (before, after)
    achieved = AchievedCompute(bf16_gemm=node.achieved.bf16_gemm, **values)
    eff_before = node.nic_efficiency
    eff_after = min(1.0, eff_before / factors["ep"])
    if eff_before / factors["ep"] > 1.0:
        notes.append(f"EP all-to-all ran {1 / factors['ep']:.2f}x faster than the profile's fabric model; NIC "
                     "efficiency capped at 1.0")
    nvlink = min(node.nvlink_achievable_bytes_per_s / factors["ep"], node.nvlink_bytes_per_s / 2)
    changes["ep"] = (eff_before, eff_after)
    profile = replace(node, achieved=achieved, nic_efficiency=eff_after, nvlink_achievable_bytes_per_s=nvlink)
    return profile, changes


def _check_scale(cells: dict[tuple[str, str], dict[str, float]], measured: dict[tuple[str, str], float],
                 source: str, num_layers: int, tokens: int, ep: int) -> None:
    """Refuse a trace whose compute is not within ``MAX_TRACE_SCALE`` of the model's pair."""
    model_s = sum(v for k, row in cells.items() if k[1] != "communication" for v in row.values())
    traced_s = sum(v for k, v in measured.items() if k[1] != "communication")
    if model_s <= 0 or not (model_s / MAX_TRACE_SCALE <= traced_s <= model_s * MAX_TRACE_SCALE):
        raise InputError(
            f"{source}: its compute kernels take {traced_s * 1e3:.3g} ms against {model_s * 1e3:.3g} ms for one F&B "
            f"pair of {num_layers} MoE layers per chunk at EP{ep} and {tokens} tokens per GPU; more than "
            f"{MAX_TRACE_SCALE:g}x apart, so the trace is not that pair",
            hint="give the traced shape with --chunk-layers, --tokens-per-gpu, --ep and --model (train.json: the "
                 "defaults)")


def calibrate(trace: TraceData, model: ModelProfile, node: NodeProfile, ep: int, num_layers: int = 4,
              tokens: int = 4096, seq_len: int = 4096, ep_cost: EpCostModel | None = None) -> Calibration:
    """Fit ``node``'s achieved rates to the kernel times of ``trace`` (one F&B chunk pair of ``model``, EP
    ``ep``, ``num_layers`` MoE layers per chunk, ``tokens`` per micro-batch). Raises InputError when the model
    has no MoE layers or the shape is impossible."""
    if model.moe is None:
        raise InputError(f"{model.name}: calibration traces one DualPipe pair of MoE layers; this model "
                         "has none", field="model")
    if not (1 <= num_layers <= model.num_layers) or tokens < 1 or seq_len < 1 or ep < 1:
        raise InputError(f"{num_layers}: expected 1..{model.num_layers} MoE layers per chunk (and "
                         "positive tokens, sequence length and EP)", field="chunk_layers")
    measured = measure(trace)
    ep_model = ep_cost or fabric_ep(model, node, ep)
    rates = gpu_rates(node, model.training_precision)
    cells = model_cells(model, rates, ep, num_layers, tokens, seq_len, ep_model, measured.annotated)
    params = list(FITTED)
    meas = {k: v for k, v in measured.seconds.items() if k[0] not in ("other",)}
    overlapped = measured.comm_overlapped_fraction > MAX_COMM_OVERLAP_TO_FIT
    _check_scale(cells, meas, trace.source, num_layers, tokens, ep)
    frozen = {"ep"} if overlapped else set()
    notes: list[str] = []
    while True:
        factors, share = _solve(cells, meas, params, frozenset(frozen))
        wild = [p for p in params if p not in frozen and not 1 / MAX_RATE_FACTOR <= factors[p] <= MAX_RATE_FACTOR]
        if not wild:
            break
        for p in wild:
            notes.append(f"{p}: the fit wanted x{factors[p]:.3g} its time, beyond {MAX_RATE_FACTOR:g}x either way: "
                         "the trace's kernels of that class are not the model's; the profile value is kept")
        frozen.update(wild)
    if overlapped:
        notes.append(f"communication ran {measured.comm_overlapped_fraction:.0%} under compute: its kernel durations "
                     "include waiting for peers, not transfer time alone, so the EP rate keeps the profile's "
                     "(calibrated against the paper's Fig. 7) and communication cells stay out of the residual")
    if not measured.annotated:
        notes.append("no DeepSeek phase annotations (attn(F), mlp(B), ...) in the trace: one cell per op class, so "
                     "the fit is exact per class and its residual says nothing")
    other = sum(v for k, v in measured.seconds.items() if k[0] == "other")
    if other:
        notes.append(f"{other * 1e3:.3f} ms of kernels launched outside the phase annotations are not fitted")
    profile, changes = _saved(node, factors, notes)
    fitted_rates = []
    for p in params:
        before, after = changes[p]
        ok = share[p] >= MIN_SHARE and p not in frozen
        why = "kept: overlapped" if p == "ep" and overlapped else \
            "kept: implausible" if p in frozen else "kept: small share"
        fitted_rates.append(FittedRate(p, factors[p], before, after, share[p], ok, "" if ok else why))
    cell_rows, residuals = [], []
    total = sum(v for k, v in meas.items() if not (overlapped and k[1] == "communication"))
    for key in sorted(set(cells) | set(meas)):
        row = cells.get(key, {})
        before_s = sum(row.values())
        after_s = row.get("", 0.0) + sum(v * factors[p] for p, v in row.items() if p)
        cell_rows.append(CellFit(key[0], key[1], meas.get(key, 0.0), before_s, after_s))
        if not (overlapped and key[1] == "communication"):
            residuals.append(meas.get(key, 0.0) - after_s)
    res = np.array(residuals)
    after_ep = _ScaledEp(ep_cost, factors["ep"]) if ep_cost else fabric_ep(model, profile, ep)
    before_pair = pair_seconds(model, node, ep, num_layers, tokens, seq_len, ep_model)
    after_pair = pair_seconds(model, profile, ep, num_layers, tokens, seq_len, after_ep)
    return Calibration(
        source=trace.source, model=model.name, node=node.name, ep=ep, num_layers=num_layers, tokens=tokens,
        num_kernels=measured.num_kernels, annotated=measured.annotated, rates=tuple(fitted_rates),
        cells=tuple(cell_rows), residual_fraction=float(np.abs(res).sum() / total) if total else 0.0,
        residual_rms_s=float(np.sqrt(np.mean(res ** 2))) if res.size else 0.0,
        measured_by_class_s=measured.by_class, wall_s=measured.wall_s, pair_before_s=before_pair,
        pair_after_s=after_pair, notes=tuple(notes), profile=profile)
