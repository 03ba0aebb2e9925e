"""Issue 27 acceptance on DeepSeek's profile-data ``train.json`` (not shipped: its repository has no licence).

    python -m benchmarks.calibrate_train_json /path/to/train.json

Prints the F&B pair predicted from the built-in profiles and after ``dsctl launch calibrate`` against the trace's
GPU wall (``dsctl trace overlap``), the fit's residual, and the DeepSeek-V3 step of Table 4's layout with the
calibrated profile. Exit 1 when the pair misses 10% (profiles) or 3% (calibrated).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dsctl.launch.layout import ParallelLayout
from dsctl.profiles.loader import ProfileStore
from dsctl.steptime import predict_step
from dsctl.steptime.calibrate import calibrate
from dsctl.trace import read_trace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", default=os.environ.get("DSCTL_TRACE_TRAIN_JSON"),
                        help="train.json (default: $DSCTL_TRACE_TRAIN_JSON)")
    args = parser.parse_args(argv)
    if not args.trace:
        parser.error("give the path of train.json")
    store = ProfileStore()
    model, node = store.model("deepseek-v3"), store.node("h800-hgx")
    path = Path(args.trace)
    result = calibrate(read_trace([path.read_bytes()], str(path)), model, node, 64)
    print(f"traced wall {result.wall_s * 1e3:.1f} ms; pair from the profiles {result.pair_before_s * 1e3:.1f} ms "
          f"({result.pair_before_error:+.1%}), calibrated {result.pair_after_s * 1e3:.1f} ms "
          f"({result.pair_after_error:+.1%}); fit residual {result.residual_fraction:.1%}")
    for rate in result.rates:
        print(f"  {rate.name:<19} x{rate.factor:.3f}  {rate.before:.3f} -> {rate.after:.3f}  {rate.note}")
    layout = ParallelLayout(num_nodes=256, gpus_per_node=8, pp=16, ep=64, tp=1, dp=128, schedule="dualpipe")
    for label, profile in (("profiles", node), ("calibrated", result.profile)):
        step = predict_step(model, profile, layout, 120)
        print(f"V3 step on 2,048 H800 ({label}): {step.step_s:.3f} s against Table 4's 19.926 s "
              f"({step.step_s / 19.926 - 1:+.1%})")
    ok = abs(result.pair_before_error) < 0.10 and abs(result.pair_after_error) < 0.03
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
