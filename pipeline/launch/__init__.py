"""Launching: settings validated once, Beam options, runner checks, progress, the Dataflow translation."""
