"""Training-launch planning: parallel layout, stage split, memory fit, rank map and pipeline schedules."""
