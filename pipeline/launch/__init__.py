"""Launching: what every pipeline's launch shares.

options.py       Beam pipeline options: pass-through flags, defaults, --workers
checks.py        launch-time checks of the runner options, before anything is planned
logs.py          --log-level: Beam's log lines, in the launcher and the workers
workers.py       local worker processes out of Ctrl-C's reach, forked from a fork server started at launch
preload.py       what the fork server loads before it forks: the job's tokenizers
sizes.py         sizes with units (1GiB, 500MB) for every flag that takes one
progress.py      live progress bars on a terminal, JSON lines otherwise
"""
