"""Loads the exercises' pytest option, --impl FILE (exercises/plugin.py), for every run from this folder."""
from support import cpu; cpu.fair_share()  # noqa: E702  before anything loads torch: OpenMP then shares a busy CPU (cpu.py)

pytest_plugins = ["exercises.plugin"]
