"""Launching: what every pipeline's launch shares.

options.py       Beam pipeline options: pass-through flags, defaults, --workers
checks.py        launch-time checks of the runner options, before anything is planned
logs.py          --log-level: Beam's log lines, in the launcher and the workers
progress.py      live progress bars on a terminal, JSON lines otherwise
"""
