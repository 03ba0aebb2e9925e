"""Thin Typer layer: parse arguments, call one domain function, hand the result to ``dsctl.output``."""
