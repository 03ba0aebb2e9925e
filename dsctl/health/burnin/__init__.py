"""``dsctl health burn-in``: rounds designed from plan.json, judged against the simulator, faults localised.

Modules: ``design`` (rounds, coverage, lower bound), ``judge`` (slow flows: below a fraction of the simulated
expectation and a median/MAD outlier), ``locate`` (suspects, proven-good links, findings, follow-up rounds),
``fabric`` (a simulated fabric with injected faults for rehearsals), ``request`` (what is asked, its option rules,
whether an NVLink round runs), ``api`` (the whole run, the drain plan), ``reports`` (a run judged from saved perftest
/ nccl-tests reports). See docs/burn-in.md.
"""
