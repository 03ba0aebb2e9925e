"""Issue 15 classes 2 and 6: one full-match validator for names reaching generated files, escaping per format."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.launch.engines.spec import JobOptions, check_job_name, check_options
from dsctl.names import DEVICE, NAME, check_name, check_slurm_conf_name, comment_text, dot_string, xml_text
from tests.unit.launch_messages import as_read

TRAILING_NEWLINE = ["v3\n", "v3\r", "v3\n#SBATCH --uid=0", "v3\x00", " v3", "v3 "]


@pytest.mark.parametrize("value", TRAILING_NEWLINE)
def test_name_validator_is_a_full_match(value: str) -> None:
    with pytest.raises(InputError, match="not a valid name"):
        check_name(value, "--thing")


@pytest.mark.parametrize("value", ["v3\n", "v3\n\n", "x\nrm -rf /"])
def test_job_options_refuse_a_trailing_newline(value: str) -> None:
    """Python's ``$`` matches before a final newline: these validators used it and accepted "v3\\n"."""
    checks = [("--job-name", lambda: check_job_name(value, "slurm")),
              ("--job-name", lambda: check_job_name(value.lower(), "kubernetes")),
              ("--partition", lambda: check_options(JobOptions(partition=value), "slurm", 1)),
              ("--hosts", lambda: check_options(JobOptions(hosts=("h1" + value[2:],)), "torchrun", 1)),
              ("--time", lambda: check_options(JobOptions(time_limit="10" + value[2:]), "slurm", 1))]
    for flag, check in checks:
        with pytest.raises(InputError) as info:
            check()
        assert as_read(info).startswith(flag), flag  # as 'dsctl launch' spells the field

def test_image_must_be_one_token() -> None:
    for image in ("img:1\n", "img:1\nkind: Pod", "img 1", "img'1"):
        with pytest.raises(InputError, match="--image"):
            check_options(JobOptions(image=image), "kubernetes", 1)
    check_options(JobOptions(image="registry.example.com/team/train:v1@sha256:abc"), "kubernetes", 1)


@given(st.text(max_size=40))
def test_accepted_names_have_no_separator_of_any_format(value: str) -> None:
    try:
        check_name(value, "--x")
    except InputError:
        return
    assert NAME.fullmatch(value) and not re.search(r"[\s#=\"'$`\\;]", value)


@given(st.text(max_size=40))
def test_comment_text_is_one_line(text: str) -> None:
    assert len(comment_text(text).splitlines()) <= 1 and "\x00" not in comment_text(text)


@given(st.text(max_size=40))
def test_dot_string_is_one_closed_string(text: str) -> None:
    quoted = dot_string(text)
    body = quoted[1:-1]
    assert quoted.startswith('"') and quoted.endswith('"') and "\n" not in quoted
    assert not re.search(r'(?<!\\)(?:\\\\)*"', body), quoted  # every inner quote is escaped


@given(st.text(max_size=40))
def test_xml_text_always_parses(text: str) -> None:
    root = ET.fromstring(f'<svg a="{xml_text(text)}">{xml_text(text)}</svg>')
    assert root.tag == "svg"


@pytest.mark.parametrize("name", ["leaf#1", "leaf=1", "leaf 1", "leaf\t1", "leaf\n1", "-leaf"])
def test_slurm_conf_names_refuse_comment_and_key_characters(name: str) -> None:
    with pytest.raises(InputError, match="Slurm"):
        check_slurm_conf_name(name, "device name")
    assert not DEVICE.fullmatch(name)
