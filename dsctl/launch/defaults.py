"""Launch defaults the command line shows in its help: plain constants, importable without numpy."""

#: tokens per sequence (DeepSeek-V3 pre-training)
DEFAULT_SEQ_LEN = 4_096

#: torchrun's default rendezvous port
DEFAULT_PORT = 29_500

#: job name when ``--job-name`` is not given
DEFAULT_JOB_NAME = "dsctl-train"
