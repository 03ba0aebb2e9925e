"""dsctl: a toolkit for operators of DeepSeek-V3-style GPU training clusters."""

__version__ = "0.1.0"
