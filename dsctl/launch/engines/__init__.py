"""Job renderers for ``dsctl launch --backend``: a LaunchPlan in, job text or manifests out (pure, no I/O).

- :mod:`.spec`: engine options (:class:`JobOptions`), the job facts taken from a plan (:class:`JobSpec`) and the
  ``DSCTL_*`` environment that carries the layout to the training script;
- :mod:`.slurm`: the ``sbatch`` script (one torchrun agent per node through ``srun``);
- :mod:`.torchrun`: one torchrun command line per node, and a ``torchrun.sh`` wrapper;
- :mod:`.kubernetes`: a headless Service and a JobSet as plain dicts (the command layer turns them into YAML);
- :mod:`.result`: what ``--submit`` reports.

Subprocesses (``sbatch``, ``torchrun``, ``kubectl``) are run by ``dsctl.runners``, never from here.
"""
