"""Launching: what every pipeline's launch shares.

options.py       Beam pipeline options: pass-through flags, defaults, --workers
checks.py        launch-time checks of the runner options, before anything is planned
logs.py          --log-level: Beam's log lines, in the launcher and the workers
workers.py       local worker processes out of Ctrl-C's reach: the launcher stops them and prints one line
sizes.py         sizes with units (1GiB, 500MB) for every flag that takes one
progress.py      live progress bars on a terminal, JSON lines otherwise
"""
